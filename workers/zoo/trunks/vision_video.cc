// The video trunks (trunks/vision_video.h).
#include "workers/zoo/trunks/vision_video.h"

#include <cmath>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {

at::Tensor InterleavedSinusoidTable(int64_t n, int64_t d, const at::TensorOptions& options) {
  at::Tensor j = at::arange(d, options);
  at::Tensor freq = at::pow(10000.0, at::floor(j / 2.0) * 2.0 / static_cast<double>(d));
  at::Tensor angle = at::arange(n, options).unsqueeze(1) / freq.unsqueeze(0);
  at::Tensor even = at::remainder(at::arange(d, options.dtype(at::kLong)), 2).eq(0);
  return at::where(even.unsqueeze(0), at::sin(angle), at::cos(angle));
}

VideoMaeTrunk::VideoMaeTrunk(VideoMaeRecipe recipe)
    : VisionTrunk(recipe.channels, recipe.image_size), r_(std::move(recipe)) {
  const int64_t h = r_.encoder.hidden, p = r_.patch_size;
  const std::string& pre = r_.prefix;
  if (r_.vivit) {
    Add(pre + "embeddings.cls_token", {1, 1, h});
    Add(pre + "embeddings.position_embeddings", {1, r_.Tokens(), h});
  }
  Add(pre + "embeddings.patch_embeddings.projection.weight", {h, r_.channels, r_.tubelet, p, p});
  Add(pre + "embeddings.patch_embeddings.projection.bias", {h});
  WeightList layers;
  encoder_.emplace(r_.encoder, pre, layers);
  for (auto& [name, shape] : layers) Add(name, std::move(shape));
  if (r_.vivit || !r_.mean_pooling) {
    Add(pre + "layernorm.weight", {h});
    Add(pre + "layernorm.bias", {h});
  }
  if (r_.fc_norm && r_.mean_pooling) {
    Add("fc_norm.weight", {h});
    Add("fc_norm.bias", {h});
  }
}

VisionFeatures VideoMaeTrunk::Forward(const WeightMap& w, const at::Tensor& pixel_values) const {
  return ForwardMasked(w, pixel_values, at::Tensor());
}

VisionFeatures VideoMaeTrunk::ForwardMasked(const WeightMap& w, const at::Tensor& pixel_values,
                                            const at::Tensor& bool_masked_pos) const {
  const std::string& pre = r_.prefix;
  const int64_t p = r_.patch_size;
  // [B, frames, C, H, W] -> [B, C, frames, H, W]: VideoMAE permutes, ViViT transposes.
  at::Tensor x = nn::Conv3d(
      r_.vivit ? pixel_values.transpose(1, 2) : pixel_values.permute({0, 2, 1, 3, 4}),
      GetWeight(w, pre + "embeddings.patch_embeddings.projection.weight"),
      GetWeight(w, pre + "embeddings.patch_embeddings.projection.bias"), {r_.tubelet, p, p});
  x = x.flatten(2).transpose(1, 2);
  if (r_.vivit) {
    const int64_t b = x.size(0), h = x.size(2);
    x = at::cat({GetWeight(w, pre + "embeddings.cls_token").expand({b, 1, h}), x}, 1) +
        GetWeight(w, pre + "embeddings.position_embeddings");
  } else {
    // The table in float (double for a double run), then cast as transformers' type_as.
    const auto table_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor table =
        InterleavedSinusoidTable(x.size(1), x.size(2), x.options().dtype(table_type));
    x = x + table.unsqueeze(0).to(x.scalar_type());
  }
  if (bool_masked_pos.defined()) {
    // VideoMAEEmbeddings: embeddings[~bool_masked_pos].reshape(batch, -1, hidden), the visible
    // tubelets only (every video masks as many), as masked_select (the same elements in the same
    // order; the simulated device's CPU fallback does not move aten::index's index list).
    TORCH_CHECK(!r_.vivit, "ViViT has no masked forward");
    x = at::masked_select(x, bool_masked_pos.logical_not().unsqueeze(-1))
            .reshape({x.size(0), -1, x.size(2)});
  }
  x = encoder_->Forward(w, x, at::Tensor());
  if (r_.vivit || !r_.mean_pooling) {
    x = nn::LayerNorm(x, GetWeight(w, pre + "layernorm.weight"),
                      GetWeight(w, pre + "layernorm.bias"), r_.encoder.eps);
    return {x, x.select(1, 0)};
  }
  at::Tensor pooled = x.mean(1);
  if (r_.fc_norm)
    pooled =
        nn::LayerNorm(pooled, GetWeight(w, "fc_norm.weight"), GetWeight(w, "fc_norm.bias"), 1e-5);
  return {x, pooled};
}

