// The SegFormer trunk (trunks/vision_segformer.h).
#include "workers/zoo/trunks/vision_segformer.h"

#include <cmath>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

constexpr double kSegformerLnEps = 1e-5;  // nn.LayerNorm's default

std::string SegformerIndexed(const std::string& p, int64_t i) {
  return p + std::to_string(i) + ".";
}

at::Tensor SegformerLn(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::LayerNorm(x, GetWeight(w, p + "weight"), GetWeight(w, p + "bias"), kSegformerLnEps);
}

at::Tensor SegformerLin(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::Linear(x, GetWeight(w, p + "weight"), GetWeight(w, p + "bias"));
}

}  // namespace

int64_t SegformerRecipe::MapSide(int64_t stage) const {
  int64_t side = image_size;
  for (int64_t i = 0; i <= stage; ++i) {
    const int64_t k = patch_sizes[i];
    side = (side + 2 * (k / 2) - k) / strides[i] + 1;
  }
  return side;
}

SegformerTrunk::SegformerTrunk(SegformerRecipe recipe)
    : VisionTrunk(recipe.channels, recipe.image_size), r_(std::move(recipe)) {
  const std::string enc = r_.prefix + "encoder.";
  int64_t in = r_.channels;
  for (int64_t i = 0; i < r_.stages(); ++i) {
    const int64_t h = r_.hidden_sizes[i], k = r_.patch_sizes[i];
    const std::string pe = SegformerIndexed(enc + "patch_embeddings.", i);
    Add(pe + "proj.weight", {h, in, k, k});
    Add(pe + "proj.bias", {h});
    Add(pe + "layer_norm.weight", {h});
    Add(pe + "layer_norm.bias", {h});
    const auto mlp = static_cast<int64_t>(static_cast<double>(h) * r_.mlp_ratios[i]);
    for (int64_t j = 0; j < r_.depths[i]; ++j) {
      const std::string l = SegformerIndexed(SegformerIndexed(enc + "block.", i), j);
      Add(l + "layer_norm_1.weight", {h});
      Add(l + "layer_norm_1.bias", {h});
      for (const char* m : {"query", "key", "value"}) {
        Add(l + "attention.self." + m + ".weight", {h, h});
        Add(l + "attention.self." + m + ".bias", {h});
      }
      const int64_t sr = r_.sr_ratios[i];
      if (sr > 1) {
        Add(l + "attention.self.sr.weight", {h, h, sr, sr});
        Add(l + "attention.self.sr.bias", {h});
        Add(l + "attention.self.layer_norm.weight", {h});
        Add(l + "attention.self.layer_norm.bias", {h});
      }
      Add(l + "attention.output.dense.weight", {h, h});
      Add(l + "attention.output.dense.bias", {h});
      Add(l + "layer_norm_2.weight", {h});
      Add(l + "layer_norm_2.bias", {h});
      Add(l + "mlp.dense1.weight", {mlp, h});
      Add(l + "mlp.dense1.bias", {mlp});
      Add(l + "mlp.dwconv.dwconv.weight", {mlp, 1, 3, 3});
      Add(l + "mlp.dwconv.dwconv.bias", {mlp});
      Add(l + "mlp.dense2.weight", {h, mlp});
      Add(l + "mlp.dense2.bias", {h});
    }
    Add(SegformerIndexed(enc + "layer_norm.", i) + "weight", {h});
    Add(SegformerIndexed(enc + "layer_norm.", i) + "bias", {h});
    in = h;
  }
}

at::Tensor SegformerTrunk::Layer(const WeightMap& w, int64_t stage, int64_t layer, at::Tensor x,
                                 int64_t height, int64_t width) const {
  const std::string l =
      SegformerIndexed(SegformerIndexed(r_.prefix + "encoder.block.", stage), layer);
  const int64_t b = x.size(0), n = x.size(1), c = x.size(2), nh = r_.heads[stage];
  const int64_t hd = c / nh, sr = r_.sr_ratios[stage];
  auto heads = [&](const at::Tensor& t) {
    return t.view({b, t.size(1), nh, hd}).permute({0, 2, 1, 3});
  };
  // SegformerEfficientSelfAttention over layer_norm_1(x).
  at::Tensor y = SegformerLn(w, l + "layer_norm_1.", x);
  at::Tensor q = heads(SegformerLin(w, l + "attention.self.query.", y));
  at::Tensor kv = y;
  if (sr > 1) {
    kv = y.permute({0, 2, 1}).reshape({b, c, height, width});
    kv = nn::Conv2d(kv, GetWeight(w, l + "attention.self.sr.weight"),
                    GetWeight(w, l + "attention.self.sr.bias"), sr);
    kv =
        SegformerLn(w, l + "attention.self.layer_norm.", kv.reshape({b, c, -1}).permute({0, 2, 1}));
  }
  at::Tensor k = heads(SegformerLin(w, l + "attention.self.key.", kv));
  at::Tensor v = heads(SegformerLin(w, l + "attention.self.value.", kv));
  at::Tensor ctx = nn::Attention(q, k, v, at::Tensor(), 1.0 / std::sqrt(static_cast<double>(hd)));
  ctx = ctx.permute({0, 2, 1, 3}).reshape({b, n, c});
  x = SegformerLin(w, l + "attention.output.dense.", ctx) + x;
  // SegformerMixFFN over layer_norm_2(x).
  y = SegformerLin(w, l + "mlp.dense1.", SegformerLn(w, l + "layer_norm_2.", x));
  const int64_t m = y.size(2);
  y = y.transpose(1, 2).view({b, m, height, width});
  y = nn::Conv2d(y, GetWeight(w, l + "mlp.dwconv.dwconv.weight"),
                 GetWeight(w, l + "mlp.dwconv.dwconv.bias"), /*stride=*/1, /*padding=*/1,
                 /*groups=*/m);
  y = nn::Activate(y.flatten(2).transpose(1, 2), r_.act);
  return SegformerLin(w, l + "mlp.dense2.", y) + x;
}

VisionFeatures SegformerTrunk::Forward(const WeightMap& w, const at::Tensor& pixel_values) const {
  const std::string enc = r_.prefix + "encoder.";
  const int64_t b = pixel_values.size(0);
  VisionFeatures f;
  at::Tensor x = pixel_values;
  for (int64_t i = 0; i < r_.stages(); ++i) {
    const std::string pe = SegformerIndexed(enc + "patch_embeddings.", i);
    const int64_t k = r_.patch_sizes[i];
    x = nn::Conv2d(x, GetWeight(w, pe + "proj.weight"), GetWeight(w, pe + "proj.bias"),
                   r_.strides[i], k / 2);
    const int64_t height = x.size(2), width = x.size(3);
    at::Tensor t = SegformerLn(w, pe + "layer_norm.", x.flatten(2).transpose(1, 2));
    for (int64_t j = 0; j < r_.depths[i]; ++j) t = Layer(w, i, j, t, height, width);
    t = SegformerLn(w, SegformerIndexed(enc + "layer_norm.", i), t);
    x = t.reshape({b, height, width, -1}).permute({0, 3, 1, 2}).contiguous();
    f.stages.push_back(x);
  }
  f.last_hidden_state = x;
  // SegformerForImageClassification: permute to channels-last, flatten, mean over the tokens.
  f.pooled = x.permute({0, 2, 3, 1}).reshape({b, -1, x.size(1)}).mean(1);
  return f;
}

std::vector<int64_t> SegformerTrunk::LastHiddenShape() const {
  const int64_t side = r_.MapSide(r_.stages() - 1);
  return {r_.hidden_sizes.back(), side, side};
}

}  // namespace ts::zoo::internal
