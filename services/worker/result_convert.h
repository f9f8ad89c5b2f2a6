// Engine result JSON (workers/engine verdict.h ToJson, as the runner child sends it) to the
// scheduler's ModelResult message. Only the sweep's modes are sent; non-finite numbers (JSON
// null) become NaN.
//
// Thread-safety: pure function.
#pragma once

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "touchstone/v1/scheduler.pb.h"

namespace ts::worker {

::touchstone::v1::ModelResult ToModelResult(const ::touchstone::v1::Job& job,
                                            const std::set<std::string>& modes,
                                            const nlohmann::json& result);

}  // namespace ts::worker
