#include "workers/simdevice/internal/kernels.h"

#include <ATen/ops/as_strided_native.h>

#include <vector>

#include "workers/simdevice/internal/allocator.h"
#include "workers/simdevice/internal/defect_effects.h"
#include "workers/simdevice/internal/device_state.h"
#include "workers/simdevice/internal/fallback.h"
#include "workers/simdevice/internal/op_check.h"
#include "workers/simdevice/internal/op_info.h"
#include "workers/simdevice/internal/perf_clock.h"
#include "workers/simdevice/internal/runtime_ops.h"

namespace ts::simdevice::internal {
namespace {

at::Tensor RoundBf16(const at::Tensor& t) {
  if (!t.defined() || t.scalar_type() != at::kFloat) return t;
  return t.to(at::kBFloat16).to(at::kFloat);
}

struct DeviceArg {
  size_t stack_pos;
  at::Tensor device_tensor;
};

bool IsDeviceTensor(const at::Tensor& t) {
  return t.defined() && t.device().type() == kDeviceType;
}

// Checks the dtype of device tensor `t`, remembers it in `args` and returns its CPU alias.
at::Tensor HostOperand(const at::Tensor& t, size_t stack_pos, std::vector<DeviceArg>* args) {
  CheckDtype(t.scalar_type());
  args->push_back({stack_pos, t});
  return AsCpuAlias(t);
}

// Replaces the device operands in the top `num_args` stack slots (tensors, tensor lists and the
// device itself) by their CPU counterparts; returns the device tensors replaced.
std::vector<DeviceArg> OperandsToHost(torch::jit::Stack* stack, size_t num_args) {
  const size_t first = stack->size() - num_args;
  std::vector<DeviceArg> device_args;
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (IsDeviceTensor(t)) v = HostOperand(t, first + i, &device_args);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) {
        at::Tensor t = list.get(j);
        if (IsDeviceTensor(t)) list.set(j, HostOperand(t, first + i, &device_args));
      }
    } else if (v.isDevice() && v.toDevice().type() == kDeviceType) {
      v = c10::IValue(c10::Device(c10::kCPU));
    }
  }
  return device_args;
}

bool IsMatmul(const OpInfo& info) {
  return info.kernel != nullptr && info.kernel->cls == OpClass::kMatmul;
}

// Declared numerics of matmul-class ops: operands rounded to bf16 (accumulation stays fp32).
void RoundMatmulOperands(const OpInfo& info, torch::jit::Stack* stack, size_t num_args) {
  if (!IsMatmul(info) || info.numerics.matmul == MatmulNumerics::kFp32) return;
  const size_t first = stack->size() - num_args;
  for (size_t idx : info.rounded_arg_idx) {
    c10::IValue& v = (*stack)[first + idx];
    if (v.isTensor()) v = RoundBf16(v.toTensor());
  }
}

// Whether fresh float results are rounded to bf16: per op in eager, fused away when compiled.
bool RoundsResults(const OpInfo& info, ExecMode mode) {
  if (mode != ExecMode::kEager) return false;
  if (IsMatmul(info)) return info.numerics.matmul == MatmulNumerics::kBf16;
  if (info.kernel && info.kernel->cls == OpClass::kReduction) {
    return info.numerics.reductions == Precision::kBf16;
  }
  return info.numerics.elementwise == Precision::kBf16;
}

// If `cpu` is a view into the host memory of one of the device operands, returns the same view
// of the device tensor; otherwise an undefined tensor.
at::Tensor DeviceViewOf(const at::Tensor& cpu, const std::vector<DeviceArg>& args) {
  if (cpu.numel() == 0) return at::Tensor();
  const char* p = static_cast<const char*>(cpu.data_ptr());
  for (const auto& a : args) {
    const auto& st = a.device_tensor.storage();
    const char* base = static_cast<const char*>(st.data());
    if (base == nullptr || p < base || p >= base + st.nbytes()) continue;
    const int64_t elem = static_cast<int64_t>(cpu.element_size());
    const int64_t offset = (p - base) / elem;
    return at::native::as_strided_tensorimpl(a.device_tensor, cpu.sizes(), cpu.strides(), offset);
  }
  return at::Tensor();
}

