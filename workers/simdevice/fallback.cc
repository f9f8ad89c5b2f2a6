#include "workers/simdevice/internal/fallback.h"

#include <ATen/native/CPUFallback.h>

#include "workers/simdevice/internal/defect_effects.h"
#include "workers/simdevice/internal/device_state.h"
#include "workers/simdevice/internal/op_check.h"
#include "workers/simdevice/internal/perf_clock.h"
#include "workers/simdevice/internal/runtime_ops.h"

namespace ts::simdevice::internal {
namespace {

// libtorch 1.13's CPU mse_loss.out, reached here through mse_loss's composite kernel, resizes
// the 0-dim `out` it is given to the input's shape on the way to the reduced loss, and warns on
// every call that resizing a non-empty output is deprecated ("... was resized since it had shape
// [] ..."). The loss is right, and a real backend falling back to the same kernel sees the same
// warning: it is noise, one stderr line per call, and it flooded sweep logs. This handler drops
// that one warning (a 0-dim out resized) while the fallback runs and passes every other warning
// to the handler it replaced.
class ZeroDimOutResizeFilter final : public c10::WarningHandler {
 public:
  explicit ZeroDimOutResizeFilter(c10::WarningHandler* next) : next_(next) {}
  void process(const c10::SourceLocation& where, const std::string& msg, bool verbatim) override {
    if (msg.rfind(kZeroDimResized, 0) == 0) return;
    next_->process(where, msg, verbatim);
  }

 private:
  static constexpr const char* kZeroDimResized =
      "An output with one or more elements was resized since it had shape [],";
  c10::WarningHandler* next_;
};

// at::native::cpu_fallback with ZeroDimOutResizeFilter installed (c10's handler is global;
// RunModel runs one model at a time and the autograd device thread waits while this runs).
void FilteredCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  ZeroDimOutResizeFilter filter(c10::Warning::get_warning_handler());
  c10::Warning::WarningHandlerGuard guard(&filter);
  at::native::cpu_fallback(op, stack);
}

// Computed like the fallback (which handles out= resizing and aliasing in general) but this is
// device execution: counted as compiled, and subject to defects.
void CompiledLowering(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                      const OpInfo& info) {
  const auto t0 = Clock::now();
  const size_t num_args = op.schema().arguments().size();
  auto check = BeginOpCheck(op, info.name, ExecMode::kCompiled, *stack, num_args);
  const bool timed = ClockEnabled();
  OpShapes shapes;
  if (timed) ShapesBefore(info.cost, *stack, num_args, &shapes);
  {
    // The lowering computes through the host, but it is device work: its copies are not
    // transfers (collected here and dropped), and the op is charged as compiled compute below.
    FallbackTransfers not_transfers;
    FilteredCpuFallback(op, stack);
  }
  const size_t num_rets = op.schema().returns().size();
  at::Tensor primary_cpu;
  if (num_rets > 0) {
    const c10::IValue& v = (*stack)[stack->size() - num_rets];
    if (v.isTensor()) primary_cpu = AsCpuAlias(v.toTensor());
  }
  ApplyDefects(info, primary_cpu, ExecMode::kCompiled);
  if (check) FinishOpCheck(*check, *stack, num_rets);
  OpCharge charge;
  if (timed) {
    ShapesAfter(info.cost, *stack, num_rets, &shapes);
    charge = DeviceOpCharge(info, shapes, ExecMode::kCompiled,
                            PerfDefectsOf(info, primary_cpu, ExecMode::kCompiled));
  }
  RecordCall(&Counters::compiled, info.name, MsSince(t0), timed ? &charge : nullptr);
}

}  // namespace

void CountedFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& info) {
  const auto t0 = Clock::now();
  const size_t num_args = op.schema().arguments().size();
  const bool timed = ClockEnabled();
  OpShapes shapes;
  if (timed) ShapesBefore(info.cost, *stack, num_args, &shapes);
  FallbackTransfers transfers;  // the operands' and results' copies are this op's
  // Operands of an unsupported dtype cannot exist on the device (allocation refuses them), but a
  // fallback result could be one: at::native::cpu_fallback allocates it via our empty kernels,
  // which raise the device's unsupported-dtype error.
  FilteredCpuFallback(op, stack);
  OpCharge charge;
  if (timed) {
    ShapesAfter(info.cost, *stack, op.schema().returns().size(), &shapes);
    charge = FallbackCharge(info, shapes, transfers.us, transfers.bytes);
  }
  RecordCall(&Counters::fallback, info.name, MsSince(t0), timed ? &charge : nullptr);
}

void FallbackEntry(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpInfo& info = LookupOp(op);
  if (CurrentExecMode() == ExecMode::kCompiled) return CompiledLowering(op, stack, info);
  CountedFallback(op, stack, info);
}

}  // namespace ts::simdevice::internal
