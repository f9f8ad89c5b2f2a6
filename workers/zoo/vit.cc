// ViTForImageClassification and ViTModel (the base model: no "vit." prefix, with its pooler).
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

struct VitLayerNames {
  std::string ln1, ln1b, q, qb, k, kb, v, vb, ao, aob, ln2, ln2b, inter, interb, out, outb;
};

class VitModel : public Model {
 public:
  VitModel(ModelSpec spec, VitConfig c, bool base)
      : Model(std::move(spec)), c_(std::move(c)), base_(base) {
    const int64_t h = c_.hidden_size, im = c_.intermediate_size, p = c_.patch_size;
    const int64_t grid = c_.image_size / p;
    num_patches_ = grid * grid;
    const std::string pre = base_ ? "" : "vit.";
    auto add = [this, pre](const std::string& name, std::vector<int64_t> shape) {
      const std::string full = name.rfind("vit.", 0) == 0 ? pre + name.substr(4) : name;
      shapes_.emplace_back(full, std::move(shape));
      return full;
    };
    cls_token_ = add("vit.embeddings.cls_token", {1, 1, h});
    pos_ = add("vit.embeddings.position_embeddings", {1, num_patches_ + 1, h});
    patch_w_ = add("vit.embeddings.patch_embeddings.projection.weight", {h, c_.num_channels, p, p});
    patch_b_ = add("vit.embeddings.patch_embeddings.projection.bias", {h});
    for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
      const std::string lp = "vit.encoder.layer." + std::to_string(i) + ".";
      VitLayerNames l;
      l.ln1 = add(lp + "layernorm_before.weight", {h});
      l.ln1b = add(lp + "layernorm_before.bias", {h});
      l.q = add(lp + "attention.attention.query.weight", {h, h});
      if (c_.qkv_bias) l.qb = add(lp + "attention.attention.query.bias", {h});
      l.k = add(lp + "attention.attention.key.weight", {h, h});
      if (c_.qkv_bias) l.kb = add(lp + "attention.attention.key.bias", {h});
      l.v = add(lp + "attention.attention.value.weight", {h, h});
      if (c_.qkv_bias) l.vb = add(lp + "attention.attention.value.bias", {h});
      l.ao = add(lp + "attention.output.dense.weight", {h, h});
      l.aob = add(lp + "attention.output.dense.bias", {h});
      l.ln2 = add(lp + "layernorm_after.weight", {h});
      l.ln2b = add(lp + "layernorm_after.bias", {h});
      l.inter = add(lp + "intermediate.dense.weight", {im, h});
      l.interb = add(lp + "intermediate.dense.bias", {im});
      l.out = add(lp + "output.dense.weight", {h, im});
      l.outb = add(lp + "output.dense.bias", {h});
      layers_.push_back(std::move(l));
    }
    ln_ = add("vit.layernorm.weight", {h});
    lnb_ = add("vit.layernorm.bias", {h});
    if (base_) {  // ViTModel(add_pooling_layer=True): tanh(dense(token 0))
      head_ = add("pooler.dense.weight", {h, h});
      headb_ = add("pooler.dense.bias", {h});
      return;
    }
    head_ = add("classifier.weight", {c_.num_labels, h});
    headb_ = add("classifier.bias", {c_.num_labels});
  }

  std::vector<std::pair<std::string, std::vector<int64_t>>> WeightShapes() const override {
    return shapes_;
  }
  std::vector<std::string> OutputNames() const override {
    if (base_) return {"last_hidden_state", "pooler_output"};
    return {"logits"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& px = GetInput(inputs, "pixel_values");
    const int64_t b = px.size(0), hid = c_.hidden_size, nh = c_.num_attention_heads;
    const int64_t hd = hid / nh;
    at::Tensor x =
        nn::PatchEmbed(px, GetWeight(w, patch_w_), GetWeight(w, patch_b_), c_.patch_size);
    at::Tensor cls = GetWeight(w, cls_token_).expand({b, 1, hid});
    x = at::cat({cls, x}, 1) + GetWeight(w, pos_);
    const int64_t s = x.size(1);
    at::Tensor blocked =
        nn::BlockedKeys(at::Tensor(), s, /*causal=*/false, std::nullopt, px.device());
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    auto heads = [&](const at::Tensor& t) { return t.view({b, s, nh, hd}).transpose(1, 2); };
    for (const VitLayerNames& l : layers_) {
      at::Tensor y = nn::LayerNorm(x, GetWeight(w, l.ln1), GetWeight(w, l.ln1b), c_.layer_norm_eps);
      at::Tensor q = heads(nn::Linear(y, GetWeight(w, l.q), GetOptionalWeight(w, l.qb)));
      at::Tensor k = heads(nn::Linear(y, GetWeight(w, l.k), GetOptionalWeight(w, l.kb)));
      at::Tensor v = heads(nn::Linear(y, GetWeight(w, l.v), GetOptionalWeight(w, l.vb)));
      at::Tensor ctx = nn::Attention(q, k, v, blocked, scale).transpose(1, 2).reshape({b, s, hid});
      x = x + nn::Linear(ctx, GetWeight(w, l.ao), GetWeight(w, l.aob));
      y = nn::LayerNorm(x, GetWeight(w, l.ln2), GetWeight(w, l.ln2b), c_.layer_norm_eps);
      y = nn::Activate(nn::Linear(y, GetWeight(w, l.inter), GetWeight(w, l.interb)), c_.hidden_act);
      x = x + nn::Linear(y, GetWeight(w, l.out), GetWeight(w, l.outb));
    }
    x = nn::LayerNorm(x, GetWeight(w, ln_), GetWeight(w, lnb_), c_.layer_norm_eps);
    if (base_) return {x, at::tanh(nn::Linear(x.select(1, 0), GetWeight(w, head_), GetWeight(w, headb_)))};
    return {nn::Linear(x.select(1, 0), GetWeight(w, head_), GetWeight(w, headb_))};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    if (base_) {
      // No HF loss: regress both outputs onto a fixed random target (as BertModel).
      std::vector<at::Tensor> out = Forward(w, batch.inputs);
      const at::Tensor& t = GetInput(batch.labels, "labels");
      return at::mse_loss(out[0], t.to(out[0].scalar_type())) +
             at::mse_loss(out[1], t.select(1, 0).to(out[1].scalar_type()));
    }
    at::Tensor logits = Forward(w, batch.inputs)[0];
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (c_.num_labels == 1)
      return at::mse_loss(logits.squeeze(-1), labels.to(logits.scalar_type()));
    return CrossEntropy(logits, labels);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    Batch batch;
    batch.inputs["pixel_values"] =
        at::randn({batch_size, c_.num_channels, c_.image_size, c_.image_size}, gen, fopts);
    if (base_) {
      batch.labels["labels"] = at::randn({batch_size, num_patches_ + 1, c_.hidden_size}, gen, fopts);
      return batch;
    }
    batch.labels["labels"] = c_.num_labels == 1 ? at::randn({batch_size}, gen, fopts)
                                                : at::randint(0, c_.num_labels, {batch_size}, gen,
                                                              at::TensorOptions().dtype(at::kLong));
    return batch;
  }

 private:
  VitConfig c_;
  bool base_ = false;
  int64_t num_patches_ = 0;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes_;
  std::vector<VitLayerNames> layers_;
  std::string cls_token_, pos_, patch_w_, patch_b_, ln_, lnb_, head_, headb_;
};

}  // namespace

