// Llama-style decoders: LlamaFor*, MistralFor*, Qwen2For* (CausalLM, SequenceClassification).
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include <tuple>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

struct LayerNames {
  std::string in_norm, q, k, v, o, qb, kb, vb, ob, post_norm, gate, up, down, gate_b, up_b, down_b;
  std::optional<int64_t> window;
};

class DecoderModel : public Model {
 public:
  DecoderModel(ModelSpec spec, DecoderConfig c, bool seq_cls)
      : Model(std::move(spec)), c_(std::move(c)), seq_cls_(seq_cls) {
    const int64_t h = c_.hidden_size, hd = c_.head_dim;
    const int64_t q_out = c_.num_attention_heads * hd, kv_out = c_.num_key_value_heads * hd;
    auto add = [this](const std::string& name, std::vector<int64_t> shape) {
      shapes_.emplace_back(name, std::move(shape));
      return name;
    };
    embed_ = add("model.embed_tokens.weight", {c_.vocab_size, h});
    const bool qkv_b = c_.attention_bias || c_.qkv_bias;
    for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      LayerNames l;
      l.in_norm = add(p + "input_layernorm.weight", {h});
      l.q = add(p + "self_attn.q_proj.weight", {q_out, h});
      if (qkv_b) l.qb = add(p + "self_attn.q_proj.bias", {q_out});
      l.k = add(p + "self_attn.k_proj.weight", {kv_out, h});
      if (qkv_b) l.kb = add(p + "self_attn.k_proj.bias", {kv_out});
      l.v = add(p + "self_attn.v_proj.weight", {kv_out, h});
      if (qkv_b) l.vb = add(p + "self_attn.v_proj.bias", {kv_out});
      l.o = add(p + "self_attn.o_proj.weight", {h, q_out});
      if (c_.attention_bias) l.ob = add(p + "self_attn.o_proj.bias", {h});
      l.post_norm = add(p + "post_attention_layernorm.weight", {h});
      const int64_t im = c_.intermediate_size;
      l.gate = add(p + "mlp.gate_proj.weight", {im, h});
      if (c_.mlp_bias) l.gate_b = add(p + "mlp.gate_proj.bias", {im});
      l.up = add(p + "mlp.up_proj.weight", {im, h});
      if (c_.mlp_bias) l.up_b = add(p + "mlp.up_proj.bias", {im});
      l.down = add(p + "mlp.down_proj.weight", {h, im});
      if (c_.mlp_bias) l.down_b = add(p + "mlp.down_proj.bias", {h});
      l.window = c_.layer_window[static_cast<size_t>(i)];
      layers_.push_back(std::move(l));
    }
    norm_ = add("model.norm.weight", {h});
    if (seq_cls_) {
      head_ = add("score.weight", {c_.num_labels, h});
    } else if (c_.tie_word_embeddings) {
      head_ = embed_;
    } else {
      head_ = add("lm_head.weight", {c_.vocab_size, h});
    }
    seq_len_ = RunSeqLen(this->spec().tiny_config);
  }

  std::vector<std::pair<std::string, std::vector<int64_t>>> WeightShapes() const override {
    return shapes_;
  }
  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& ids = GetInput(inputs, "input_ids");
    at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
    const int64_t b = ids.size(0), s = ids.size(1);
    const int64_t nh = c_.num_attention_heads, nkv = c_.num_key_value_heads, hd = c_.head_dim;
    const at::Device dev = ids.device();
    at::Tensor h = nn::Embedding(GetWeight(w, embed_), ids, c_.pad_token_id.value_or(-1));
    const at::ScalarType dtype = h.scalar_type();
    at::Tensor pos = at::arange(s, at::TensorOptions().dtype(at::kLong).device(dev));
    auto [cos, sin] = nn::RotaryCosSin(c_.rope, hd, pos, dtype);
    // One mask per distinct window, shared across layers.
    at::Tensor blocked_full, blocked_window;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (const LayerNames& l : layers_) {
      at::Tensor& blocked = l.window ? blocked_window : blocked_full;
      if (!blocked.defined()) blocked = nn::BlockedKeys(mask, s, /*causal=*/true, l.window, dev);
      at::Tensor x = nn::RmsNorm(h, GetWeight(w, l.in_norm), c_.rms_norm_eps);
      at::Tensor q = nn::Linear(x, GetWeight(w, l.q), GetOptionalWeight(w, l.qb))
                         .view({b, s, nh, hd})
                         .transpose(1, 2);
      at::Tensor k = nn::Linear(x, GetWeight(w, l.k), GetOptionalWeight(w, l.kb))
                         .view({b, s, nkv, hd})
                         .transpose(1, 2);
      at::Tensor v = nn::Linear(x, GetWeight(w, l.v), GetOptionalWeight(w, l.vb))
                         .view({b, s, nkv, hd})
                         .transpose(1, 2);
      q = nn::ApplyRotary(q, cos, sin);
      k = nn::ApplyRotary(k, cos, sin);
      at::Tensor a =
          nn::Attention(q, k, v, blocked, scale).transpose(1, 2).reshape({b, s, nh * hd});
      h = h + nn::Linear(a, GetWeight(w, l.o), GetOptionalWeight(w, l.ob));
      x = nn::RmsNorm(h, GetWeight(w, l.post_norm), c_.rms_norm_eps);
      at::Tensor g = nn::Activate(
          nn::Linear(x, GetWeight(w, l.gate), GetOptionalWeight(w, l.gate_b)), c_.hidden_act);
      at::Tensor u = nn::Linear(x, GetWeight(w, l.up), GetOptionalWeight(w, l.up_b));
      h = h + nn::Linear(g * u, GetWeight(w, l.down), GetOptionalWeight(w, l.down_b));
    }
    h = nn::RmsNorm(h, GetWeight(w, norm_), c_.rms_norm_eps);
    at::Tensor logits = nn::Linear(h, GetWeight(w, head_));
    if (!seq_cls_) return {logits};
    // Pool at the last attended token (HF pools at the last non-pad token of input_ids).
    at::Tensor last;
    if (mask.defined()) {
      at::Tensor idx = at::arange(s, at::TensorOptions().dtype(at::kLong).device(dev));
      last = (idx * mask.to(at::kLong)).argmax(-1);
    } else {
      last = at::full({b}, s - 1, at::TensorOptions().dtype(at::kLong).device(dev));
    }
    at::Tensor gather_idx = last.view({b, 1, 1}).expand({b, 1, c_.num_labels});
    return {logits.gather(1, gather_idx).squeeze(1)};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    at::Tensor logits = Forward(w, batch.inputs)[0];
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (seq_cls_) {
      if (c_.num_labels == 1)
        return at::mse_loss(logits.squeeze(-1), labels.to(logits.scalar_type()));
      return CrossEntropy(logits, labels);
    }
    const int64_t s = logits.size(1);
    at::Tensor shift_logits = logits.narrow(1, 0, s - 1).reshape({-1, logits.size(-1)});
    at::Tensor shift_labels = labels.narrow(1, 1, s - 1).reshape({-1});
    return CrossEntropy(shift_logits, shift_labels);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    at::Tensor ids = at::randint(0, c_.vocab_size, {batch_size, seq_len_}, gen, lopts);
    at::Tensor mask = MakeAttentionMask(batch_size, seq_len_);
    if (c_.pad_token_id) ids = ids.masked_fill(mask.eq(0), *c_.pad_token_id);
    Batch batch;
    batch.inputs["input_ids"] = ids;
    batch.inputs["attention_mask"] = mask;
    if (seq_cls_) {
      batch.labels["labels"] =
          c_.num_labels == 1 ? at::randn({batch_size}, gen, at::TensorOptions().dtype(at::kFloat))
                             : at::randint(0, c_.num_labels, {batch_size}, gen, lopts);
    } else {
      batch.labels["labels"] = ids.masked_fill(mask.eq(0), -100);
    }
    return batch;
  }

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    Model::InitWeight(name, t, gen);
    // HF zeroes the padding row of nn.Embedding(padding_idx=pad_token_id).
    if (name == embed_ && c_.pad_token_id) t[*c_.pad_token_id].zero_();
  }

 private:
  DecoderConfig c_;
  bool seq_cls_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes_;
  std::vector<LayerNames> layers_;
  std::string embed_, norm_, head_;
  int64_t seq_len_ = 32;
};

}  // namespace

