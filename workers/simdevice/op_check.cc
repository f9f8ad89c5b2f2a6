#include "workers/simdevice/internal/op_check.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

#include "workers/simdevice/internal/device_state.h"
#include "workers/simdevice/internal/runtime_ops.h"

namespace ts::simdevice::internal {
namespace {

struct CheckerSlot {
  std::mutex mu;
  std::shared_ptr<OpChecker> checker;  // guarded by mu
  std::atomic<bool> active{false};
};

CheckerSlot& Slot() {
  static auto* slot = new CheckerSlot();  // never destroyed: kernels may run at exit
  return *slot;
}

std::shared_ptr<OpChecker> Current() {
  CheckerSlot& slot = Slot();
  if (!slot.active.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(slot.mu);
  return slot.checker;
}

// A CPU view of a device tensor; CPU tensors as they are.
at::Tensor HostView(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kDeviceType) return t;
  return AsCpuAlias(t);
}

at::Tensor HostCopy(const at::Tensor& t) {
  return t.defined() ? HostView(t).clone() : t;
}

c10::IValue CopyArgument(const c10::IValue& v) {
  if (v.isTensor()) return HostCopy(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(HostCopy(t));
    return out;
  }
  if (v.isDevice() && v.toDevice().type() == kDeviceType) return c10::Device(c10::kCPU);
  return v;
}

}  // namespace

std::optional<DeviceOpCall> BeginOpCheck(const c10::OperatorHandle& op, const std::string& name,
                                         ExecMode mode, const torch::jit::Stack& stack,
                                         size_t num_args) {
  if (!Slot().active.load(std::memory_order_acquire)) return std::nullopt;
  DeviceOpCall call;
  call.op = &op;
  call.name = name;
  call.mode = mode;
  for (size_t i = stack.size() - num_args; i < stack.size(); ++i) {
    call.inputs.push_back(CopyArgument(stack[i]));
  }
  return call;
}

void FinishOpCheck(DeviceOpCall& call, const torch::jit::Stack& stack, size_t num_rets) {
  for (size_t i = stack.size() - num_rets; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      call.results.push_back(HostView(v.toTensor()));
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) call.results.push_back(HostView(t));
    } else {
      call.results.emplace_back();
    }
  }
  if (auto checker = Current()) (*checker)(call);
}

}  // namespace ts::simdevice::internal

namespace ts::simdevice {

ScopedOpChecker::ScopedOpChecker(OpChecker checker) {
  auto& slot = internal::Slot();
  std::lock_guard<std::mutex> lock(slot.mu);
  slot.checker = std::make_shared<OpChecker>(std::move(checker));
  slot.active.store(true, std::memory_order_release);
}

ScopedOpChecker::~ScopedOpChecker() {
  auto& slot = internal::Slot();
  std::lock_guard<std::mutex> lock(slot.mu);
  slot.active.store(false, std::memory_order_release);
  slot.checker.reset();
}

}  // namespace ts::simdevice
