// The counted CPU fallback: how an op without a native kernel on the active profile reaches the
// device. In eager it runs through at::native::cpu_fallback (operands copied to real CPU
// tensors and back) and is counted under `fallback` (calls, wall ms) per op, torch_xla style.
// Inside a compiled segment the device compiler lowers every op, so ops with no kernel are
// computed the same way but counted under `compiled` and subject to defects. PRIVATE to
// workers/simdevice.
//
// Thread-safety: any thread; the execution mode is process-global (see runtime.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "workers/simdevice/internal/op_info.h"

namespace ts::simdevice::internal {

// Runs `op` on the CPU and counts it as a fallback (never subject to defects).
void CountedFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& info);

// Boxed PrivateUse1 catch-all for every op without a registered kernel.
void FallbackEntry(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace ts::simdevice::internal
