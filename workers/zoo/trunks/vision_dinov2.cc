// The DINOv2 trunk (trunks/vision_dinov2.h).
#include "workers/zoo/trunks/vision_dinov2.h"

#include <cmath>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

at::Tensor Lin(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::Linear(x, GetWeight(w, p + ".weight"), GetOptionalWeight(w, p + ".bias"));
}

at::Tensor Ln(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), eps);
}

}  // namespace

int64_t Dinov2Recipe::MlpWidth() const {
  const auto width = static_cast<int64_t>(static_cast<double>(hidden) * mlp_ratio);
  if (!swiglu) return width;
  return (static_cast<int64_t>(static_cast<double>(width) * 2.0 / 3.0) + 7) / 8 * 8;
}

Dinov2Trunk::Dinov2Trunk(Dinov2Recipe recipe)
    : VisionTrunk(recipe.channels, recipe.image_size), r_(std::move(recipe)) {
  const int64_t h = r_.hidden, p = r_.patch_size, n = r_.Grid() * r_.Grid();
  const std::string& pre = r_.prefix;
  Add(pre + "embeddings.cls_token", {1, 1, h});
  if (r_.registers > 0) Add(pre + "embeddings.register_tokens", {1, r_.registers, h});
  Add(pre + "embeddings.position_embeddings", {1, n + 1, h});
  Add(pre + "embeddings.patch_embeddings.projection.weight", {h, r_.channels, p, p});
  Add(pre + "embeddings.patch_embeddings.projection.bias", {h});
  const int64_t im = r_.MlpWidth();
  for (int64_t i = 0; i < r_.layers; ++i) {
    const std::string lp = pre + "encoder.layer." + std::to_string(i) + ".";
    Add(lp + "norm1.weight", {h});
    Add(lp + "norm1.bias", {h});
    for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      Add(lp + "attention." + m + ".weight", {h, h});
      if (r_.qkv_bias || std::string(m) == "o_proj") Add(lp + "attention." + m + ".bias", {h});
    }
    Add(lp + "layer_scale1.lambda1", {h});
    Add(lp + "norm2.weight", {h});
    Add(lp + "norm2.bias", {h});
    if (r_.swiglu) {
      for (const char* m : {"gate_proj", "up_proj"}) {
        Add(lp + "mlp." + m + ".weight", {im, h});
        Add(lp + "mlp." + m + ".bias", {im});
      }
      Add(lp + "mlp.down_proj.weight", {h, im});
      Add(lp + "mlp.down_proj.bias", {h});
    } else {
      Add(lp + "mlp.fc1.weight", {im, h});
      Add(lp + "mlp.fc1.bias", {im});
      Add(lp + "mlp.fc2.weight", {h, im});
      Add(lp + "mlp.fc2.bias", {h});
    }
    Add(lp + "layer_scale2.lambda1", {h});
  }
  Add(pre + "layernorm.weight", {h});
  Add(pre + "layernorm.bias", {h});
}

bool Dinov2Trunk::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  if (name.size() < 8 || name.compare(name.size() - 8, 8, ".lambda1") != 0) return false;
  t.uniform_(0.5, 1.5, gen);
  return true;
}

// Dinov2Layer: x + ls1 * attn(norm1(x)), then x + ls2 * mlp(norm2(x)).
at::Tensor Dinov2Trunk::Layer(const WeightMap& w, int64_t i, const at::Tensor& x) const {
  const std::string lp = r_.prefix + "encoder.layer." + std::to_string(i) + ".";
  const int64_t b = x.size(0), s = x.size(1), h = r_.hidden, nh = r_.heads, hd = h / nh;
  at::Tensor y = Ln(w, lp + "norm1", x, r_.eps);
  auto heads = [&](const char* m) {
    return Lin(w, lp + "attention." + m, y).view({b, s, nh, hd}).transpose(1, 2);
  };
  at::Tensor ctx = nn::Attention(heads("q_proj"), heads("k_proj"), heads("v_proj"), at::Tensor(),
                                 1.0 / std::sqrt(static_cast<double>(hd)));
  at::Tensor a = Lin(w, lp + "attention.o_proj", ctx.transpose(1, 2).reshape({b, s, h}));
  at::Tensor out = x + a * GetWeight(w, lp + "layer_scale1.lambda1");
  y = Ln(w, lp + "norm2", out, r_.eps);
  at::Tensor m;
  if (r_.swiglu) {  // LlamaMLP: down(silu(gate(x)) * up(x))
    m = Lin(w, lp + "mlp.down_proj",
            at::silu(Lin(w, lp + "mlp.gate_proj", y)) * Lin(w, lp + "mlp.up_proj", y));
  } else {
    m = Lin(w, lp + "mlp.fc2", nn::Activate(Lin(w, lp + "mlp.fc1", y), r_.act));
  }
  return out + m * GetWeight(w, lp + "layer_scale2.lambda1");
}

VisionFeatures Dinov2Trunk::Forward(const WeightMap& w, const at::Tensor& pixel_values) const {
  const int64_t b = pixel_values.size(0), h = r_.hidden;
  const std::string& pre = r_.prefix;
  at::Tensor x = nn::PatchEmbed(
      pixel_values, GetWeight(w, pre + "embeddings.patch_embeddings.projection.weight"),
      GetWeight(w, pre + "embeddings.patch_embeddings.projection.bias"), r_.patch_size);
  x = at::cat({GetWeight(w, pre + "embeddings.cls_token").expand({b, 1, h}), x}, 1) +
      GetWeight(w, pre + "embeddings.position_embeddings");
  if (r_.registers > 0) {
    x = at::cat({x.narrow(1, 0, 1),
                 GetWeight(w, pre + "embeddings.register_tokens").expand({b, r_.registers, h}),
                 x.narrow(1, 1, x.size(1) - 1)},
                1);
  }
  for (int64_t i = 0; i < r_.layers; ++i) x = Layer(w, i, x);
  x = Ln(w, pre + "layernorm", x, r_.eps);
  return {x, x.select(1, 0)};
}

std::vector<int64_t> Dinov2Trunk::LastHiddenShape() const {
  return {1 + r_.registers + r_.Grid() * r_.Grid(), r_.hidden};
}

}  // namespace ts::zoo::internal
