// camembert: RoBERTa (camembert-base).
#include "workers/zoo/families/encoder_families.h"

namespace ts::zoo::internal::encoder {

EncoderFamily Camembert() {
  return RobertaLineage("camembert", "Camembert", "roberta.",
                        RobertaExample("camembert", 32005, 5, 6));
}

}  // namespace ts::zoo::internal::encoder