StatusOr<std::unique_ptr<Model>> BuildVit(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(VitConfig c, ParseVitConfig(spec.tiny_config));
  const bool base = spec.arch == "ViTModel";
  return std::unique_ptr<Model>(std::make_unique<VitModel>(std::move(spec), std::move(c), base));
}

}  // namespace ts::zoo::internal

namespace ts::zoo::internal {

std::vector<ArchEntry> VitArchs() {
  // Example modelled on google/vit-base-patch16-224.
  const nlohmann::json example = {
      {"architectures", {"ViTForImageClassification"}}, {"model_type", "vit"},
      {"hidden_size", 768}, {"intermediate_size", 3072}, {"num_attention_heads", 12},
      {"num_hidden_layers", 12}, {"image_size", 224}, {"patch_size", 16}, {"num_channels", 3},
      {"hidden_act", "gelu"}, {"layer_norm_eps", 1e-12}, {"qkv_bias", true},
      {"num_labels", 1000}};
  nlohmann::json base = example;  // google/vit-base-patch16-224-in21k
  base["architectures"] = {"ViTModel"};
  base.erase("num_labels");
  auto scale = [](const nlohmann::json& c) { return ScaleToTiny(c, "vit"); };
  auto build = [](ModelSpec spec) { return BuildVit(std::move(spec)); };
  return {{{"ViTForImageClassification", "vit", "image-classification"}, example, scale, build},
          {{"ViTModel", "vit", "image-feature-extraction"}, base, scale, build}};
}

}  // namespace ts::zoo::internal
