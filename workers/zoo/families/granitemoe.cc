// granitemoe (modeling_granitemoe.py): granite's multipliers (granite.cc) with every MLP a
// GraniteMoeMoE under `block_sparse_moe`: GraniteMoeTopKGating (`router.layer` [E, H]; the top-k
// logits, softmax over them, which is the softmax renormalised over the top k), and
// GraniteMoeParallelExperts `input_linear` [E, 2I, H] (gate rows then up rows:
// silu(gate) * up) and `output_linear` [E, H, I], I = intermediate_size. The router's
// num_local_experts / num_experts_per_tok have no other field (no norm_topk_prob, no dense layers).
// granitemoeshared.cc adds the shared MLP.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

Status ReadGraniteMoe(const ConfigReader& r, const json&, Recipe& c) {
  Moe& m = c.moe;
  TS_ASSIGN_OR_RETURN(m.experts, r.Int("num_local_experts", 8));
  TS_RETURN_IF_ERROR(Positive(r, "num_local_experts", m.experts));
  TS_ASSIGN_OR_RETURN(m.top_k, r.Int("num_experts_per_tok", 2));
  TS_RETURN_IF_ERROR(CheckExperts(r, c));
  m.inter = c.inter;
  m.norm_topk = true;
  m.sparse.assign(static_cast<size_t>(c.layers), true);
  m.router_name = "router.layer.weight";
  m.gate_up_name = "input_linear.weight";
  m.down_name = "output_linear.weight";
  c.n.mlp = "block_sparse_moe.";
  return OkStatus();
}

DecoderFamily GraniteMoe() {
  DecoderFamily f = Granite();
  f.model_type = "granitemoe";
  f.defaults = {.eps = 1e-6};  // GraniteMoeConfig: rms_norm_eps 1e-6, untied by default
  f.parse = [granite = f.parse](const ConfigReader& r, const json& config, Recipe& c) -> Status {
    TS_RETURN_IF_ERROR(granite(r, config, c));
    return ReadGraniteMoe(r, config, c);
  };
  f.scale_extra = [granite = f.scale_extra](const json& real, const Recipe& rc, json& t) {
    granite(real, rc, t);
    ScaleExperts(rc, "num_local_experts", t);
  };
  f.classes = {"GraniteMoeForCausalLM", "", "", "", "GraniteMoeModel"};
  // ibm-granite/granite-3.0-1b-a400m-base
  f.example = R"({"model_type":"granitemoe","hidden_size":1024,"intermediate_size":512,
       "num_attention_heads":16,"num_key_value_heads":8,"num_hidden_layers":24,"vocab_size":49155,
       "max_position_embeddings":4096,"rms_norm_eps":1e-6,"rope_theta":10000.0,"hidden_act":"silu",
       "embedding_multiplier":12.0,"attention_multiplier":0.015625,"residual_multiplier":0.22,
       "logits_scaling":6.0,"num_local_experts":32,"num_experts_per_tok":8,
       "attention_bias":false,"tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":0,
       "eos_token_id":0})";
  return f;
}

TS_ZOO_DECODER_FAMILY(GraniteMoe);

}  // namespace ts::zoo::internal::decoder
