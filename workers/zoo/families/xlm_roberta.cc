// xlm-roberta: RoBERTa with a 250k vocabulary (xlm-roberta-base).
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

EncoderFamily XlmRoberta() {
  return RobertaLineage("xlm-roberta", "XLMRoberta", "roberta.",
                        RobertaExample("xlm-roberta", 250002, 0, 2));
}

TS_ZOO_ENCODER_FAMILY(XlmRoberta);

}  // namespace ts::zoo::internal::encoder
