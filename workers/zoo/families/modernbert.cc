// modernbert: ModernBERT (modeling_modernbert.py, eager attention) as a family stack on the
// encoder trunk (encoder.h Stack): embeddings.tok_embeddings and embeddings.norm; pre-LN layers
// (layer 0's attn_norm is the identity) with a fused attn.Wqkv, the rotary over arange(S) at
// global_rope_theta on the global layers (every global_attn_every_n_layers-th, from layer 0)
// and local_rope_theta on the local ones, whose keys are limited to |i - j| <= local_attention / 2;
// the GeGLU MLP (mlp.Wi -> input, gate; act(input) * gate -> mlp.Wo); final_norm. LayerNorms
// carry a bias only with norm_bias, the projections only with attention_bias / mlp_bias. Every
// head but the base model runs ModernBertPredictionHead (head.dense, classifier_activation,
// head.norm) first: over every token (MaskedLM: the decoder tied to tok_embeddings with its own
// bias when decoder_bias; TokenClassification; QuestionAnswering: `classifier` split into start
// and end), or over the pooled row (SequenceClassification, MultipleChoice: token 0 with
// classifier_pooling "cls", the attended tokens' mean with "mean"). transformers 5's
// `layer_types` and nested `rope_parameters` are read where a config has them.
// answerdotai/ModernBERT-base.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal::encoder {
namespace {

struct ModernBertShape {
  std::vector<bool> global;  // per layer
  double global_theta = 160000.0, local_theta = 10000.0;
  int64_t window = 128;
  bool norm_bias = false, attn_bias = false, mlp_bias = false, cls_bias = false;
  bool mean_pool = false;
  Activation cls_act = Activation::kGeluErf;
};

struct ModernBertLayerW {
  std::string attn_norm, qkv, o, mlp_norm, wi, wo;
};

class ModernBertStack : public Stack {
 public:
  ModernBertStack(const Recipe& r, ModernBertShape shape) : r_(r), m_(std::move(shape)) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden;
    word_ = add(p + "embeddings.tok_embeddings.weight", {r_.vocab, h});
    emb_norm_ = Norm(add, p + "embeddings.norm");
    for (int64_t i = 0; i < r_.layers; ++i) {
      const std::string lp = p + "layers." + std::to_string(i) + ".";
      ModernBertLayerW l;
      if (i > 0) l.attn_norm = Norm(add, lp + "attn_norm");
      l.qkv = Linear(add, lp + "attn.Wqkv", 3 * h, h, m_.attn_bias);
      l.o = Linear(add, lp + "attn.Wo", h, h, m_.attn_bias);
      l.mlp_norm = Norm(add, lp + "mlp_norm");
      l.wi = Linear(add, lp + "mlp.Wi", 2 * r_.inter, h, m_.mlp_bias);
      l.wo = Linear(add, lp + "mlp.Wo", h, r_.inter, m_.mlp_bias);
      layers_.push_back(std::move(l));
    }
    final_norm_ = Norm(add, p + "final_norm");
  }

  void AddHeadWeights(bool, bool base, const AddFn& add) override {
    if (base) return;
    head_dense_ = Linear(add, "head.dense", r_.hidden, r_.hidden, m_.cls_bias);
    head_norm_ = Norm(add, "head.norm");
  }

  std::string WordEmbedding() const override { return word_; }

