// qwen3_moe (modular_qwen3_moe.py): qwen3's attention (per-head q/k RMSNorm, no q/k/v bias,
// head_dim 128 by default) with the Qwen MoE layers and no shared expert; the router is
// softmax, top-k, renormalised when norm_topk_prob; experts fused as transformers 5 stores them.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Qwen3Moe() {
  DecoderFamily f = Qwen3();  // qwen3's fields, defaults, windows and attention
  f.model_type = "qwen3_moe";
  f.parse_layers = [](const ConfigReader& r, const json& config, Recipe& c) {
    // Qwen3MoeConfig defaults.
    return ReadQwenMoe(r, config, {.experts = 128, .top_k = 8, .inter = 768}, c);
  };
  f.scale_extra = ScaleQwenMoe;
  f.classes = {"Qwen3MoeForCausalLM", "Qwen3MoeForSequenceClassification",
               "Qwen3MoeForTokenClassification", "Qwen3MoeForQuestionAnswering",
               "Qwen3MoeModel"};
  // Qwen3MoeForQuestionAnswering(LlamaForQuestionAnswering): the model as `transformer`
  // (qa_base, as qwen3's).
  // Qwen/Qwen3-30B-A3B
  f.example = R"({"model_type":"qwen3_moe","hidden_size":2048,"intermediate_size":6144,
       "num_attention_heads":32,"num_key_value_heads":4,"head_dim":128,
       "num_hidden_layers":48,"vocab_size":151936,"max_position_embeddings":40960,
       "rms_norm_eps":1e-6,"rope_theta":1000000.0,"hidden_act":"silu",
       "attention_bias":false,"use_sliding_window":false,"sliding_window":null,
       "max_window_layers":48,"decoder_sparse_step":1,"moe_intermediate_size":768,
       "num_experts":128,"num_experts_per_tok":8,"norm_topk_prob":true,"mlp_only_layers":[],
       "tie_word_embeddings":false,"bos_token_id":151643,"eos_token_id":151645})";
  return f;
}

TS_ZOO_DECODER_FAMILY(Qwen3Moe);

}  // namespace ts::zoo::internal::decoder
