// The BEiT trunk (trunks/vision_beit.h).
#include "workers/zoo/trunks/vision_beit.h"

#include <cmath>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

// generate_relative_position_index((grid, grid)), flattened.
at::Tensor RelativePositionIndex(int64_t grid) {
  const int64_t area = grid * grid, side = 2 * grid - 1, distances = side * side + 3;
  at::Tensor index = at::zeros({area + 1, area + 1}, at::TensorOptions().dtype(at::kLong));
  auto acc = index.accessor<int64_t, 2>();
  for (int64_t i = 0; i < area; ++i) {
    for (int64_t j = 0; j < area; ++j) {
      const int64_t dy = i / grid - j / grid + grid - 1, dx = i % grid - j % grid + grid - 1;
      acc[i + 1][j + 1] = dy * side + dx;
    }
  }
  for (int64_t j = 0; j <= area; ++j) acc[0][j] = distances - 3;  // cls to token
  for (int64_t i = 0; i <= area; ++i) acc[i][0] = distances - 2;  // token to cls
  acc[0][0] = distances - 1;                                      // cls to cls
  return index.view({-1});
}

}  // namespace

BeitTrunk::BeitTrunk(BeitRecipe recipe)
    : VisionTrunk(recipe.channels, recipe.image_size),
      r_(std::move(recipe)),
      index_(RelativePositionIndex(r_.Grid())) {
  const int64_t h = r_.hidden, p = r_.patch_size, g = r_.Grid();
  const int64_t distances = (2 * g - 1) * (2 * g - 1) + 3;
  const std::string& pre = r_.prefix;
  Add(pre + "embeddings.cls_token", {1, 1, h});
  if (r_.absolute_positions) Add(pre + "embeddings.position_embeddings", {1, g * g + 1, h});
  Add(pre + "embeddings.patch_embeddings.projection.weight", {h, r_.channels, p, p});
  Add(pre + "embeddings.patch_embeddings.projection.bias", {h});
  if (r_.shared_relative_bias)
    Add(pre + "encoder.relative_position_bias.relative_position_bias_table", {distances, r_.heads});
  for (int64_t i = 0; i < r_.layers; ++i) {
    const std::string l = pre + "encoder.layer." + std::to_string(i) + ".";
    Add(l + "layernorm_before.weight", {h});
    Add(l + "layernorm_before.bias", {h});
    Add(l + "attention.q_proj.weight", {h, h});
    Add(l + "attention.q_proj.bias", {h});
    Add(l + "attention.k_proj.weight", {h, h});
    Add(l + "attention.v_proj.weight", {h, h});
    Add(l + "attention.v_proj.bias", {h});
    Add(l + "attention.o_proj.weight", {h, h});
    Add(l + "attention.o_proj.bias", {h});
    if (r_.relative_bias)
      Add(l + "relative_position_bias.relative_position_bias_table", {distances, r_.heads});
    Add(l + "layernorm_after.weight", {h});
    Add(l + "layernorm_after.bias", {h});
    Add(l + "mlp.fc1.weight", {r_.intermediate, h});
    Add(l + "mlp.fc1.bias", {r_.intermediate});
    Add(l + "mlp.fc2.weight", {h, r_.intermediate});
    Add(l + "mlp.fc2.bias", {h});
    if (r_.layer_scale) {
      Add(l + "lambda_1", {h});
      Add(l + "lambda_2", {h});
    }
  }
  if (r_.backbone) return;  // its layernorm (none under mean pooling) is never called
  const std::string norm = r_.mean_pooling ? "pooler.layernorm." : "layernorm.";
  Add(pre + norm + "weight", {h});
  Add(pre + norm + "bias", {h});
}

bool BeitTrunk::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (!ends(".lambda_1") && !ends(".lambda_2")) return false;
  t.uniform_(0.5, 1.5, gen);
  return true;
}