StatusOr<std::unique_ptr<Model>> BuildDecoder(ModelSpec spec, bool sequence_classification) {
  // Family defaults follow the arch's family (spec.family may be any model_type string).
  std::string family = "llama";
  if (spec.arch.rfind("Mistral", 0) == 0) family = "mistral";
  if (spec.arch.rfind("Qwen2", 0) == 0) family = "qwen2";
  TS_ASSIGN_OR_RETURN(DecoderConfig c, ParseDecoderConfig(spec.tiny_config, family));
  return std::unique_ptr<Model>(
      std::make_unique<DecoderModel>(std::move(spec), std::move(c), sequence_classification));
}

}  // namespace ts::zoo::internal

namespace ts::zoo::internal {

std::vector<ArchEntry> LlamaLikeArchs() {
  // Examples modelled on Llama-2-7b, Mistral-7B-v0.1 and Qwen2-7B.
  const nlohmann::json llama = {
      {"model_type", "llama"}, {"hidden_size", 4096}, {"intermediate_size", 11008},
      {"num_attention_heads", 32}, {"num_key_value_heads", 32}, {"num_hidden_layers", 32},
      {"vocab_size", 32000}, {"max_position_embeddings", 4096}, {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000.0}, {"hidden_act", "silu"}, {"tie_word_embeddings", false}};
  const nlohmann::json mistral = {
      {"model_type", "mistral"}, {"hidden_size", 4096}, {"intermediate_size", 14336},
      {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"num_hidden_layers", 32},
      {"vocab_size", 32000}, {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000.0}, {"sliding_window", 4096}, {"hidden_act", "silu"}};
  const nlohmann::json qwen2 = {
      {"model_type", "qwen2"}, {"hidden_size", 3584}, {"intermediate_size", 18944},
      {"num_attention_heads", 28}, {"num_key_value_heads", 4}, {"num_hidden_layers", 28},
      {"vocab_size", 152064}, {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6},
      {"rope_theta", 1000000.0}, {"use_sliding_window", false}, {"sliding_window", 131072},
      {"hidden_act", "silu"}, {"tie_word_embeddings", false}};
  std::vector<ArchEntry> out;
  for (const auto& [family, prefix, example] :
       {std::tuple{"llama", "Llama", llama}, std::tuple{"mistral", "Mistral", mistral},
        std::tuple{"qwen2", "Qwen2", qwen2}}) {
    auto scale = [f = std::string(family)](const nlohmann::json& c) { return ScaleToTiny(c, f); };
    for (bool seq_cls : {false, true}) {
      const std::string arch =
          std::string(prefix) + (seq_cls ? "ForSequenceClassification" : "ForCausalLM");
      nlohmann::json cfg = example;
      cfg["architectures"] = {arch};
      if (seq_cls) cfg["num_labels"] = 2;
      out.push_back({{arch, family, seq_cls ? "text-classification" : "text-generation"}, cfg,
                     scale, [seq_cls](ModelSpec spec) {
                       return BuildDecoder(std::move(spec), seq_cls);
                     }});
    }
  }
  return out;
}

}  // namespace ts::zoo::internal
