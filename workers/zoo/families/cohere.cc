// cohere: parallel block over a bias-free LayerNorm, interleaved rotary, logits * `logit_scale`.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

// Cohere's block (shared by cohere2): parallel attention and MLP over one bias-free LayerNorm,
// interleaved rotary, logits * logit_scale.
Status CohereLayers(const ConfigReader& r, const json&, Recipe& c) {
  c.norm = Norm::kLayerNormNoBias;
  c.block = Block::kParallel1;
  c.interleaved = true;
  TS_ASSIGN_OR_RETURN(c.logit_mult, r.Double("logit_scale", 0.0625));
  TS_ASSIGN_OR_RETURN(bool qk, r.Bool("use_qk_norm", false));
  if (qk) return r.Error("use_qk_norm", "true is not supported by the zoo");
  return OkStatus();
}

DecoderFamily Cohere() {
  return {
      .model_type = "cohere",
      .fields = {.eps = "layer_norm_eps"},
      .defaults = {.max_pos = 8192, .eps = 1e-5, .tie = true},
      .parse = CohereLayers,
      .classes = {"CohereForCausalLM", "", "", "", "CohereModel"},
      // CohereForAI/c4ai-command-r-v01
      .example = R"({"hidden_size":8192,"intermediate_size":22528,"num_attention_heads":64,"num_key_value_heads":64,
         "num_hidden_layers":40,"vocab_size":256000,"max_position_embeddings":8192,"layer_norm_eps":1e-5,
         "logit_scale":0.0625,"rope_theta":8000000.0,"use_qk_norm":false,"hidden_act":"silu",
         "attention_bias":false,"tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":5,
         "eos_token_id":255001})",
  };
}

TS_ZOO_DECODER_FAMILY(Cohere);

}  // namespace ts::zoo::internal::decoder
