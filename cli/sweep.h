// `touchstone sweep` and `touchstone db migrate`: the one-command distributed sweep.
//
// Without --db it starts a private PostgreSQL (services/store EmbeddedPostgres) under the state
// folder, then a scheduler and W workers as child processes of this one, loads the sampled
// catalog rows, creates the sweep, shows progress, prints the per-task table (the shape
// run-catalog prints) and stops everything it started (unless --serve).
#pragma once

#include <string>
#include <vector>

namespace ts::cli {

// Both return the process exit code: 0 done, 2 usage or bad input, 1 infrastructure failure.
// data_dir: ../shared/data (the catalog is generated from it when no --catalog is given).
int SweepCommand(const std::vector<std::string>& args, const std::string& data_dir);
int DbCommand(const std::vector<std::string>& args);

}  // namespace ts::cli