  at::Tensor Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor&, const at::Tensor&,
                    const at::Tensor& blocked) const override {
    const int64_t s = ids.size(1), hd = r_.hidden / r_.heads;
    at::Tensor x = Ln(w, nn::Embedding(GetWeight(w, word_), ids, r_.pad.value_or(-1)), emb_norm_);
    const at::Tensor pos = at::arange(s, ids.options());
    RopeConfig global_rope, local_rope;
    global_rope.theta = m_.global_theta;
    local_rope.theta = m_.local_theta;
    const auto global_cs = nn::RotaryCosSin(global_rope, hd, pos, x.scalar_type());
    const auto local_cs = nn::RotaryCosSin(local_rope, hd, pos, x.scalar_type());
    // sliding_window_mask: keys farther than local_attention / 2 from the query, or padded.
    const at::Tensor dist = (pos.unsqueeze(1) - pos.unsqueeze(0)).abs();
    at::Tensor far = dist.gt(m_.window / 2).view({1, 1, s, s});
    const at::Tensor local_blocked = blocked.defined() ? at::logical_or(blocked, far) : far;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const bool g = m_.global[i];
      x = Layer(w, layers_[i], x, g ? blocked : local_blocked, g ? global_cs : local_cs);
    }
    return Ln(w, x, final_norm_);
  }

  at::Tensor HeadInput(const WeightMap& w, bool sequence_level, bool base, const at::Tensor&,
                       const TensorMap&, const at::Tensor& h,
                       const at::Tensor& mask) const override {
    if (base) return h;
    at::Tensor x = h;
    if (sequence_level && m_.mean_pool) {  // (h * mask).sum(1) / mask.sum(1)
      const at::Tensor m = (mask.defined() ? mask : at::ones({h.size(0), h.size(1)}, h.options()))
                               .to(h.scalar_type())
                               .unsqueeze(-1);
      x = ((h * m).sum(1) / m.sum(1)).unsqueeze(1);
    } else if (sequence_level) {
      x = h.narrow(1, 0, 1);
    }
    x = nn::Activate(nn::Linear(x, GetWeight(w, head_dense_ + ".weight"),
                                GetOptionalWeight(w, m_.cls_bias ? head_dense_ + ".bias" : "")),
                     m_.cls_act);
    return Ln(w, x, head_norm_);
  }

 private:
  std::string Norm(const AddFn& add, const std::string& n) const {
    add(n + ".weight", {r_.hidden});
    if (m_.norm_bias) add(n + ".bias", {r_.hidden});
    return n;
  }
  static std::string Linear(const AddFn& add, const std::string& n, int64_t out, int64_t in,
                            bool bias) {
    add(n + ".weight", {out, in});
    if (bias) add(n + ".bias", {out});
    return n;
  }
  at::Tensor Ln(const WeightMap& w, const at::Tensor& x, const std::string& n) const {
    return nn::LayerNorm(x, GetWeight(w, n + ".weight"),
                         GetOptionalWeight(w, m_.norm_bias ? n + ".bias" : ""), r_.eps);
  }
  at::Tensor Lin(const WeightMap& w, const at::Tensor& x, const std::string& n, bool bias) const {
    return nn::Linear(x, GetWeight(w, n + ".weight"),
                      GetOptionalWeight(w, bias ? n + ".bias" : ""));
  }

  at::Tensor Layer(const WeightMap& w, const ModernBertLayerW& l, const at::Tensor& x,
                   const at::Tensor& blocked, const std::pair<at::Tensor, at::Tensor>& cs) const {
    const int64_t n = x.size(0), s = x.size(1), nh = r_.heads, hd = r_.hidden / nh;
    const at::Tensor a_in = l.attn_norm.empty() ? x : Ln(w, x, l.attn_norm);
    // qkv.view(bs, -1, 3, heads, head_dim).transpose(3, 1).unbind(2): q | k | v blocks.
    const at::Tensor qkv = Lin(w, a_in, l.qkv, m_.attn_bias).view({n, s, 3, nh, hd});
    auto part = [&](int64_t i) { return qkv.select(2, i).transpose(1, 2); };
    const at::Tensor q = nn::ApplyRotary(part(0), cs.first, cs.second);
    const at::Tensor k = nn::ApplyRotary(part(1), cs.first, cs.second);
    const at::Tensor ctx =
        nn::Attention(q, k, part(2), blocked, 1.0 / std::sqrt(static_cast<double>(hd)));
    const at::Tensor y =
        x + Lin(w, ctx.transpose(1, 2).reshape({n, s, r_.hidden}), l.o, m_.attn_bias);
    const std::vector<at::Tensor> ig = Lin(w, Ln(w, y, l.mlp_norm), l.wi, m_.mlp_bias).chunk(2, -1);
    return y + Lin(w, nn::Activate(ig[0], r_.act) * ig[1], l.wo, m_.mlp_bias);
  }

  Recipe r_;
  ModernBertShape m_;
  std::string word_, emb_norm_, final_norm_, head_dense_, head_norm_;
  std::vector<ModernBertLayerW> layers_;
};

// rope_parameters[kind].rope_theta (transformers 5), else the flat field.
StatusOr<double> RopeTheta(const ConfigReader& r, const json& config, const char* kind,
                           const std::string& flat, double def) {
  if (config.contains("rope_parameters") && config["rope_parameters"].is_object() &&
      config["rope_parameters"].contains(kind)) {
    const json& p = config["rope_parameters"][kind];
    if (!p.is_object() || !p.contains("rope_theta") || !p["rope_theta"].is_number())
      return r.Error(std::string("rope_parameters.") + kind, "expected {\"rope_theta\": number}");
    return p["rope_theta"].get<double>();
  }
  return r.Double(flat, def);
}

