// data2vec-text: RoBERTa under the data2vec_text. prefix (facebook/data2vec-text-base).
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

EncoderFamily Data2VecText() {
  return RobertaLineage("data2vec-text", "Data2VecText", "data2vec_text.",
                        RobertaExample("data2vec-text", 50265, 0, 2));
}

TS_ZOO_ENCODER_FAMILY(Data2VecText);

}  // namespace ts::zoo::internal::encoder
