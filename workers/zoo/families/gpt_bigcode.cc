// gpt_bigcode: the gpt2 layout in Linear weights, multi-query attention (`multi_query`) or
// per-head fused qkv; scores scaled by 1/sqrt(head_dim) unless `scale_attn_weights` is false.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily GptBigCode() {
  DecoderFamily f = Gpt2();
  f.model_type = "gpt_bigcode";
  f.defaults = {.inter_mult = 4, .act = "gelu_pytorch_tanh", .eps = 1e-5, .tie = true};
  f.parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
    TS_ASSIGN_OR_RETURN(bool multi_query, r.Bool("multi_query", true));
    c.kv = multi_query ? 1 : c.heads;
    GptLayers(c);
    c.qkv = multi_query ? Qkv::kFused : Qkv::kPerHeadNarrow;
    // GPTBigCodeAttention: scaling = head_dim ** -0.5 if config.scale_attn_weights else 1.0.
    TS_ASSIGN_OR_RETURN(bool scaled, r.Bool("scale_attn_weights", true));
    if (!scaled) c.attn_scale = 1.0;
    return OkStatus();
  };
  f.scale_extra = [](const json& real, const Recipe&, json& t) {
    t["multi_query"] = real.value("multi_query", true);
  };
  f.classes = {"GPTBigCodeForCausalLM", "GPTBigCodeForSequenceClassification",
               "GPTBigCodeForTokenClassification", "", "GPTBigCodeModel"};
  // bigcode/gpt_bigcode-santacoder
  f.example = R"({"model_type":"gpt_bigcode","n_embd":2048,"n_head":16,"n_inner":8192,"n_layer":24,
           "n_positions":2048,"vocab_size":49280,"activation_function":"gelu_pytorch_tanh",
           "multi_query":true,"layer_norm_epsilon":1e-5,"bos_token_id":49152,
           "eos_token_id":49152})";
  return f;
}

TS_ZOO_DECODER_FAMILY(GptBigCode);

}  // namespace ts::zoo::internal::decoder
