// camembert: RoBERTa (camembert-base).
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

EncoderFamily Camembert() {
  return RobertaLineage("camembert", "Camembert", "roberta.",
                        RobertaExample("camembert", 32005, 5, 6));
}

TS_ZOO_ENCODER_FAMILY(Camembert);

}  // namespace ts::zoo::internal::encoder
