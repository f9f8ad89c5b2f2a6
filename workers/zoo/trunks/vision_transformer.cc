// ViT-style trunks (trunks/vision_transformer.h).
#include "workers/zoo/trunks/vision_transformer.h"

#include <cmath>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {

std::vector<EncoderSlot> EncoderForwardOrder() {
  using S = EncoderSlot;
  return {S::kNorm1, S::kQuery, S::kKey, S::kValue, S::kOut, S::kNorm2, S::kFc1, S::kFc2};
}

EncoderNaming VitEncoderNaming() {
  // transformers 5's ViTLayer: attention.{q,k,v,o}_proj, mlp.fc1 / fc2, layers.N (4.x named
  // them encoder.layer.N.attention.attention.query ... output.dense).
  return {"layers.",
          {"layernorm_before", "attention.q_proj", "attention.k_proj", "attention.v_proj",
           "attention.o_proj", "layernorm_after", "mlp.fc1", "mlp.fc2"},
          EncoderForwardOrder()};
}

EncoderNaming VitV4EncoderNaming(std::string layers, std::vector<EncoderSlot> order) {
  return {std::move(layers),
          {"layernorm_before", "attention.attention.query", "attention.attention.key",
           "attention.attention.value", "attention.output.dense", "layernorm_after",
           "intermediate.dense", "output.dense"},
          std::move(order)};
}

PreLnEncoder::PreLnEncoder(PreLnEncoderRecipe recipe, const std::string& prefix,
                           WeightList& weights)
    : r_(std::move(recipe)) {
  const int64_t h = r_.hidden, im = r_.intermediate;
  for (int64_t i = 0; i < r_.layers; ++i) {
    const std::string lp = prefix + r_.naming.layers + std::to_string(i) + ".";
    Names l;
    for (EncoderSlot slot : r_.naming.order) {
      const auto s = static_cast<size_t>(slot);
      const std::string m = lp + r_.naming.modules[s];
      std::vector<int64_t> shape = {h, h}, bias = {h};
      if (slot == EncoderSlot::kNorm1 || slot == EncoderSlot::kNorm2) shape = {h};
      if (slot == EncoderSlot::kFc1) {
        shape = {im, h};
        bias = {im};
      }
      if (slot == EncoderSlot::kFc2) shape = {h, im};
      const bool qkv =
          slot == EncoderSlot::kQuery || slot == EncoderSlot::kKey || slot == EncoderSlot::kValue;
      l.weight[s] = m + ".weight";
      weights.emplace_back(l.weight[s], shape);
      if (qkv && r_.qv_bias_params && slot != EncoderSlot::kKey) {
        // attention.attention.query -> attention.attention.q_bias (v_bias for the value).
        l.bias[s] =
            m.substr(0, m.rfind('.') + 1) + (slot == EncoderSlot::kQuery ? "q" : "v") + "_bias";
        weights.emplace_back(l.bias[s], bias);
        continue;
      }
      if (qkv && !r_.qkv_bias) continue;
      l.bias[s] = m + ".bias";
      weights.emplace_back(l.bias[s], bias);
    }
    layers_.push_back(std::move(l));
  }
}

at::Tensor PreLnEncoder::Forward(const WeightMap& w, at::Tensor x, const at::Tensor& blocked,
                                 int64_t layers) const {
  for (size_t li = 0; li < layers_.size(); ++li) {
    if (layers >= 0 && static_cast<int64_t>(li) >= layers) break;
    x = Layer(w, x, blocked, li);
  }
  return x;
}

std::vector<at::Tensor> PreLnEncoder::HiddenStates(const WeightMap& w, at::Tensor x,
                                                   const at::Tensor& blocked,
                                                   int64_t layers) const {
  std::vector<at::Tensor> states = {x};
  for (size_t li = 0; li < layers_.size() && static_cast<int64_t>(li) < layers; ++li) {
    x = Layer(w, x, blocked, li);
    states.push_back(x);
  }
  return states;
}

at::Tensor PreLnEncoder::Layer(const WeightMap& w, at::Tensor x, const at::Tensor& blocked,
                               size_t li) const {
  const int64_t b = x.size(0), s = x.size(1), hid = r_.hidden, nh = r_.heads;
  const int64_t hd = hid / nh;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  auto heads = [&](const at::Tensor& t) { return t.view({b, s, nh, hd}).transpose(1, 2); };
  const Names& l = layers_[li];
  auto lin = [&](const at::Tensor& y, EncoderSlot slot) {
    const auto i = static_cast<size_t>(slot);
    return nn::Linear(y, GetWeight(w, l.weight[i]), GetOptionalWeight(w, l.bias[i]));
  };
  auto ln = [&](const at::Tensor& y, EncoderSlot slot) {
    const auto i = static_cast<size_t>(slot);
    return nn::LayerNorm(y, GetWeight(w, l.weight[i]), GetWeight(w, l.bias[i]), r_.eps);
  };
  at::Tensor y = ln(x, EncoderSlot::kNorm1);
  at::Tensor q = heads(lin(y, EncoderSlot::kQuery));
  at::Tensor k = heads(lin(y, EncoderSlot::kKey));
  at::Tensor v = heads(lin(y, EncoderSlot::kValue));
  at::Tensor ctx = nn::Attention(q, k, v, blocked, scale).transpose(1, 2).reshape({b, s, hid});
  x = x + lin(ctx, EncoderSlot::kOut);
  y = ln(x, EncoderSlot::kNorm2);
  y = Activate(lin(y, EncoderSlot::kFc1), VisionActivation{r_.relu6, r_.act});
  return x + lin(y, EncoderSlot::kFc2);
}

