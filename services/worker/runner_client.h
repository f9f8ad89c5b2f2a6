// The worker's side of the runner child (workers/runner/child_main.cc): one persistent
// `touchstone-runner` process fed jobs over its stdin, answering on its stdout.
//
// A model that kills the child (abort, segfault) or overruns its time becomes a verdict:
// RunJob records `crash` (with the signal) or `timeout` for the mode that was running — for
// every remaining mode when it died while building or computing references — respawns the
// child, and runs the remaining modes again. A child is also respawned when the profile
// changes.
//
// Thread-safety: one owner thread. No torch: this side only reads JSON.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace ts::worker {

struct RunnerOptions {
  std::string runner_path;  // the touchstone-runner binary
  std::string log_path;     // the child's stderr (appended)
};

struct JobSpec {
  int64_t job_id = 0;
  nlohmann::json config;
  std::string arch;
  std::set<std::string> modes;
  uint64_t seed = 0;
  double timeout_s = 300;
};

class RunnerClient {
 public:
  explicit RunnerClient(RunnerOptions opts) : opts_(std::move(opts)) {}
  ~RunnerClient();

  // The engine result JSON (engine::ToJson shape) with crash/timeout verdicts merged in.
  // Errors: UNAVAILABLE when the child cannot be started at all (binary missing, bad profile).
  absl::StatusOr<nlohmann::json> RunJob(const std::string& profile_path, const JobSpec& job);

  int restarts() const { return restarts_; }
  pid_t pid() const { return pid_; }
  void Kill();

 private:
  struct Outcome {
    bool finished = false;
    nlohmann::json result, model;
    std::string last_stage, error;
    int signal = 0, exit_code = 0;
    bool timed_out = false;
  };
  absl::Status Ensure(const std::string& profile_path);
  Outcome RunOnce(const JobSpec& job, const std::set<std::string>& modes);
  bool ReadLine(std::string* line, double deadline_s, bool* timed_out);
  void Reap(Outcome* o);

  RunnerOptions opts_;
  std::atomic<pid_t> pid_{-1};
  int to_child_ = -1, from_child_ = -1;
  std::string buf_;
  std::string profile_;
  int restarts_ = 0;
};

}  // namespace ts::worker
