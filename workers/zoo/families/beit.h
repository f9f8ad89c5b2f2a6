// The BEiT lineage (beit.cc; data2vec_vision.cc derives from it, as transformers' modular files
// do): config parsing into the trunk's recipe (trunks/vision_beit.h), tiny scaling and the
// classes. Private to the zoo.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workers/zoo/families_internal.h"

namespace ts::zoo::internal {

// A family of the lineage: its model_type, class prefix ("Beit"), the classifier's base
// prefix ("beit.") and whether transformers has its Backbone class.
struct BeitFamily {
  std::string model_type, prefix, base;
  bool backbone = false;
};

// The Model (image-feature-extraction: last_hidden_state and pooler_output),
// ForImageClassification (`classifier` on the pooler output) and, where the family has it,
// Backbone classes over `example`.
std::vector<ArchEntry> BeitArchs(const BeitFamily& family, const nlohmann::json& example);

}  // namespace ts::zoo::internal
