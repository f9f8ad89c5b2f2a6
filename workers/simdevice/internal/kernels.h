// The device kernels: how a native op (and every op inside a compiled segment) computes on the
// simulated device, with the active profile's declared numerics and seeded defects. PRIVATE to
// workers/simdevice.
//
// How a kernel computes: device memory is host memory, so the kernel views its device operands
// as CPU tensors without copying, rounds matmul operands to bf16 where the numerics say so, runs
// ATen's CPU kernel of the same operator below autograd, writes fresh results into device
// allocations (counted against memory_bytes; results that alias an operand map back to it),
// rounds eager float results where the numerics say so, applies any matching defect to the
// primary result, and counts the call under `native` (eager) or `compiled`.
//
// Thread-safety: any thread; the execution mode is process-global (see runtime.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace ts::simdevice::internal {

// Boxed PrivateUse1 kernel registered for every op of KernelSet(): runs the op on the device if
// the profile lists it as native or a compiled segment is running, else the counted fallback.
void KernelEntry(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace ts::simdevice::internal
