// `touchstone refs stats | prune | import DIR | export --sweep ID DIR`: the reference bundles
// (workers/refs/README.md) of the embedded default (--state-dir DIR: the folder STATE/refs, the
// sweeps in the embedded database) or of a fleet (--scheduler HOST:PORT --token-file F: the
// scheduler's PostgreSQL, through its RPCs).
#pragma once

#include <string>
#include <vector>

namespace ts::cli {

// Returns the process exit code: 0 done, 2 usage (a bad flag or folder), 1 a failure (a bundle
// that could not be read or stored, the database or scheduler unreachable).
int RefsCommand(const std::vector<std::string>& args);

}  // namespace ts::cli
