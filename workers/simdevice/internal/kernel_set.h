// The ops this backend has a device kernel for, and the class of numerics each follows. A
// profile's native_ops may name only these (with or without overload); the rest of ATen reaches
// the device through the fallback. PRIVATE to workers/simdevice.
//
// Thread-safety: immutable after first use.
#pragma once

#include <string>
#include <vector>

namespace ts::simdevice::internal {

enum class OpClass { kMatmul, kReduction, kElementwise };

// How closely a kernel must match ATen's CPU result of the same op at the declared numerics
// (rtol = atol): the tolerance of kernels_test and of the engine's op-by-op replay, one table.
inline constexpr double kTolExact = 0;     // selection, comparison, copies: bit for bit
inline constexpr double kTolPointwise = 1e-6;
inline constexpr double kTolReduce = 1e-5;  // reductions and matmul-class ops

struct KernelDef {
  const char* name;  // schema name without "aten::", with overload
  OpClass cls;
  double tolerance;
  std::vector<std::string> rounded_args;  // matmul operands rounded under bf16 numerics
};

const std::vector<KernelDef>& KernelSet();
// The kernel of "aten::add.Tensor" (exact name with overload), or nullptr.
const KernelDef* FindKernel(const std::string& qualified);
// True when `op` names a kernel exactly or by its overload-less name ("aten::add").
bool HasKernelFor(const std::string& op);

}  // namespace ts::simdevice::internal
