// `touchstone refs` against a fleet's scheduler (--scheduler HOST:PORT): refs.cc's commands over
// the scheduler's reference-bundle RPCs.
#pragma once

#include <cstdint>
#include <string>

#include "cli/client.h"

namespace ts::cli {

// `sub` is stats, prune, import (DIR) or export (--sweep ID, DIR). Returns the exit code: 0
// done, 1 a bundle refused or missing, 2 usage or a refused call, 3 no answer (client.h).
int RefsFleetCommand(ClientFlags client, const std::string& sub, const std::string& dir,
                     int64_t sweep);

}  // namespace ts::cli
