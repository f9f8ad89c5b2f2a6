// The list of encoder families (README.md "Encoder trunk").
#include "workers/zoo/families/encoder_families.h"

namespace ts::zoo::internal::encoder {

const std::vector<EncoderFamily>& EncoderFamilies() {
  static const std::vector<EncoderFamily> kFamilies = {
      Bert(),         Roberta(),      XlmRoberta(),
      Camembert(),    Data2VecText(), RobertaPreLayerNorm(),
      XlmRobertaXl(), DistilBert(),   Albert(),
      Electra(),      DebertaV2(),    Ernie(),
      MegatronBert(), BigBird(),      BertGeneration(),
      RemBert(),
      RoFormer(),
      Mpnet(),        Deberta(),
      Fnet(),         LayoutLm(),     Xlm(),
      Flaubert(),     Dpr(),
  };
  return kFamilies;
}

}  // namespace ts::zoo::internal::encoder
