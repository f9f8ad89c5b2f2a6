// flex_olmo (modular_flex_olmo.py): olmo2's post-norm block (families/olmo2.cc; the OLMo
// attention, q/k RMSNorm over the whole projection) with olmoe's experts (families/olmoe.cc),
// rope_theta 500000, eps 1e-6.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily FlexOlmo() {
  DecoderFamily f = Olmo2();
  f.model_type = "flex_olmo";
  f.defaults.eps = 1e-6;
  f.defaults.theta = 500000.0;
  f.defaults.max_pos = 4096;
  f.parse = [olmo2 = f.parse](const ConfigReader& r, const json& config, Recipe& c) -> Status {
    json rc = config;
    if (!r.Has("rope_theta")) rc["rope_theta"] = 500000.0;  // FlexOlmoConfig.default_theta
    return olmo2(r, rc, c);
  };
  f.parse_layers = OlmoeExperts(7, 5);
  f.scale_extra = ScaleOlmoeExperts;
  f.aliases = {{"num_local_experts", "num_experts"}};
  f.classes = {"FlexOlmoForCausalLM", "", "", "", "FlexOlmoModel"};
  // allenai/FlexOlmo-7x7B-1T
  f.example = R"({"model_type":"flex_olmo","hidden_size":4096,"intermediate_size":11008,
       "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
       "vocab_size":100352,"max_position_embeddings":4096,"rms_norm_eps":1e-6,
       "rope_theta":500000,"hidden_act":"silu","attention_bias":false,"num_experts":7,
       "num_experts_per_tok":5,"norm_topk_prob":false,"tie_word_embeddings":false,
       "pad_token_id":100277,"eos_token_id":100257})";
  return f;
}

TS_ZOO_DECODER_FAMILY(FlexOlmo);

}  // namespace ts::zoo::internal::decoder
