#include "workers/simdevice/op_numerics.h"

#include "workers/simdevice/internal/kernel_set.h"

namespace ts::simdevice {

DeclaredOp DeclaredNumericsOf(const Numerics& numerics, const std::string& op, ExecMode mode) {
  DeclaredOp d;
  const internal::KernelDef* k = internal::FindKernel(op);
  if (k == nullptr) return d;
  d.tolerance = k->tolerance;
  using internal::OpClass;
  if (k->cls == OpClass::kMatmul && numerics.matmul != MatmulNumerics::kFp32) {
    d.rounded_args = k->rounded_args;
  }
  if (mode != ExecMode::kEager) return d;  // result rounding is fused away when compiled
  switch (k->cls) {
    case OpClass::kMatmul: d.round_result = numerics.matmul == MatmulNumerics::kBf16; break;
    case OpClass::kReduction: d.round_result = numerics.reductions == Precision::kBf16; break;
    case OpClass::kElementwise: d.round_result = numerics.elementwise == Precision::kBf16; break;
  }
  return d;
}

double KernelTolerance(const std::string& op) {
  const internal::KernelDef* k = internal::FindKernel(op);
  return k == nullptr ? internal::kTolReduce : k->tolerance;
}

}  // namespace ts::simdevice
