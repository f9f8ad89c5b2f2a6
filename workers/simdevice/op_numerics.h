// The declared numerics of one op, as the device's contract states them, and the tolerance a
// device kernel is held to against them: what "the same op on the CPU at the declared numerics"
// means, for kernels_test and for the engine's op-by-op replay (one table, kernel_set.cc).
//
// An op with a device kernel computes ATen's CPU kernel of the same op with these numerics:
// matmul-class operands (`rounded_args`) rounded to bf16 (RNE) under bf16 matmul numerics, and,
// in eager only, float results rounded to bf16 where the op's class has bf16 precision. An op
// without a kernel is computed exactly (the CPU fallback in eager; lowered as is inside a
// compiled segment).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "workers/simdevice/profile.h"
#include "workers/simdevice/runtime.h"

namespace ts::simdevice {

struct DeclaredOp {
  std::vector<std::string> rounded_args;  // schema argument names rounded to bf16
  bool round_result = false;              // float results rounded to bf16
  double tolerance = 1e-5;                // rtol = atol vs ATen's CPU result at these numerics
};

// `op` with overload: "aten::mm", "aten::add.Tensor".
DeclaredOp DeclaredNumericsOf(const Numerics& numerics, const std::string& op, ExecMode mode);

// The kernel table's tolerance of `op` (0: bit for bit); ops without a kernel: 1e-5 (the
// same CPU kernel underneath, up to accumulation order).
double KernelTolerance(const std::string& op);

}  // namespace ts::simdevice
