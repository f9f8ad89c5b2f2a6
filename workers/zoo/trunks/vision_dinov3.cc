// The DINOv3 ViT trunk (trunks/vision_dinov3.h).
#include "workers/zoo/trunks/vision_dinov3.h"

#include <cmath>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

// A Linear whose bias the config may leave out (key_bias, proj_bias, mlp_bias).
at::Tensor Dinov3Lin(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  const std::string bias = p + ".bias";
  return nn::Linear(x, GetWeight(w, p + ".weight"), w.count(bias) ? w.at(bias) : at::Tensor());
}

at::Tensor Dinov3Ln(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), eps);
}

}  // namespace

at::Tensor Dinov3RopeAngles(int64_t grid, int64_t head_dim, double theta,
                            const at::TensorOptions& options) {
  // get_patches_center_coordinates: (i + 0.5) / grid, shifted to [-1, 1]; rows y-major.
  at::Tensor c = (at::arange(grid, options) + 0.5) / static_cast<double>(grid) * 2.0 - 1.0;
  at::Tensor ys = c.view({grid, 1}).expand({grid, grid}).reshape({-1, 1});
  at::Tensor xs = c.view({1, grid}).expand({grid, grid}).reshape({-1, 1});
  // inv_freq = 1 / theta ** arange(0, 1, 4 / head_dim).
  at::Tensor inv_freq = at::reciprocal(
      at::pow(theta, at::arange(head_dim / 4, options) * (4.0 / static_cast<double>(head_dim))));
  const double two_pi = 2.0 * 3.14159265358979323846;
  at::Tensor ay = ys * two_pi * inv_freq.unsqueeze(0), ax = xs * two_pi * inv_freq.unsqueeze(0);
  return at::cat({ay, ax, ay, ax}, 1);
}

Dinov3VitTrunk::Dinov3VitTrunk(Dinov3VitRecipe recipe)
    : VisionTrunk(recipe.channels, recipe.image_size), r_(std::move(recipe)) {
  const int64_t h = r_.hidden, p = r_.patch_size, im = r_.intermediate;
  const std::string& pre = r_.prefix;
  Add(pre + "embeddings.cls_token", {1, 1, h});
  if (r_.registers > 0) Add(pre + "embeddings.register_tokens", {1, r_.registers, h});
  Add(pre + "embeddings.patch_embeddings.weight", {h, r_.channels, p, p});
  Add(pre + "embeddings.patch_embeddings.bias", {h});
  const std::pair<const char*, bool> attn[] = {{"q_proj", r_.query_bias},
                                               {"k_proj", r_.key_bias},
                                               {"v_proj", r_.value_bias},
                                               {"o_proj", r_.proj_bias}};
  for (int64_t i = 0; i < r_.layers; ++i) {
    const std::string lp = pre + "layer." + std::to_string(i) + ".";
    Add(lp + "norm1.weight", {h});
    Add(lp + "norm1.bias", {h});
    for (const auto& [m, bias] : attn) {
      Add(lp + "attention." + m + ".weight", {h, h});
      if (bias) Add(lp + "attention." + m + ".bias", {h});
    }
    Add(lp + "layer_scale1.lambda1", {h});
    Add(lp + "norm2.weight", {h});
    Add(lp + "norm2.bias", {h});
    for (const char* m : {"gate_proj", "up_proj"}) {
      if (!r_.gated_mlp && std::string(m) == "gate_proj") continue;
      Add(lp + "mlp." + m + ".weight", {im, h});
      if (r_.mlp_bias) Add(lp + "mlp." + m + ".bias", {im});
    }
    Add(lp + "mlp.down_proj.weight", {h, im});
    if (r_.mlp_bias) Add(lp + "mlp.down_proj.bias", {h});
    Add(lp + "layer_scale2.lambda1", {h});
  }
  Add(pre + "norm.weight", {h});
  Add(pre + "norm.bias", {h});
}

bool Dinov3VitTrunk::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  if (name.size() < 8 || name.compare(name.size() - 8, 8, ".lambda1") != 0) return false;
  t.uniform_(0.5, 1.5, gen);
  return true;
}

