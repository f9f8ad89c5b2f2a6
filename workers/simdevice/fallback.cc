#include "workers/simdevice/internal/fallback.h"

#include <ATen/native/CPUFallback.h>

#include "workers/simdevice/internal/defect_effects.h"
#include "workers/simdevice/internal/device_state.h"
#include "workers/simdevice/internal/op_check.h"
#include "workers/simdevice/internal/runtime_ops.h"

namespace ts::simdevice::internal {
namespace {

// Computed like the fallback (which handles out= resizing and aliasing in general) but this is
// device execution: counted as compiled, and subject to defects.
void CompiledLowering(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                      const OpInfo& info) {
  const auto t0 = Clock::now();
  auto check =
      BeginOpCheck(op, info.name, ExecMode::kCompiled, *stack, op.schema().arguments().size());
  at::native::cpu_fallback(op, stack);
  const size_t num_rets = op.schema().returns().size();
  if (num_rets > 0) {
    const c10::IValue& v = (*stack)[stack->size() - num_rets];
    if (v.isTensor()) ApplyDefects(info, AsCpuAlias(v.toTensor()), ExecMode::kCompiled);
  }
  if (check) FinishOpCheck(*check, *stack, num_rets);
  RecordCall(&Counters::compiled, info.name, MsSince(t0));
}

}  // namespace

void CountedFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& info) {
  const auto t0 = Clock::now();
  // Operands of an unsupported dtype cannot exist on the device (allocation refuses them), but a
  // fallback result could be one: at::native::cpu_fallback allocates it via our empty kernels,
  // which raise the device's unsupported-dtype error.
  at::native::cpu_fallback(op, stack);
  RecordCall(&Counters::fallback, info.name, MsSince(t0));
}

void FallbackEntry(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpInfo& info = LookupOp(op);
  if (CurrentExecMode() == ExecMode::kCompiled) return CompiledLowering(op, stack, info);
  CountedFallback(op, stack, info);
}

}  // namespace ts::simdevice::internal
