// convnextv2 (modeling_convnextv2.py): ConvNeXt's stages (convnext.cc) with ConvNextV2GRN after
// the activation and no layer scale: ConvNextV2Model, ConvNextV2ForImageClassification,
// ConvNextV2Backbone.
#include "workers/zoo/families/convnext.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

std::vector<ArchEntry> ConvNextV2Archs() {
  json example = ConvNextExample();  // facebook/convnextv2-tiny-1k-224
  example["model_type"] = "convnextv2";
  example.erase("layer_scale_init_value");
  std::vector<ArchEntry> out = PooledVisionArchs(
      {"ConvNextV2", "convnextv2", "convnextv2."}, example,
      [](const json& c) { return ScaleConvNext(c, true); },
      [](const json& c, const std::string& p) { return ConvNextTrunkFor(c, p, true); });
  out.push_back(ConvNextBackboneEntry("ConvNextV2", "convnextv2", example, true));
  return out;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(ConvNextV2, ConvNextV2Archs);

}  // namespace ts::zoo::internal
