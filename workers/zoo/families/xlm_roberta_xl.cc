// xlm-roberta-xl: pre-LN RoBERTa without an embedding LayerNorm (self_attn_layer_norm,
// LayerNorm, encoder.LayerNorm); facebook/xlm-roberta-xl.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

EncoderFamily XlmRobertaXl() {
  json example = RobertaExample("xlm-roberta-xl", 250880, 0, 2);
  example["hidden_size"] = 2560;
  example["intermediate_size"] = 10240;
  example["num_attention_heads"] = 32;
  example["num_hidden_layers"] = 36;
  EncoderFamily f = RobertaLineage("xlm-roberta-xl", "XLMRobertaXL", "roberta.", example);
  f.structure.embedding_norm = false;
  f.structure.pre_attn_norm = "attention.self_attn_layer_norm";
  f.structure.pre_mlp_norm = "LayerNorm";
  f.structure.final_norm = "encoder.LayerNorm";
  return f;
}

TS_ZOO_ENCODER_FAMILY(XlmRobertaXl);

}  // namespace ts::zoo::internal::encoder
