// xlm-roberta: RoBERTa with a 250k vocabulary (xlm-roberta-base).
#include "workers/zoo/families/encoder_families.h"

namespace ts::zoo::internal::encoder {

EncoderFamily XlmRoberta() {
  return RobertaLineage("xlm-roberta", "XLMRoberta", "roberta.",
                        RobertaExample("xlm-roberta", 250002, 0, 2));
}

}  // namespace ts::zoo::internal::encoder
