// granitemoeshared (modeling_granitemoeshared.py): granitemoe (granitemoe.cc) with
// GraniteMoeSharedMLP beside the routed experts on every layer: `shared_mlp.input_linear`
// [2 S, H] (gate | up, silu(gate) * up) and `shared_mlp.output_linear` [H, S], S =
// shared_intermediate_size, its output added to the routed output (0: no shared MLP).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily GraniteMoeShared() {
  DecoderFamily f = GraniteMoe();
  f.model_type = "granitemoeshared";
  f.parse = [moe = f.parse](const ConfigReader& r, const json& config, Recipe& c) -> Status {
    TS_RETURN_IF_ERROR(moe(r, config, c));
    TS_ASSIGN_OR_RETURN(c.moe.shared_inter, r.Int("shared_intermediate_size", 0));
    if (c.moe.shared_inter < 0) return r.Error("shared_intermediate_size", "must not be negative");
    c.moe.granite_shared = c.moe.shared_inter > 0;
    return OkStatus();
  };
  f.scale_extra = [moe = f.scale_extra](const json& real, const Recipe& rc, json& t) {
    moe(real, rc, t);
    if (rc.moe.shared_inter > 0) {
      t["shared_intermediate_size"] =
          ScaleRatio(rc.moe.shared_inter, rc.hidden, t["hidden_size"].get<int64_t>(), 8);
    }
  };
  f.classes = {"GraniteMoeSharedForCausalLM", "", "", "", "GraniteMoeSharedModel"};
  // ibm-research/moe-7b-1b-active-shared-experts
  f.example = R"({"model_type":"granitemoeshared","hidden_size":1024,"intermediate_size":512,
       "shared_intermediate_size":1024,"num_attention_heads":16,"num_key_value_heads":8,
       "num_hidden_layers":24,"vocab_size":49155,"max_position_embeddings":4096,
       "rms_norm_eps":1e-6,"rope_theta":10000.0,"hidden_act":"silu","embedding_multiplier":12.0,
       "attention_multiplier":0.015625,"residual_multiplier":0.22,"logits_scaling":6.0,
       "num_local_experts":32,"num_experts_per_tok":8,"attention_bias":false,
       "tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":0,"eos_token_id":0})";
  return f;
}

TS_ZOO_DECODER_FAMILY(GraniteMoeShared);

}  // namespace ts::zoo::internal::decoder
