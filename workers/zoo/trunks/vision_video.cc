// The VideoMAE trunk (trunks/vision_video.h).
#include "workers/zoo/trunks/vision_video.h"

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

}  // namespace ts::zoo::internal
