#include "workers/simdevice/internal/kernel_set.h"

#include <unordered_map>

#include "workers/simdevice/profile.h"

namespace ts::simdevice::internal {

const std::vector<KernelDef>& KernelSet() {
  static const std::vector<KernelDef> kSet = {
      {"mm", OpClass::kMatmul, kTolReduce, {"self", "mat2"}},
      {"bmm", OpClass::kMatmul, kTolReduce, {"self", "mat2"}},
      {"addmm", OpClass::kMatmul, kTolReduce, {"mat1", "mat2"}},
      {"baddbmm", OpClass::kMatmul, kTolReduce, {"batch1", "batch2"}},
      {"convolution", OpClass::kMatmul, kTolReduce, {"input", "weight"}},
      {"convolution_backward", OpClass::kMatmul, kTolReduce, {"grad_output", "input", "weight"}},
      {"add.Tensor", OpClass::kElementwise, kTolPointwise, {}},
      {"add_.Tensor", OpClass::kElementwise, kTolPointwise, {}},
      {"sub.Tensor", OpClass::kElementwise, kTolPointwise, {}},
      {"sub_.Tensor", OpClass::kElementwise, kTolPointwise, {}},
      {"mul.Tensor", OpClass::kElementwise, kTolPointwise, {}},
      {"mul_.Tensor", OpClass::kElementwise, kTolPointwise, {}},
      {"div.Tensor", OpClass::kElementwise, kTolPointwise, {}},
      {"div_.Tensor", OpClass::kElementwise, kTolPointwise, {}},
      {"neg", OpClass::kElementwise, kTolExact, {}},
      {"exp", OpClass::kElementwise, kTolPointwise, {}},
      {"log", OpClass::kElementwise, kTolPointwise, {}},
      {"sqrt", OpClass::kElementwise, kTolPointwise, {}},
      {"rsqrt", OpClass::kElementwise, kTolPointwise, {}},
      {"pow.Tensor_Scalar", OpClass::kElementwise, kTolPointwise, {}},
      {"sin", OpClass::kElementwise, kTolPointwise, {}},
      {"cos", OpClass::kElementwise, kTolPointwise, {}},
      {"erf", OpClass::kElementwise, kTolPointwise, {}},
      {"tanh", OpClass::kElementwise, kTolPointwise, {}},
      {"tanh_backward", OpClass::kElementwise, kTolPointwise, {}},
      {"sigmoid", OpClass::kElementwise, kTolPointwise, {}},
      {"sigmoid_backward", OpClass::kElementwise, kTolPointwise, {}},
      {"gelu", OpClass::kElementwise, kTolPointwise, {}},
      {"gelu_backward", OpClass::kElementwise, kTolPointwise, {}},
      {"silu", OpClass::kElementwise, kTolPointwise, {}},
      {"silu_backward", OpClass::kElementwise, kTolPointwise, {}},
      {"relu", OpClass::kElementwise, kTolExact, {}},
      {"threshold_backward", OpClass::kElementwise, kTolExact, {}},
      {"where.self", OpClass::kElementwise, kTolExact, {}},
      {"masked_fill.Scalar", OpClass::kElementwise, kTolExact, {}},
      {"masked_fill_.Scalar", OpClass::kElementwise, kTolExact, {}},
      {"clamp", OpClass::kElementwise, kTolExact, {}},
      {"maximum", OpClass::kElementwise, kTolExact, {}},
      {"minimum", OpClass::kElementwise, kTolExact, {}},
      {"eq.Scalar", OpClass::kElementwise, kTolExact, {}},
      {"ne.Scalar", OpClass::kElementwise, kTolExact, {}},
      {"embedding", OpClass::kElementwise, kTolExact, {}},
      {"embedding_dense_backward", OpClass::kReduction, kTolReduce, {}},
      {"index_select", OpClass::kElementwise, kTolExact, {}},
      {"gather", OpClass::kElementwise, kTolExact, {}},
      {"cat", OpClass::kElementwise, kTolExact, {}},
      {"sum.dim_IntList", OpClass::kReduction, kTolReduce, {}},
      {"sum", OpClass::kReduction, kTolReduce, {}},
      {"mean.dim", OpClass::kReduction, kTolReduce, {}},
      {"amax", OpClass::kReduction, kTolExact, {}},
      {"cumsum", OpClass::kReduction, kTolReduce, {}},
      {"_softmax", OpClass::kReduction, kTolPointwise, {}},
      {"_softmax_backward_data", OpClass::kReduction, kTolPointwise, {}},
      {"_log_softmax", OpClass::kReduction, kTolPointwise, {}},
      {"_log_softmax_backward_data", OpClass::kReduction, kTolPointwise, {}},
      {"native_layer_norm", OpClass::kReduction, kTolReduce, {}},
      {"native_layer_norm_backward", OpClass::kReduction, kTolReduce, {}},
      {"nll_loss_forward", OpClass::kReduction, kTolReduce, {}},
      {"nll_loss_backward", OpClass::kReduction, kTolReduce, {}},
  };
  return kSet;
}

const KernelDef* FindKernel(const std::string& qualified) {
  static const std::unordered_map<std::string, const KernelDef*> kIndex = [] {
    std::unordered_map<std::string, const KernelDef*> m;
    for (const auto& k : KernelSet()) m[std::string("aten::") + k.name] = &k;
    return m;
  }();
  auto it = kIndex.find(qualified);
  return it == kIndex.end() ? nullptr : it->second;
}

bool HasKernelFor(const std::string& op) {
  if (FindKernel(op) != nullptr) return true;
  for (const auto& k : KernelSet()) {
    if (StripOverload(std::string("aten::") + k.name) == op) return true;
  }
  return false;
}

}  // namespace ts::simdevice::internal