Status ParseModernBertLayers(const ConfigReader& r, const json& config, Recipe& c,
                             ModernBertShape& m) {
  if (config.contains("layer_types") && !config["layer_types"].is_null()) {
    const json& types = config["layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != c.layers)
      return r.Error("layer_types", "expected num_hidden_layers entries");
    for (const json& t : types) {
      if (t == "full_attention") {
        m.global.push_back(true);
      } else if (t == "sliding_attention") {
        m.global.push_back(false);
      } else {
        return r.Error("layer_types", "unknown entry " + t.dump());
      }
    }
    return OkStatus();
  }
  TS_ASSIGN_OR_RETURN(int64_t every, r.Int("global_attn_every_n_layers", 3));
  TS_RETURN_IF_ERROR(Positive(r, "global_attn_every_n_layers", every));
  for (int64_t i = 0; i < c.layers; ++i) m.global.push_back(i % every == 0);
  return OkStatus();
}

Status ParseModernBert(const ConfigReader& r, const json& config, Recipe& c) {
  ModernBertShape m;
  TS_RETURN_IF_ERROR(ParseModernBertLayers(r, config, c, m));
  TS_ASSIGN_OR_RETURN(m.global_theta,
                      RopeTheta(r, config, "full_attention", "global_rope_theta", 160000.0));
  TS_ASSIGN_OR_RETURN(m.local_theta,
                      RopeTheta(r, config, "sliding_attention", "local_rope_theta", 10000.0));
  TS_ASSIGN_OR_RETURN(m.window, r.Int("local_attention", 128));
  TS_RETURN_IF_ERROR(Positive(r, "local_attention", m.window));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("norm_eps", 1e-5));
  if (!(c.eps > 0.0)) return r.Error("norm_eps", "must be positive");
  TS_ASSIGN_OR_RETURN(m.norm_bias, r.Bool("norm_bias", false));
  TS_ASSIGN_OR_RETURN(m.attn_bias, r.Bool("attention_bias", false));
  TS_ASSIGN_OR_RETURN(m.mlp_bias, r.Bool("mlp_bias", false));
  TS_ASSIGN_OR_RETURN(m.cls_bias, r.Bool("classifier_bias", false));
  TS_ASSIGN_OR_RETURN(std::string pooling, r.String("classifier_pooling", "cls"));
  if (pooling != "cls" && pooling != "mean")
    return r.Error("classifier_pooling", "must be cls or mean (got '" + pooling + "')");
  m.mean_pool = pooling == "mean";
  TS_ASSIGN_OR_RETURN(std::string act, r.String("classifier_activation", "gelu"));
  TS_ASSIGN_OR_RETURN(m.cls_act, ParseActivation(act, r.Name("classifier_activation")));
  TS_ASSIGN_OR_RETURN(bool decoder_bias, r.Bool("decoder_bias", true));
  if (!decoder_bias)
    c.lm_error = r.Name("decoder_bias") + ": false is not supported (a bias-free decoder)";
  TS_ASSIGN_OR_RETURN(bool sparse, r.Bool("sparse_prediction", false));
  if (sparse) return r.Error("sparse_prediction", "true is not supported (dense logits only)");
  c.stack = [m](const Recipe& rec) { return std::make_unique<ModernBertStack>(rec, m); };
  return OkStatus();
}

// Two layers (layer 0 global, layer 1 local unless every layer is global), the window at 8 so
// that it bites within the run's 32 tokens.
void ScaleModernBert(const Recipe& real, json& t) {
  const int64_t layers = std::min<int64_t>(real.layers, 2);
  t["num_hidden_layers"] = layers;
  t["local_attention"] = std::min<int64_t>(t.value("local_attention", int64_t{128}), 8);
  if (t.contains("layer_types") && t["layer_types"].is_array()) {
    json types = json::array();
    for (int64_t i = 0; i < layers; ++i)
      types.push_back(i == 0 ? "full_attention" : "sliding_attention");
    t["layer_types"] = types;
  }
}

// ModernBertForMaskedLM's decoder.weight is tok_embeddings (its bias a parameter of its own).
void ModernBertStateDictExtra(StateDictBuilder& sd) {
  if (sd.HasWeight("decoder.bias"))
    sd.AddTied("decoder.weight", "model.embeddings.tok_embeddings.weight");
}

}  // namespace

EncoderFamily ModernBert() {
  const json example = {{"model_type", "modernbert"},
                        {"hidden_size", 768},
                        {"intermediate_size", 1152},
                        {"num_hidden_layers", 22},
                        {"num_attention_heads", 12},
                        {"hidden_activation", "gelu"},
                        {"max_position_embeddings", 8192},
                        {"vocab_size", 50368},
                        {"norm_eps", 1e-5},
                        {"norm_bias", false},
                        {"pad_token_id", 50283},
                        {"bos_token_id", 50281},
                        {"eos_token_id", 50282},
                        {"cls_token_id", 50281},
                        {"sep_token_id", 50282},
                        {"global_rope_theta", 160000.0},
                        {"local_rope_theta", 10000.0},
                        {"global_attn_every_n_layers", 3},
                        {"local_attention", 128},
                        {"attention_bias", false},
                        {"mlp_bias", false},
                        {"decoder_bias", true},
                        {"classifier_pooling", "mean"},
                        {"classifier_bias", false},
                        {"classifier_activation", "gelu"}};
  return {
      .model_type = "modernbert",
      .fields = {.act = "hidden_activation"},
      .defaults = {.type_vocab = -1, .pad = 50283},
      .structure = {.base = "model."},
      .names = {.seq_pooled = false,
                .choice_pooled = false,
                .lm_bias = "decoder",
                .qa_out = "classifier"},
      .parse = ParseModernBert,
      .scale_extra = ScaleModernBert,
      .classes = {.base = "ModernBertModel",
                  .seq_cls = "ModernBertForSequenceClassification",
                  .token_cls = "ModernBertForTokenClassification",
                  .qa = "ModernBertForQuestionAnswering",
                  .masked_lm = "ModernBertForMaskedLM",
                  .multiple_choice = "ModernBertForMultipleChoice"},
      .example = example,
      .state_dict = {.extra = ModernBertStateDictExtra},
  };
}

TS_ZOO_ENCODER_FAMILY(ModernBert);

}  // namespace ts::zoo::internal::encoder
