// The protocol between a runner child and its parent, and what a parent makes of a child that
// died. Torch-free: used by `touchstone run-model`'s isolation (isolate.cc) and by
// touchstone-worker (services/worker/runner_client.cc) alike.
//
// Child -> parent, per job, in this order:
//   "ready\n"            once, when touchstone-runner has activated its profile
//   "stage NAME\n"       as each engine stage starts: build, reference, eager, compile, train
//   "model JSON\n"       once built: {"arch", "task", "family", "config_hash"}
//   "result N\n" + N bytes    the serialized touchstone.v1.ModelResult (the record itself)
//   "error TEXT\n"       the child cannot run the job (setup failed, unreadable job line)
//
// A child that dies or overruns its time costs the mode it was running (`crash` with the
// signal, or `timeout`); one that dies while building or computing references costs every
// mode it still had. RunAcrossCrashes runs the remaining modes in a fresh child.
//
// Thread-safety: ProtocolReader is a value type for one owner; the functions are pure.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "touchstone/v1/result.pb.h"
#include "workers/base/status.h"

namespace ts::runner {

namespace pb = ::touchstone::v1;

// ---- Writing (the child's side).
std::string ReadyLine();
std::string StageLine(std::string_view stage);
std::string ModelLine(const nlohmann::json& model);
std::string ResultFrame(const pb::ModelResult& result);
std::string ErrorLine(std::string_view text);

// ---- Reading (the parent's side).
struct Message {
  enum class Kind { kReady, kStage, kModel, kResult, kError, kUnknown };
  Kind kind = Kind::kUnknown;
  std::string text;       // stage name, error text, or the unknown line
  nlohmann::json model;   // kModel
  pb::ModelResult result; // kResult
};

// Splits a child's output into messages; bytes may arrive in any pieces.
class ProtocolReader {
 public:
  void Feed(const char* data, size_t n) { buf_.append(data, n); }
  // The next complete message, or nullopt until more bytes arrive. A result frame that does not
  // parse is a kError message ("result: unreadable record").
  std::optional<Message> Next();

 private:
  std::string buf_;
};

// What one child run ended with.
struct ChildOutcome {
  bool finished = false;  // a result arrived
  pb::ModelResult result;
  std::string last_stage;  // the stage it was in
  nlohmann::json model;    // as reported once built
  int signal = 0;          // killed by this signal
  int exit_code = 0;
  bool timed_out = false;  // killed by the parent at its deadline
  std::string error;       // the child's "error" line
  std::string start_error; // the child could not be started at all (binary, pipe, fork)
};

// Records `m` in `o`. True when the run is over: a result or an error arrived.
bool Apply(Message m, ChildOutcome* o);

// Identity of the model for a record no child finished.
struct ModelIdentity {
  std::string arch, task, family, config_hash;
};

// Runs `run_child(modes still to run)` until a child finishes or every mode is lost, at most 4
// children. The record holds exactly `modes` (in Mode order), with crash / timeout verdicts for
// the modes that children lost, `load_fail` ("runner: TEXT") for every mode when a child
// reports an error, and blank measurements (NaN) where nothing was measured. UNAVAILABLE when
// a child could not be started (ChildOutcome::start_error).
using RunChildFn = std::function<ChildOutcome(const std::set<pb::Mode>& modes)>;
StatusOr<pb::ModelResult> RunAcrossCrashes(const std::set<pb::Mode>& modes, double timeout_s,
                                           const ModelIdentity& fallback,
                                           const RunChildFn& run_child);

// A mode's verdict with nothing measured: status skipped, doubles NaN (ms 0).
pb::ModeVerdict BlankVerdict(pb::Mode mode);

// Mode names ("eager", ...) to enums; unknown names are dropped.
std::set<pb::Mode> ModesFromNames(const std::set<std::string>& names);
std::set<std::string> ModeNames(const std::set<pb::Mode>& modes);

}  // namespace ts::runner
