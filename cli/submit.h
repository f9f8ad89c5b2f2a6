// `touchstone submit` and `touchstone schedule`: the CI and operator side of a long-running
// fleet (issue 13). submit creates a sweep on a running scheduler (admin token), optionally
// follows it with the progress line, prints the per-task table and, with --gate, exits by the
// gate's verdict. schedule add|list|rm|enable|disable manages the scheduler's cron schedules.
//
// Exit codes: 0 done (gate: pass); 1 gate failed, or the sweep ended other than done; 2 usage or
// a request the scheduler refused; 3 no answer (scheduler unreachable).
//
// Thread-safety: one command per process; Ctrl-C during --wait stops following (the sweep keeps
// running on the fleet).
#pragma once

#include <string>
#include <vector>

namespace ts::cli {

int SubmitCommand(const std::vector<std::string>& args, const std::string& data_dir);
int ScheduleCommand(const std::vector<std::string>& args);

}  // namespace ts::cli
