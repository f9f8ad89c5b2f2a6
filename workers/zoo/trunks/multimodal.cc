// CLIP towers and CLIPModel (trunks/multimodal.h).
#include "workers/zoo/trunks/multimodal.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {

PreLnEncoderRecipe ClipTowerRecipe::Encoder() const {
  using S = EncoderSlot;
  PreLnEncoderRecipe r;
  r.hidden = hidden;
  r.intermediate = intermediate;
  r.layers = layers;
  r.heads = heads;
  r.act = act;
  r.eps = eps;
  r.qkv_bias = true;
  r.naming = {"encoder.layers.",
              {"layer_norm1", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
               "self_attn.out_proj", "layer_norm2", "mlp.fc1", "mlp.fc2"},
              {S::kKey, S::kValue, S::kQuery, S::kOut, S::kNorm1, S::kFc1, S::kFc2, S::kNorm2}};
  return r;
}

ClipVisionTrunk::ClipVisionTrunk(ClipTowerRecipe recipe)
    : VisionTrunk(recipe.channels, recipe.image), r_(std::move(recipe)) {
  const std::string& p = r_.prefix;
  const int64_t h = r_.hidden, n = (r_.image / r_.patch) * (r_.image / r_.patch) + 1;
  Add(p + "embeddings.class_embedding", {h});
  Add(p + "embeddings.patch_embedding.weight", {h, r_.channels, r_.patch, r_.patch});
  Add(p + "embeddings.position_embedding.weight", {n, h});
  Add(p + "pre_layrnorm.weight", {h});
  Add(p + "pre_layrnorm.bias", {h});
  WeightList layers;
  encoder_.emplace(r_.Encoder(), p, layers);
  for (auto& [name, shape] : layers) Add(name, std::move(shape));
  Add(p + "post_layernorm.weight", {h});
  Add(p + "post_layernorm.bias", {h});
}

at::Tensor ClipVisionTrunk::Embed(const WeightMap& w, const at::Tensor& px) const {
  const std::string& p = r_.prefix;
  const int64_t b = px.size(0);
  at::Tensor x = nn::PatchEmbed(px, GetWeight(w, p + "embeddings.patch_embedding.weight"),
                                at::Tensor(), r_.patch);
  at::Tensor cls = GetWeight(w, p + "embeddings.class_embedding")
                       .view({1, 1, r_.hidden})
                       .expand({b, 1, r_.hidden});
  x = at::cat({cls, x}, 1) + GetWeight(w, p + "embeddings.position_embedding.weight");
  return nn::LayerNorm(x, GetWeight(w, p + "pre_layrnorm.weight"),
                       GetWeight(w, p + "pre_layrnorm.bias"), r_.eps);
}

at::Tensor ClipVisionTrunk::HiddenState(const WeightMap& w, const at::Tensor& px,
                                        int64_t index) const {
  const int64_t layers = index < 0 ? r_.layers + 1 + index : index;
  return encoder_->Forward(w, Embed(w, px), at::Tensor(), layers);
}

std::vector<at::Tensor> ClipVisionTrunk::HiddenStates(const WeightMap& w, const at::Tensor& px,
                                                      int64_t layers) const {
  return encoder_->HiddenStates(w, Embed(w, px), at::Tensor(), layers);
}

VisionFeatures ClipVisionTrunk::Forward(const WeightMap& w, const at::Tensor& px) const {
  const std::string& p = r_.prefix;
  at::Tensor x = encoder_->Forward(w, Embed(w, px), at::Tensor());
  at::Tensor pooled = nn::LayerNorm(x.select(1, 0), GetWeight(w, p + "post_layernorm.weight"),
                                    GetWeight(w, p + "post_layernorm.bias"), r_.eps);
  return {x, pooled};
}

std::vector<int64_t> ClipVisionTrunk::LastHiddenShape() const {
  return {(r_.image / r_.patch) * (r_.image / r_.patch) + 1, r_.hidden};
}

bool ClipVisionTrunk::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  if (name != r_.prefix + "embeddings.class_embedding") return false;
  t.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(t.size(0))), gen);
  return true;
}

namespace {

// text_model.*: token and position embeddings, the causal encoder, final_layer_norm; pooled =
// the hidden state at the largest token id (legacy CLIP pooling: eos_token_id == 2).
class ClipTextTower {
 public:
  ClipTextTower(ClipTowerRecipe recipe, WeightList& weights) : r_(std::move(recipe)) {
    const std::string& p = r_.prefix;
    weights.emplace_back(p + "embeddings.token_embedding.weight",
                         std::vector<int64_t>{r_.vocab, r_.hidden});
    weights.emplace_back(p + "embeddings.position_embedding.weight",
                         std::vector<int64_t>{r_.max_pos, r_.hidden});
    encoder_.emplace(r_.Encoder(), p, weights);
    weights.emplace_back(p + "final_layer_norm.weight", std::vector<int64_t>{r_.hidden});
    weights.emplace_back(p + "final_layer_norm.bias", std::vector<int64_t>{r_.hidden});
  }

