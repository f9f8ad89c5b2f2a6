// The DINOv2 lineage (dinov2.cc; dinov2_with_registers.cc derives from it): config parsing into
// the trunk's recipe (trunks/vision_dinov2.h), tiny scaling and the classes. Private to the zoo.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/trunks/vision_dinov2.h"

namespace ts::zoo::internal {

// A family of the lineage: its model_type, class prefix ("Dinov2"), the classifier's base
// prefix ("dinov2.") and whether its config has num_register_tokens.
struct Dinov2Family {
  std::string model_type, prefix, base;
  bool registers = false;
};

// The Model (image-feature-extraction), ForImageClassification and Backbone (backbone) classes
// over `example` (a checkpoint's config).
std::vector<ArchEntry> Dinov2Archs(const Dinov2Family& family, const nlohmann::json& example);

}  // namespace ts::zoo::internal