// DINOv3ViTLayer: x + ls1 * o_proj(attn(rotated q, k over the patches)), then x + ls2 * mlp.
at::Tensor Dinov3VitTrunk::Layer(const WeightMap& w, int64_t i, const at::Tensor& x,
                                 const at::Tensor& cos, const at::Tensor& sin) const {
  const std::string lp = r_.prefix + "layer." + std::to_string(i) + ".";
  const int64_t b = x.size(0), s = x.size(1), h = r_.hidden, nh = r_.heads, hd = h / nh;
  const int64_t patches = cos.size(0), prefix = s - patches;
  at::Tensor y = Dinov3Ln(w, lp + "norm1", x, r_.eps);
  auto heads = [&](const char* m) {
    return Dinov3Lin(w, lp + "attention." + m, y).view({b, s, nh, hd}).transpose(1, 2);
  };
  auto rotate = [&](const at::Tensor& t) {
    return at::cat(
        {t.narrow(2, 0, prefix), nn::ApplyRotary(t.narrow(2, prefix, patches), cos, sin)}, 2);
  };
  at::Tensor ctx = nn::Attention(rotate(heads("q_proj")), rotate(heads("k_proj")), heads("v_proj"),
                                 at::Tensor(), 1.0 / std::sqrt(static_cast<double>(hd)));
  at::Tensor a = Dinov3Lin(w, lp + "attention.o_proj", ctx.transpose(1, 2).reshape({b, s, h}));
  at::Tensor out = x + a * GetWeight(w, lp + "layer_scale1.lambda1");
  y = Dinov3Ln(w, lp + "norm2", out, r_.eps);
  at::Tensor m = r_.gated_mlp ? nn::Activate(Dinov3Lin(w, lp + "mlp.gate_proj", y), r_.act) *
                                    Dinov3Lin(w, lp + "mlp.up_proj", y)
                              : nn::Activate(Dinov3Lin(w, lp + "mlp.up_proj", y), r_.act);
  m = Dinov3Lin(w, lp + "mlp.down_proj", m);
  return out + m * GetWeight(w, lp + "layer_scale2.lambda1");
}

VisionFeatures Dinov3VitTrunk::Forward(const WeightMap& w, const at::Tensor& pixel_values) const {
  const int64_t b = pixel_values.size(0), h = r_.hidden;
  const std::string& pre = r_.prefix;
  at::Tensor x =
      nn::PatchEmbed(pixel_values, GetWeight(w, pre + "embeddings.patch_embeddings.weight"),
                     GetWeight(w, pre + "embeddings.patch_embeddings.bias"), r_.patch_size);
  std::vector<at::Tensor> tokens = {GetWeight(w, pre + "embeddings.cls_token").expand({b, 1, h})};
  if (r_.registers > 0) {
    tokens.push_back(GetWeight(w, pre + "embeddings.register_tokens").expand({b, r_.registers, h}));
  }
  tokens.push_back(x);
  x = at::cat(tokens, 1);
  // The grid of the batch's images (as transformers, from pixel_values' size).
  const int64_t grid = pixel_values.size(2) / r_.patch_size;
  // The tables in float (double for a double run), then in the model's dtype (transformers:
  // float32 with autocast off, cast to pixel_values' dtype).
  const auto table_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor angles =
      Dinov3RopeAngles(grid, h / r_.heads, r_.rope_theta, x.options().dtype(table_type));
  const at::Tensor cos = at::cos(angles).to(x.scalar_type());
  const at::Tensor sin = at::sin(angles).to(x.scalar_type());
  for (int64_t i = 0; i < r_.layers; ++i) x = Layer(w, i, x, cos, sin);
  x = Dinov3Ln(w, pre + "norm", x, r_.eps);
  return {x, x.select(1, 0)};
}

std::vector<int64_t> Dinov3VitTrunk::LastHiddenShape() const {
  return {1 + r_.registers + r_.Grid() * r_.Grid(), r_.hidden};
}

}  // namespace ts::zoo::internal
