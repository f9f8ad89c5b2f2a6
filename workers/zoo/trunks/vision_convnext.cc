// ConvNeXt trunk (trunks/vision_convnext.h).
#include "workers/zoo/trunks/vision_convnext.h"

#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

// LayerNorm over the channels of NCHW.
at::Tensor LnChannels(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  return nn::LayerNorm(x.permute({0, 2, 3, 1}), GetWeight(w, p + "weight"),
                       GetWeight(w, p + "bias"), eps)
      .permute({0, 3, 1, 2});
}

}  // namespace

ConvNextTrunk::ConvNextTrunk(ConvNextRecipe recipe)
    : VisionTrunk(recipe.num_channels, recipe.image_size), r_(std::move(recipe)) {
  const std::string& pre = r_.prefix;
  const int64_t h0 = r_.hidden_sizes[0], p = r_.patch_size;
  Add(pre + "embeddings.patch_embeddings.weight", {h0, r_.num_channels, p, p});
  Add(pre + "embeddings.patch_embeddings.bias", {h0});
  Add(pre + "embeddings.layernorm.weight", {h0});
  Add(pre + "embeddings.layernorm.bias", {h0});
  int64_t in = h0;
  hw_ = r_.image_size / r_.patch_size;
  for (size_t s = 0; s < r_.hidden_sizes.size(); ++s) {
    const int64_t out = r_.hidden_sizes[s];
    const std::string sp = pre + "encoder.stages." + std::to_string(s) + ".";
    if (s > 0) {
      Add(sp + "downsampling_layer.0.weight", {in});
      Add(sp + "downsampling_layer.0.bias", {in});
      Add(sp + "downsampling_layer.1.weight", {out, in, 2, 2});
      Add(sp + "downsampling_layer.1.bias", {out});
      hw_ /= 2;
    }
    for (int64_t l = 0; l < r_.depths[s]; ++l) {
      const std::string lp = sp + "layers." + std::to_string(l) + ".";
      Add(lp + "dwconv.weight", {out, 1, 7, 7});
      Add(lp + "dwconv.bias", {out});
      Add(lp + "layernorm.weight", {out});
      Add(lp + "layernorm.bias", {out});
      Add(lp + "pwconv1.weight", {4 * out, out});
      Add(lp + "pwconv1.bias", {4 * out});
      if (r_.grn) {
        Add(lp + "grn.weight", {1, 1, 1, 4 * out});
        Add(lp + "grn.bias", {1, 1, 1, 4 * out});
      }
      Add(lp + "pwconv2.weight", {out, 4 * out});
      Add(lp + "pwconv2.bias", {out});
      if (r_.layer_scale_init_value > 0) Add(lp + "layer_scale_parameter", {out});
    }
    in = out;
  }
  if (r_.final_layernorm) {
    Add(pre + "layernorm.weight", {in});
    Add(pre + "layernorm.bias", {in});
  }
}

VisionFeatures ConvNextTrunk::Forward(const WeightMap& w, const at::Tensor& pixel_values) const {
  const std::string& p = r_.prefix;
  auto weight = [&](const std::string& n) { return GetWeight(w, n + ".weight"); };
  auto bias = [&](const std::string& n) { return GetWeight(w, n + ".bias"); };
  at::Tensor x = nn::Conv2d(pixel_values, weight(p + "embeddings.patch_embeddings"),
                            bias(p + "embeddings.patch_embeddings"), r_.patch_size, 0);
  x = LnChannels(w, p + "embeddings.layernorm.", x, 1e-6);
  for (size_t s = 0; s < r_.hidden_sizes.size(); ++s) {
    const std::string sp = p + "encoder.stages." + std::to_string(s) + ".";
    if (s > 0) {
      x = LnChannels(w, sp + "downsampling_layer.0.", x, 1e-6);
      x = nn::Conv2d(x, weight(sp + "downsampling_layer.1"), bias(sp + "downsampling_layer.1"), 2,
                     0);
    }
    const int64_t ch = r_.hidden_sizes[s];
    for (int64_t l = 0; l < r_.depths[s]; ++l) {
      const std::string lp = sp + "layers." + std::to_string(l) + ".";
      at::Tensor y = nn::Conv2d(x, weight(lp + "dwconv"), bias(lp + "dwconv"), 1, 3, ch);
      y = y.permute({0, 2, 3, 1});
      y = nn::LayerNorm(y, weight(lp + "layernorm"), bias(lp + "layernorm"), 1e-6);
      y = Activate(nn::Linear(y, weight(lp + "pwconv1"), bias(lp + "pwconv1")), r_.act);
      if (r_.grn) {  // NHWC: the L2 norm over H, W per channel, over its mean across channels
        at::Tensor g = at::linalg_vector_norm(y, 2, at::IntArrayRef({1, 2}), /*keepdim=*/true);
        at::Tensor n = g / (g.mean(-1, /*keepdim=*/true) + 1e-6);
        y = weight(lp + "grn") * (y * n) + bias(lp + "grn") + y;
      }
      y = nn::Linear(y, weight(lp + "pwconv2"), bias(lp + "pwconv2"));
      if (r_.layer_scale_init_value > 0) y = GetWeight(w, lp + "layer_scale_parameter") * y;
      x = x + y.permute({0, 3, 1, 2});
    }
  }
  if (!r_.final_layernorm) return {x, x.mean({2, 3})};
  at::Tensor pooled = nn::LayerNorm(x.mean({2, 3}), weight(p + "layernorm"), bias(p + "layernorm"),
                                    r_.layer_norm_eps);
  return {x, pooled};
}

std::vector<int64_t> ConvNextTrunk::LastHiddenShape() const {
  return {r_.hidden_sizes.back(), hw_, hw_};
}

}  // namespace ts::zoo::internal