std::vector<int64_t> VideoMaeTrunk::PixelValuesShape() const {
  return {r_.frames, r_.channels, r_.image_size, r_.image_size};
}

std::vector<int64_t> VideoMaeTrunk::LastHiddenShape() const {
  return {r_.Tokens(), r_.encoder.hidden};
}

TimesformerTrunk::TimesformerTrunk(TimesformerRecipe recipe)
    : VisionTrunk(recipe.channels, recipe.image_size), r_(std::move(recipe)) {
  const int64_t h = r_.hidden, im = r_.intermediate, p = r_.patch_size;
  const std::string& pre = r_.prefix;
  Add(pre + "embeddings.cls_token", {1, 1, h});
  Add(pre + "embeddings.position_embeddings", {1, r_.Patches() + 1, h});
  Add(pre + "embeddings.time_embeddings", {1, r_.frames, h});
  Add(pre + "embeddings.patch_embeddings.projection.weight", {h, r_.channels, p, p});
  Add(pre + "embeddings.patch_embeddings.projection.bias", {h});
  auto linear = [&](const std::string& m, int64_t out, int64_t in, bool bias) {
    Add(m + ".weight", {out, in});
    if (bias) Add(m + ".bias", {out});
  };
  auto norm = [&](const std::string& m) {
    Add(m + ".weight", {h});
    Add(m + ".bias", {h});
  };
  for (int64_t i = 0; i < r_.layers; ++i) {
    const std::string l = pre + "encoder.layer." + std::to_string(i) + ".";
    norm(l + "layernorm_before");
    linear(l + "attention.attention.qkv", 3 * h, h, r_.qkv_bias);
    linear(l + "attention.output.dense", h, h, true);
    norm(l + "temporal_layernorm");
    linear(l + "temporal_attention.attention.qkv", 3 * h, h, r_.qkv_bias);
    linear(l + "temporal_attention.output.dense", h, h, true);
    linear(l + "temporal_dense", h, h, true);
    norm(l + "layernorm_after");
    linear(l + "intermediate.dense", im, h, true);
    linear(l + "output.dense", h, im, true);
  }
  norm(pre + "layernorm");
}

at::Tensor TimesformerTrunk::Attend(const WeightMap& w, const std::string& p,
                                    const at::Tensor& x) const {
  const int64_t b = x.size(0), n = x.size(1), c = x.size(2), nh = r_.heads;
  at::Tensor qkv = nn::Linear(x, GetWeight(w, p + "attention.qkv.weight"),
                              GetOptionalWeight(w, r_.qkv_bias ? p + "attention.qkv.bias" : ""))
                       .reshape({b, n, 3, nh, c / nh})
                       .permute({2, 0, 3, 1, 4});
  const double scale = 1.0 / std::sqrt(static_cast<double>(c / nh));
  at::Tensor ctx =
      nn::Attention(qkv[0], qkv[1], qkv[2], at::Tensor(), scale).transpose(1, 2).reshape({b, n, c});
  return nn::Linear(ctx, GetWeight(w, p + "output.dense.weight"),
                    GetWeight(w, p + "output.dense.bias"));
}

