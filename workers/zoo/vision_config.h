// Config readers the vision families share (families/{resnet,convnext,mobilenet_v2,
// efficientnet,swin}.cc): integer lists, positive sizes, hidden_act with relu6. Errors name the
// field, as config.h's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

// `field` as a list of integers; `def` when absent or null.
StatusOr<std::vector<int64_t>> IntList(const nlohmann::json& config, const std::string& field,
                                       std::vector<int64_t> def);
// "<field>: expected <n> entries, got <size>" unless v has n entries.
Status CheckLen(const std::string& field, const std::vector<int64_t>& v, size_t n);
// "<field>: must be positive, got <x>" for the first entry <= 0.
Status CheckAllPositive(const std::string& field, const std::vector<int64_t>& v);
// An integer field that must be positive; `def` when absent.
StatusOr<int64_t> PositiveInt(const ConfigReader& r, const std::string& field, int64_t def);
// hidden_act: relu6 (MobileNetV2) or one of ParseActivation's names.
StatusOr<VisionActivation> ReadVisionActivation(const ConfigReader& r, const std::string& field,
                                                const std::string& def);

}  // namespace ts::zoo::internal