  std::pair<at::Tensor, at::Tensor> Forward(const WeightMap& w, const at::Tensor& ids,
                                            const at::Tensor& mask) const {
    const std::string& p = r_.prefix;
    const int64_t s = ids.size(1);
    at::Tensor x = nn::Embedding(GetWeight(w, p + "embeddings.token_embedding.weight"), ids) +
                   GetWeight(w, p + "embeddings.position_embedding.weight").narrow(0, 0, s);
    at::Tensor blocked = nn::BlockedKeys(mask, s, /*causal=*/true, std::nullopt, ids.device());
    x = encoder_->Forward(w, x, blocked);
    x = nn::LayerNorm(x, GetWeight(w, p + "final_layer_norm.weight"),
                      GetWeight(w, p + "final_layer_norm.bias"), r_.eps);
    at::Tensor pos = ids.argmax(-1);
    at::Tensor pooled =
        x.gather(1, pos.view({-1, 1, 1}).expand({x.size(0), 1, x.size(2)})).squeeze(1);
    return {x, pooled};
  }

 private:
  ClipTowerRecipe r_;
  std::optional<PreLnEncoder> encoder_;
};

class ClipModel : public Model {
 public:
  ClipModel(ModelSpec spec, ClipRecipe c) : Model(std::move(spec)), c_(std::move(c)) {
    text_.emplace(c_.text, shapes_);
    if (c_.kind == ClipKind::kText) return;
    vision_.emplace(c_.vision);
    shapes_.insert(shapes_.end(), vision_->Weights().begin(), vision_->Weights().end());
    shapes_.emplace_back("visual_projection.weight",
                         std::vector<int64_t>{c_.projection_dim, c_.vision.hidden});
    shapes_.emplace_back("text_projection.weight",
                         std::vector<int64_t>{c_.projection_dim, c_.text.hidden});
    shapes_.emplace_back("logit_scale", std::vector<int64_t>{});
  }

  WeightList WeightShapes() const override { return shapes_; }
  std::vector<std::string> OutputNames() const override {
    if (c_.kind == ClipKind::kModel) {
      return {"logits_per_image", "logits_per_text", "text_embeds", "image_embeds"};
    }
    return {"last_hidden_state", "pooler_output"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor text_last, text_pooled;
    std::tie(text_last, text_pooled) = text_->Forward(w, GetInput(inputs, "input_ids"),
                                                      GetOptionalInput(inputs, "attention_mask"));
    if (c_.kind == ClipKind::kText) return {text_last, text_pooled};
    at::Tensor vis_pooled = vision_->Forward(w, GetInput(inputs, "pixel_values")).pooled;
    at::Tensor img = nn::Linear(vis_pooled, GetWeight(w, "visual_projection.weight"));
    at::Tensor txt = nn::Linear(text_pooled, GetWeight(w, "text_projection.weight"));
    img = img / img.norm(2, {-1}, /*keepdim=*/true);
    txt = txt / txt.norm(2, {-1}, /*keepdim=*/true);
    at::Tensor logits_per_text = nn::Matmul(txt, img.t()) * GetWeight(w, "logit_scale").exp();
    return {logits_per_text.t(), logits_per_text, txt, img};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    if (c_.kind != ClipKind::kModel) {
      const at::Tensor& target = GetInput(batch.labels, "target");
      return (out[0] - target.to(out[0].scalar_type())).pow(2).mean() + out[1].pow(2).mean();
    }
    const at::Tensor& lt = out[1];
    at::Tensor labels = at::arange(lt.size(0), lt.options().dtype(at::kLong));
    return (CrossEntropy(lt, labels) + CrossEntropy(lt.t(), labels)) / 2;
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override;

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (name == "logit_scale") {
      t.fill_(c_.logit_scale_init);
      return;
    }
    if (vision_ && vision_->InitWeight(name, t, gen)) return;
    Model::InitWeight(name, t, gen);
  }

 private:
  ClipRecipe c_;
  WeightList shapes_;
  std::optional<ClipTextTower> text_;
  std::optional<ClipVisionTrunk> vision_;
};

Batch ClipModel::MakeBatch(uint64_t seed, int64_t batch_size) const {
  if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto fopts = at::TensorOptions().dtype(at::kFloat);
  const auto lopts = at::TensorOptions().dtype(at::kLong);
  Batch batch;
  const int64_t s = std::min(kClipTextLen, c_.text.max_pos);
  const int64_t v = c_.text.vocab;
  // Token ids below the last id; the sequence end (last attended token) is the largest id,
  // which the legacy CLIP pooling finds by argmax.
  at::Tensor ids = at::randint(0, std::max<int64_t>(v - 1, 1), {batch_size, s}, gen, lopts);
  at::Tensor mask = MakeAttentionMask(batch_size, s);
  for (int64_t b = 0; b < batch_size; ++b) {
    const int64_t len = mask[b].sum().item<int64_t>();
    ids[b][len - 1] = v - 1;
    if (len < s) ids[b].narrow(0, len, s - len).fill_(0);
  }
  batch.inputs["input_ids"] = ids;
  batch.inputs["attention_mask"] = mask;
  if (c_.kind == ClipKind::kText) {
    batch.labels["target"] = at::randn({batch_size, s, c_.text.hidden}, gen, fopts);
    return batch;
  }
  const ClipTowerRecipe& t = c_.vision;
  batch.inputs["pixel_values"] = at::randn({batch_size, t.channels, t.image, t.image}, gen, fopts);
  return batch;
}

}  // namespace

std::unique_ptr<Model> MakeClipModel(ModelSpec spec, ClipRecipe recipe) {
  return std::make_unique<ClipModel>(std::move(spec), std::move(recipe));
}

}  // namespace ts::zoo::internal