at::Tensor TimesformerTrunk::Layer(const WeightMap& w, int64_t i, const at::Tensor& x) const {
  const std::string l = r_.prefix + "encoder.layer." + std::to_string(i) + ".";
  auto ln = [&](const std::string& m, const at::Tensor& y) {
    return nn::LayerNorm(y, GetWeight(w, l + m + ".weight"), GetWeight(w, l + m + ".bias"), r_.eps);
  };
  auto lin = [&](const std::string& m, const at::Tensor& y) {
    return nn::Linear(y, GetWeight(w, l + m + ".weight"), GetWeight(w, l + m + ".bias"));
  };
  const int64_t t = r_.frames, pw = r_.image_size / r_.patch_size, b = x.size(0), c = x.size(2);
  const int64_t ph = (x.size(1) - 1) / t / pw;
  // Temporal attention over each patch's frames.
  at::Tensor te = x.slice(1, 1).reshape({b, ph, pw, t, c}).reshape({b * ph * pw, t, c});
  at::Tensor rt = Attend(w, l + "temporal_attention.", ln("temporal_layernorm", te));
  rt = lin("temporal_dense", rt.reshape({b, ph, pw, t, c}).reshape({b, ph * pw * t, c}));
  te = x.slice(1, 1) + rt;
  // Spatial attention within each frame, the cls token repeated per frame.
  at::Tensor init_cls = x.select(1, 0).unsqueeze(1);
  at::Tensor cls = init_cls.repeat({1, t, 1}).reshape({b * t, 1, c});
  at::Tensor se =
      te.reshape({b, ph, pw, t, c}).permute({0, 3, 1, 2, 4}).reshape({b * t, ph * pw, c});
  at::Tensor rs = Attend(w, l + "attention.", ln("layernorm_before", at::cat({cls, se}, 1)));
  cls = rs.select(1, 0).reshape({b, t, c}).mean(1, /*keepdim=*/true);  // averaged over frames
  rs = rs.slice(1, 1)
           .reshape({b, t, ph, pw, c})
           .permute({0, 2, 3, 1, 4})
           .reshape({b, ph * pw * t, c});
  at::Tensor h = at::cat({init_cls, te}, 1) + at::cat({cls, rs}, 1);
  at::Tensor y = nn::Activate(lin("intermediate.dense", ln("layernorm_after", h)), r_.act);
  return h + lin("output.dense", y);
}

VisionFeatures TimesformerTrunk::Forward(const WeightMap& w, const at::Tensor& pixel_values) const {
  const std::string& pre = r_.prefix;
  const int64_t b = pixel_values.size(0), t = pixel_values.size(1), c = r_.hidden;
  at::Tensor x = pixel_values.reshape(
      {b * t, pixel_values.size(2), pixel_values.size(3), pixel_values.size(4)});
  x = nn::PatchEmbed(x, GetWeight(w, pre + "embeddings.patch_embeddings.projection.weight"),
                     GetWeight(w, pre + "embeddings.patch_embeddings.projection.bias"),
                     r_.patch_size);
  x = at::cat({GetWeight(w, pre + "embeddings.cls_token").expand({b * t, -1, -1}), x}, 1) +
      GetWeight(w, pre + "embeddings.position_embeddings");
  // embeddings[:batch_size, 0]: the first rows' cls (every row's is the same).
  at::Tensor cls = x.slice(0, 0, b).select(1, 0).unsqueeze(1);
  const int64_t n = x.size(1) - 1;
  x = x.slice(1, 1).reshape({b, t, n, c}).permute({0, 2, 1, 3}).reshape({b * n, t, c}) +
      GetWeight(w, pre + "embeddings.time_embeddings");
  x = at::cat({cls, x.view({b, n, t, c}).reshape({b, n * t, c})}, 1);
  for (int64_t i = 0; i < r_.layers; ++i) x = Layer(w, i, x);
  x = nn::LayerNorm(x, GetWeight(w, pre + "layernorm.weight"), GetWeight(w, pre + "layernorm.bias"),
                    r_.eps);
  return {x, x.select(1, 0)};
}

std::vector<int64_t> TimesformerTrunk::PixelValuesShape() const {
  return {r_.frames, r_.channels, r_.image_size, r_.image_size};
}

std::vector<int64_t> TimesformerTrunk::LastHiddenShape() const {
  return {1 + r_.Patches() * r_.frames, r_.hidden};
}

}  // namespace ts::zoo::internal
