// switch_transformers (modular_switch_transformers.py): T5's stacks (families/t5.h: T5LayerNorm,
// unscaled attention with block 0's relative bias, the tied lm_head scaled by d_model**-0.5)
// whose feed-forward module is `mlp`: T5DenseActDense (`wi`, `wo`, dense_act_fn) on most layers,
// SwitchTransformersSparseMLP on layer i of a stack when i % sparse_step == 1 (or the step is 1):
// `mlp.router.classifier` [num_experts, d_model] (bias with router_bias), softmax in float32,
// the top-1 expert `mlp.experts.expert_<e>` (DenseActDense) times its probability. The sparse
// steps are encoder_sparse_step / decoder_sparse_step, else num_layers // num_sparse_*_layers as
// SwitchTransformersConfig computes them. Classes: ForConditionalGeneration, Model.
//
// The loss is the cross entropy alone: transformers 5's forward adds the router z-loss and the
// load-balancing loss only when called with output_router_logits=True (default False); the
// router's training-time jitter noise (router_jitter_noise) is random, as dropout, and the zoo
// runs neither.
#include <algorithm>

#include "workers/zoo/config.h"
#include "workers/zoo/families/t5.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct SwitchCfg {
  T5Cfg t5;
  int64_t experts = 8, capacity = 64, enc_step = 0, dec_step = 0;
  bool router_bias = false;
};

// encoder_sparse_step / decoder_sparse_step as stored, else SwitchTransformersConfig's
// num_layers // num_sparse_*_layers (0 sparse layers: step 0, every layer dense).
StatusOr<int64_t> SparseStep(const ConfigReader& r, const std::string& step,
                             const std::string& count, int64_t layers) {
  int64_t v = 0;
  if (r.Has(step)) {
    TS_ASSIGN_OR_RETURN(v, r.Int(step));
    if (v < 0) return r.Error(step, "must be >= 0 (got " + std::to_string(v) + ")");
    return v;
  }
  TS_ASSIGN_OR_RETURN(int64_t n, r.Int(count, 3));
  if (n < 0) return r.Error(count, "must be >= 0 (got " + std::to_string(n) + ")");
  return n > 0 ? layers / n : 0;
}

StatusOr<SwitchCfg> ParseSwitch(const json& config) {
  SwitchCfg c;
  TS_ASSIGN_OR_RETURN(c.t5, ParseT5Base(config));
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(std::string act, r.String("dense_act_fn", "relu"));
  TS_ASSIGN_OR_RETURN(c.t5.act, ParseActivation(act, r.Name("dense_act_fn")));
  c.t5.gated = false;  // SwitchTransformersDenseActDense has no gated form
  TS_ASSIGN_OR_RETURN(c.experts, r.Int("num_experts", 8));
  if (c.experts <= 0) return r.Error("num_experts", "must be positive");
  TS_ASSIGN_OR_RETURN(c.capacity, r.Int("expert_capacity", 64));
  if (c.capacity <= 0) return r.Error("expert_capacity", "must be positive");
  TS_ASSIGN_OR_RETURN(c.router_bias, r.Bool("router_bias", false));
  TS_ASSIGN_OR_RETURN(std::string dtype, r.String("router_dtype", "float32"));
  if (dtype != "float32") {
    return r.Error("router_dtype", "'" + dtype + "' not supported (the zoo routes in float32)");
  }
  TS_ASSIGN_OR_RETURN(double jitter, r.Double("router_jitter_noise", 0.01));
  if (!(jitter >= 0.0)) return r.Error("router_jitter_noise", "must be >= 0");
  TS_ASSIGN_OR_RETURN(
      c.enc_step, SparseStep(r, "encoder_sparse_step", "num_sparse_encoder_layers", c.t5.layers));
  TS_ASSIGN_OR_RETURN(c.dec_step, SparseStep(r, "decoder_sparse_step", "num_sparse_decoder_layers",
                                             c.t5.dec_layers));
  return c;
}

// T5's tiny scaling but two layers a stack (T5 keeps one), so that a dense and a sparse layer
// run: layer 1 is sparse for any step >= 2, both for step 1; at most 4 experts; the sparse steps
// written out.
StatusOr<json> ScaleSwitch(const json& config) {
  TS_ASSIGN_OR_RETURN(SwitchCfg c, ParseSwitch(config));
  TS_ASSIGN_OR_RETURN(json t, ScaleT5(config, "switch_transformers"));
  t["num_layers"] = std::min<int64_t>(c.t5.layers, 2);
  t["num_decoder_layers"] = std::min<int64_t>(c.t5.dec_layers, 2);
  t["num_experts"] = std::min<int64_t>(c.experts, 4);
  t["encoder_sparse_step"] = c.enc_step;
  t["decoder_sparse_step"] = c.dec_step;
  return t;
}

ArchEntry SwitchEntry(const std::string& arch, Seq2SeqHead head) {
  ArchEntry e;
  e.info = {arch, "switch_transformers", T5PipelineTag(head)};
  // google/switch-base-8
  e.example_config = json{{"architectures", {arch}},
                          {"model_type", "switch_transformers"},
                          {"d_ff", 3072},
                          {"d_kv", 64},
                          {"d_model", 768},
                          {"decoder_sparse_step", 2},
                          {"decoder_start_token_id", 0},
                          {"dense_act_fn", "relu"},
                          {"dropout_rate", 0.1},
                          {"encoder_sparse_step", 2},
                          {"eos_token_id", 1},
                          {"expert_capacity", 64},
                          {"is_encoder_decoder", true},
                          {"layer_norm_epsilon", 1e-06},
                          {"num_decoder_layers", 12},
                          {"num_experts", 8},
                          {"num_heads", 12},
                          {"num_layers", 12},
                          {"num_sparse_decoder_layers", 6},
                          {"num_sparse_encoder_layers", 6},
                          {"pad_token_id", 0},
                          {"relative_attention_max_distance", 128},
                          {"relative_attention_num_buckets", 32},
                          {"router_bias", false},
                          {"router_dtype", "float32"},
                          {"router_jitter_noise", 0.01},
                          {"vocab_size", 32128}};
  e.scale = ScaleSwitch;
  e.build = [head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(SwitchCfg c, ParseSwitch(spec.tiny_config));
    // Tokens past an expert's capacity are dropped by the older stored modeling file (per
    // sequence) and by none in the newest (the router sees the flattened tokens); with the
    // capacity at least the sequence length the two agree.
    const int64_t seq = RunSeqLen(spec.tiny_config);
    if (c.capacity < seq) {
      return ConfigReader(spec.tiny_config)
          .Error("expert_capacity", "must be >= the run's sequence length " + std::to_string(seq) +
                                        " (tokens would be dropped)");
    }
    EncDecRecipe r = T5Recipe(c.t5, head, "switch_transformers");
    r.t5_ffn = "mlp";
    r.num_experts = c.experts;
    r.router_bias = c.router_bias;
    r.encoder.sparse_step = c.enc_step;
    r.decoder.sparse_step = c.dec_step;
    if (head == Seq2SeqHead::kConditionalGeneration)
      return MakeSeq2SeqLm(std::move(spec), std::move(r));
    return MakeSeq2SeqBase(std::move(spec), std::move(r), head);
  };
  return e;
}

std::vector<ArchEntry> SwitchTransformersArchs() {
  return {SwitchEntry("SwitchTransformersForConditionalGeneration",
                      Seq2SeqHead::kConditionalGeneration),
          SwitchEntry("SwitchTransformersModel", Seq2SeqHead::kModel)};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(SwitchTransformers, SwitchTransformersArchs);

}  // namespace ts::zoo::internal