at::Tensor BeitTrunk::RelativeBias(const WeightMap& w, const std::string& p,
                                   const at::Tensor& like) const {
  const at::Tensor& table = GetWeight(w, p + "relative_position_bias_table");
  const int64_t side = 2 * r_.Grid() - 1, n = side * side, s = r_.Grid() * r_.Grid() + 1;
  // The sub-table resized to the input's window (bilinear; the same size here, as transformers
  // still dispatches it), the cls rows appended.
  at::Tensor sub = table.slice(0, 0, n).reshape({1, side, side, -1}).permute({0, 3, 1, 2});
  sub = at::upsample_bilinear2d(sub, {side, side}, /*align_corners=*/false)
            .permute({0, 2, 3, 1})
            .reshape({n, -1});
  at::Tensor full = at::cat({sub, table.slice(0, n)});
  // table[index] as index_select (the same rows: the simulated device's CPU fallback does not
  // move aten::index's index list).
  at::Tensor bias = full.index_select(0, index_.to(like.device())).view({s, s, -1});
  return bias.permute({2, 0, 1}).contiguous().unsqueeze(0);
}

at::Tensor BeitTrunk::Layer(const WeightMap& w, int64_t i, const at::Tensor& x,
                            const at::Tensor& shared_bias) const {
  const std::string l = r_.prefix + "encoder.layer." + std::to_string(i) + ".";
  auto lin = [&](const std::string& m, const at::Tensor& y) {
    return nn::Linear(y, GetWeight(w, l + m + ".weight"), GetOptionalWeight(w, [&] {
                        return m == "attention.k_proj" ? std::string() : l + m + ".bias";
                      }()));
  };
  auto ln = [&](const std::string& m, const at::Tensor& y) {
    return nn::LayerNorm(y, GetWeight(w, l + m + ".weight"), GetWeight(w, l + m + ".bias"), r_.eps);
  };
  const int64_t b = x.size(0), s = x.size(1), nh = r_.heads, hd = r_.hidden / nh;
  auto heads = [&](const at::Tensor& t) { return t.view({b, s, nh, hd}).transpose(1, 2); };
  at::Tensor y = ln("layernorm_before", x);
  at::Tensor q = heads(lin("attention.q_proj", y)), k = heads(lin("attention.k_proj", y));
  at::Tensor v = heads(lin("attention.v_proj", y));
  // eager_attention_forward: q k^T * scaling + the relative position bias, softmax, v.
  at::Tensor scores =
      nn::Matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(hd)));
  at::Tensor bias =
      r_.relative_bias ? RelativeBias(w, l + "relative_position_bias.", x) : shared_bias;
  if (bias.defined()) scores = scores + bias;
  at::Tensor ctx =
      nn::Matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({b, s, r_.hidden});
  at::Tensor a = lin("attention.o_proj", ctx);
  if (r_.layer_scale) a = GetWeight(w, l + "lambda_1") * a;
  at::Tensor h = a + x;
  at::Tensor m = lin("mlp.fc2", nn::Activate(lin("mlp.fc1", ln("layernorm_after", h)), r_.act));
  if (r_.layer_scale) m = GetWeight(w, l + "lambda_2") * m;
  return m + h;
}

VisionFeatures BeitTrunk::Forward(const WeightMap& w, const at::Tensor& pixel_values) const {
  const std::string& pre = r_.prefix;
  const int64_t b = pixel_values.size(0);
  at::Tensor x = nn::PatchEmbed(
      pixel_values, GetWeight(w, pre + "embeddings.patch_embeddings.projection.weight"),
      GetWeight(w, pre + "embeddings.patch_embeddings.projection.bias"), r_.patch_size);
  x = at::cat({GetWeight(w, pre + "embeddings.cls_token").expand({b, -1, -1}), x}, 1);
  if (r_.absolute_positions) x = x + GetWeight(w, pre + "embeddings.position_embeddings");
  at::Tensor shared;
  if (r_.shared_relative_bias) shared = RelativeBias(w, pre + "encoder.relative_position_bias.", x);
  for (int64_t i = 0; i < r_.layers; ++i) x = Layer(w, i, x, shared);
  if (r_.backbone) return {x, x.select(1, 0)};
  if (!r_.mean_pooling) {
    x = nn::LayerNorm(x, GetWeight(w, pre + "layernorm.weight"),
                      GetWeight(w, pre + "layernorm.bias"), r_.eps);
    return {x, x.select(1, 0)};
  }
  at::Tensor pooled =
      nn::LayerNorm(x.slice(1, 1).mean(1), GetWeight(w, pre + "pooler.layernorm.weight"),
                    GetWeight(w, pre + "pooler.layernorm.bias"), r_.eps);
  return {x, pooled};
}

std::vector<int64_t> BeitTrunk::LastHiddenShape() const {
  return {r_.Grid() * r_.Grid() + 1, r_.hidden};
}

}  // namespace ts::zoo::internal
