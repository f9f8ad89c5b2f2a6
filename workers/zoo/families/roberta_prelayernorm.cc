// roberta-prelayernorm: pre-LN RoBERTa (attention.LayerNorm, intermediate.LayerNorm, a final
// model-level LayerNorm); andreasmadsen/efficient_mlm_m0.40 (roberta-base shapes).
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

EncoderFamily RobertaPreLayerNorm() {
  EncoderFamily f =
      RobertaLineage("roberta-prelayernorm", "RobertaPreLayerNorm", "roberta_prelayernorm.",
                     RobertaExample("roberta-prelayernorm", 50265, 0, 2));
  f.structure.pre_attn_norm = "attention.LayerNorm";
  f.structure.pre_mlp_norm = "intermediate.LayerNorm";
  f.structure.final_norm = "LayerNorm";
  return f;
}

TS_ZOO_ENCODER_FAMILY(RobertaPreLayerNorm);

}  // namespace ts::zoo::internal::encoder
