// Child processes for the services and the sweep command: spawn with output to a log file,
// signal, wait with a deadline; and a blocking run-with-capture for short tools (initdb,
// pg_ctl).
//
// Thread-safety: functions are safe to call from any thread; a Child is owned by one thread.
// Errors: spawn failures are INTERNAL with errno's text; a deadline is DEADLINE_EXCEEDED.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ts::common {

struct SpawnOptions {
  std::string log_path;            // stdout and stderr appended here; empty: inherit
  std::vector<std::string> env;    // extra "NAME=value" entries
  bool new_process_group = false;  // the child leads its own group (kill the group with it)
};

// argv[0] is a path (not searched in PATH). Returns the child's pid.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const SpawnOptions& opts = {});

struct ExitInfo {
  bool exited = false;  // false: still running (after a zero-timeout poll)
  int code = 0;         // exit code when it exited normally
  int signal = 0;       // terminating signal, else 0
};
// Waits up to timeout_s (0: poll once). Reaps the child when it has ended.
ExitInfo WaitFor(pid_t pid, double timeout_s);

// SIGTERM, then SIGKILL after grace_s; reaps. Returns how it ended.
ExitInfo Stop(pid_t pid, double grace_s);

struct CommandResult {
  int code = -1;
  int signal = 0;
  std::string output;  // stdout and stderr together
};
// Runs argv to completion (stdin /dev/null), capturing output; kills it at timeout_s. With
// uid >= 0 the child drops to that uid/gid first (root running PostgreSQL's tools).
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, double timeout_s,
                                         int uid = -1, int gid = -1);

// Path of the running executable's directory (/proc/self/exe), for finding sibling binaries.
std::string SelfDir();

}  // namespace ts::common
