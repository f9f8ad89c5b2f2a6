// The worker's side of the runner child (workers/runner/child_main.cc): one persistent
// `touchstone-runner` process fed jobs over its stdin, answering on its stdout.
//
// A model that kills the child (abort, segfault) or overruns its time becomes a verdict
// (workers/runner/protocol.h, RunAcrossCrashes): `crash` (with the signal) or `timeout` for the
// mode that was running — for every remaining mode when it died while building or computing
// references — then the child is respawned and runs the remaining modes again. A child is also
// respawned when the profile changes.
//
// Thread-safety: one owner thread. No torch: this side reads the protocol only.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "touchstone/v1/result.pb.h"
#include "workers/runner/protocol.h"

namespace ts::worker {

struct RunnerOptions {
  std::string runner_path;  // the touchstone-runner binary
  std::string log_path;     // the child's stderr (appended)
};

struct JobSpec {
  int64_t job_id = 0;
  std::string model_id;  // seeds the model's own weights in the child
  nlohmann::json config;
  std::string arch;
  std::set<std::string> modes;
  uint64_t seed = 0;
  double timeout_s = 300;
  bool audit_ops = false;
  std::string weights_dir;  // the child runs weights_dir/<model_id> when it holds a checkpoint  // replay passing modes op by op too (the sweep's audit_ops)
  std::string references_dir;     // reference bundles (child_main.cc); empty: none
  bool fresh_references = false;  // compute them again instead of reading a stored one
};

class RunnerClient {
 public:
  explicit RunnerClient(RunnerOptions opts) : opts_(std::move(opts)) {}
  ~RunnerClient();

  // The model's result record with exactly job.modes, crash/timeout verdicts merged in; the
  // caller adds the job's identity (job_id, model_id, run).
  // Errors: UNAVAILABLE when the child cannot be started at all (binary missing, bad profile).
  absl::StatusOr<::touchstone::v1::ModelResult> RunJob(const std::string& profile_path,
                                                       const JobSpec& job);

  int restarts() const { return restarts_; }
  pid_t pid() const { return pid_; }
  void Kill();

 private:
  absl::Status Ensure(const std::string& profile_path);
  runner::ChildOutcome RunOnce(const JobSpec& job, const std::set<std::string>& modes);
  // The next message from the child; nullopt when it is gone or the deadline passed.
  std::optional<runner::Message> Read(double deadline_s, bool* timed_out);
  void Reap(runner::ChildOutcome* o);

  RunnerOptions opts_;
  std::atomic<pid_t> pid_{-1};
  int to_child_ = -1, from_child_ = -1;
  runner::ProtocolReader reader_;
  std::string profile_;
  int restarts_ = 0;
};

}  // namespace ts::worker
