// Runs one model in a forked child process so that a model that crashes (abort, segfault) or
// hangs costs one verdict, never the caller (DESIGN.md §6, "Worker").
//
// The child reports the stage it is in over a pipe; when it dies or overruns its timeout, the
// mode it was running becomes `crash` (with the signal) or `timeout`, and the remaining modes are
// run again in a fresh child. Modes that had finished before the crash are recomputed by that
// fresh child (crashes are rare; simplicity wins).
//
// Thread-safety: call from a thread of a process that has not started torch thread pools (fork
// safety); the child does all torch work. One call at a time.
#pragma once

#include <functional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "touchstone/v1/result.pb.h"
#include "workers/base/status.h"
#include "workers/engine/engine.h"

namespace ts::runner {

struct IsolateOptions {
  double timeout_s = 120;  // per child run
  // Runs in the child before the model: activates the profile, sets threads. Non-empty return
  // is an error that ends the child with that message.
  std::function<std::string()> child_setup;
};

// The model's result record (workers/runner/protocol.h): every mode, the requested ones with
// their verdicts and crash/timeout merged in, the others `skipped`. A child_setup error is
// `load_fail` ("runner: TEXT") for every requested mode. UNAVAILABLE when no child can be
// forked.
StatusOr<::touchstone::v1::ModelResult> RunModelIsolated(const nlohmann::json& config,
                                                         const engine::RunOptions& opts,
                                                         const IsolateOptions& iso);

}  // namespace ts::runner
