// `touchstone sweep`: the one-command distributed sweep. Parses the flags, starts a
// services/cluster LocalCluster (a private PostgreSQL under the state folder unless --db, the
// scheduler and W workers as child processes of this one), loads the sampled catalog rows and
// creates the sweep through a SweepDriver, which shows progress; prints the per-task table (the
// shape run-catalog prints) and stops everything it started (after serving, with --serve).
// Ctrl-C (SIGINT/SIGTERM) cancels the sweep and stops the services in order.
#pragma once

#include <string>
#include <vector>

namespace ts::cli {

// Returns the process exit code: 0 done, 2 usage or bad input, 1 infrastructure failure.
// data_dir: ../shared/data (the catalog is generated from it when no --catalog is given).
int SweepCommand(const std::vector<std::string>& args, const std::string& data_dir);

}  // namespace ts::cli
