// `touchstone refs` against a fleet's scheduler (--scheduler HOST:PORT): refs.h's commands over
// the scheduler's reference-bundle RPCs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ts::cli {

// `args` still hold the client flags (--scheduler, --token-file, --tls-ca); `sub` is stats,
// prune, import (DIR) or export (--sweep ID, DIR). Returns the exit code as RefsCommand.
int RefsFleetCommand(std::vector<std::string> args, const std::string& sub,
                     const std::string& dir, int64_t sweep);

}  // namespace ts::cli
