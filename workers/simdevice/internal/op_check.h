// Calls the installed op checker (runtime.h, ScopedOpChecker) around a device op: snapshot of
// the arguments before it runs, CPU views of its results after. PRIVATE to workers/simdevice.
//
// Thread-safety: any thread; the checker is process-global.
#pragma once

#include <optional>
#include <string>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "workers/simdevice/runtime.h"

namespace ts::simdevice::internal {

// When a checker is installed: the call with its `inputs` copied from the top `num_args` slots
// of `stack` (device tensors copied to the CPU). std::nullopt when none is installed.
std::optional<DeviceOpCall> BeginOpCheck(const c10::OperatorHandle& op, const std::string& name,
                                         ExecMode mode, const torch::jit::Stack& stack,
                                         size_t num_args);

// Fills call.results from the top `num_rets` slots of `stack` and runs the checker.
void FinishOpCheck(DeviceOpCall& call, const torch::jit::Stack& stack, size_t num_rets);

}  // namespace ts::simdevice::internal
