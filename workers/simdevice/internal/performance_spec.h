// Parsing the profile's `performance` section (README.md, "Cost model"). PRIVATE to
// workers/simdevice: profile.cc calls it; everyone else reads ProfileInfo::performance.
#pragma once

#include <nlohmann/json.hpp>

#include "workers/base/status.h"
#include "workers/simdevice/profile.h"

namespace ts::simdevice::internal {

// Parses `performance` (a JSON object) into `out`, which holds the defaults for every field the
// section leaves out. Errors are INVALID_ARGUMENT naming the JSON path
// ("performance.host_link.gbps: must be > 0").
Status ParsePerformance(const nlohmann::json& performance, PerformanceSpec* out);

// The highest peak of any engine at any dtype, in FLOP/s: what MFU is relative to.
double PeakFlops(const PerformanceSpec& spec);

}  // namespace ts::simdevice::internal