VitTrunk::VitTrunk(VitRecipe recipe)
    : VisionTrunk(recipe.channels, recipe.image_size), r_(std::move(recipe)) {
  const int64_t h = r_.encoder.hidden, p = r_.patch_size;
  const int64_t grid = r_.image_size / p;
  tokens_ = grid * grid + (r_.distillation_token ? 1 : 0) + (r_.cls_token ? 1 : 0);
  const std::string& pre = r_.prefix;
  if (r_.cls_token) cls_ = Add(pre + "embeddings.cls_token", {1, 1, h});
  if (r_.distillation_token) dist_ = Add(pre + "embeddings.distillation_token", {1, 1, h});
  if (r_.mask_token) mask_ = Add(pre + "embeddings.mask_token", {1, 1, h});
  pos_ = Add(pre + "embeddings.position_embeddings", {1, tokens_, h});
  patch_w_ = Add(pre + "embeddings.patch_embeddings.projection.weight", {h, r_.channels, p, p});
  patch_b_ = Add(pre + "embeddings.patch_embeddings.projection.bias", {h});
  WeightList layers;
  encoder_.emplace(r_.encoder, pre, layers);
  for (auto& [name, shape] : layers) Add(name, std::move(shape));
  ln_ = Add(pre + "layernorm.weight", {h});
  lnb_ = Add(pre + "layernorm.bias", {h});
}

VisionFeatures VitTrunk::Forward(const WeightMap& w, const at::Tensor& pixel_values) const {
  return ForwardMasked(w, pixel_values, at::Tensor());
}

VisionFeatures VitTrunk::ForwardMasked(const WeightMap& w, const at::Tensor& pixel_values,
                                       const at::Tensor& bool_masked_pos) const {
  const int64_t b = pixel_values.size(0), hid = r_.encoder.hidden;
  at::Tensor x =
      nn::PatchEmbed(pixel_values, GetWeight(w, patch_w_), GetWeight(w, patch_b_), r_.patch_size);
  if (bool_masked_pos.defined()) {
    TORCH_CHECK(r_.mask_token, "bool_masked_pos given to a ViT trunk without a mask token");
    at::Tensor tokens = GetWeight(w, mask_).expand({b, x.size(1), hid});
    at::Tensor mask = bool_masked_pos.unsqueeze(-1).to(tokens.scalar_type());
    x = x * (1.0 - mask) + tokens * mask;
  }
  if (r_.cls_token) {
    std::vector<at::Tensor> tokens = {GetWeight(w, cls_).expand({b, 1, hid})};
    if (r_.distillation_token) tokens.push_back(GetWeight(w, dist_).expand({b, 1, hid}));
    tokens.push_back(x);
    x = at::cat(tokens, 1);
  }
  x = x + GetWeight(w, pos_);
  x = encoder_->Forward(w, x, at::Tensor());
  x = nn::LayerNorm(x, GetWeight(w, ln_), GetWeight(w, lnb_), r_.encoder.eps);
  return {x, r_.cls_token ? x.select(1, 0) : x.mean(1)};
}

std::vector<int64_t> VitTrunk::LastHiddenShape() const { return {tokens_, r_.encoder.hidden}; }

VitRecipe VitRecipeFromConfig(const VitConfig& c, std::string prefix, bool distillation_token) {
  VitRecipe r;
  r.prefix = std::move(prefix);
  r.image_size = c.image_size;
  r.patch_size = c.patch_size;
  r.channels = c.num_channels;
  r.distillation_token = distillation_token;
  r.encoder.hidden = c.hidden_size;
  r.encoder.intermediate = c.intermediate_size;
  r.encoder.layers = c.num_hidden_layers;
  r.encoder.heads = c.num_attention_heads;
  r.encoder.act = c.hidden_act;
  r.encoder.eps = c.layer_norm_eps;
  r.encoder.qkv_bias = c.qkv_bias;
  r.encoder.naming = VitEncoderNaming();
  return r;
}

}  // namespace ts::zoo::internal