// Moves a CPU result onto the device, counted against capacity. A result nothing else can see
// (its tensor and its storage each held once: by the stack) whose storage owns its memory (an
// allocation, not a blob over someone else's) becomes device memory as it is; any other is
// copied into a fresh allocation.
at::Tensor ToDevice(const at::Tensor& cpu, bool sole_owner) {
  const c10::Storage& host = cpu.storage();
  if (sole_owner && cpu.numel() > 0 && host.use_count() == 1 && host.data() != nullptr &&
      host.data_ptr().get_context() != nullptr && host.device_type() == c10::kCPU) {
    CheckDtype(cpu.scalar_type());
    const size_t nbytes = host.nbytes();
    c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, AdoptHostMemory(host),
                         DeviceAllocator(), /*resizable=*/true);
    at::Tensor dev = at::detail::make_tensor<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), cpu.dtype());
    dev.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(),
                                                     cpu.storage_offset());
    return dev;
  }
  at::Tensor dev = EmptyDevice(cpu.sizes(), cpu.strides(), cpu.scalar_type());
  if (cpu.numel() > 0) AsCpuAlias(dev).copy_(cpu);
  return dev;
}

// Results back to the device in the top `num_rets` stack slots: aliases of operands map back to
// the operand (in-place and out= ops, views), fresh results are copied into device allocations.
// Returns the CPU alias of the primary (first) result, undefined if it is not a tensor.
at::Tensor ResultsToDevice(torch::jit::Stack* stack, size_t num_rets,
                           const std::vector<DeviceArg>& device_args, bool round_out) {
  const size_t rfirst = stack->size() - num_rets;
  at::Tensor primary_cpu;
  for (size_t i = 0; i < num_rets; ++i) {
    c10::IValue& v = (*stack)[rfirst + i];
    if (!v.isTensor()) continue;
    if (!v.toTensor().defined()) continue;
    at::Tensor dev = DeviceViewOf(v.toTensor(), device_args);
    if (!dev.defined()) {
      at::Tensor out = std::move(v).toTensor();  // the stack's reference, now the only one
      if (round_out && out.scalar_type() == at::kFloat) out = RoundBf16(out);
      dev = ToDevice(out, /*sole_owner=*/out.use_count() == 1);
    }
    if (i == 0) primary_cpu = AsCpuAlias(dev);
    v = dev;
  }
  return primary_cpu;
}

void DeviceExecute(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& info,
                   ExecMode mode) {
  const auto t0 = Clock::now();
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const bool timed = ClockEnabled();
  OpShapes shapes;
  if (timed) ShapesBefore(info.cost, *stack, num_args, &shapes);
  const std::vector<DeviceArg> device_args = OperandsToHost(stack, num_args);
  auto check = BeginOpCheck(op, info.name, mode, *stack, num_args);
  RoundMatmulOperands(info, stack, num_args);
  op.callBoxed(stack);  // below autograd: we are called from the autograd kernel's redispatch
  const size_t num_rets = schema.returns().size();
  const at::Tensor primary_cpu =
      ResultsToDevice(stack, num_rets, device_args, RoundsResults(info, mode));
  ApplyDefects(info, primary_cpu, mode);
  if (check) FinishOpCheck(*check, *stack, num_rets);
  OpCharge charge;
  if (timed) {
    ShapesAfter(info.cost, *stack, num_rets, &shapes);
    charge = DeviceOpCharge(info, shapes, mode, PerfDefectsOf(info, primary_cpu, mode));
  }
  RecordCall(mode == ExecMode::kCompiled ? &Counters::compiled : &Counters::native, info.name,
             MsSince(t0), timed ? &charge : nullptr);
}

}  // namespace

void KernelEntry(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpInfo& info = LookupOp(op);
  const ExecMode mode = CurrentExecMode();
  if (info.native || mode == ExecMode::kCompiled) return DeviceExecute(op, stack, info, mode);
  CountedFallback(op, stack, info);
}

}  // namespace ts::simdevice::internal
