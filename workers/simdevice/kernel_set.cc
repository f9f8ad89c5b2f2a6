#include "workers/simdevice/internal/kernel_set.h"

#include <unordered_map>

#include "workers/simdevice/profile.h"

namespace ts::simdevice::internal {

const std::vector<KernelDef>& KernelSet() {
  static const std::vector<KernelDef> kSet = {
      {"mm", OpClass::kMatmul, {"self", "mat2"}},
      {"bmm", OpClass::kMatmul, {"self", "mat2"}},
      {"addmm", OpClass::kMatmul, {"mat1", "mat2"}},
      {"baddbmm", OpClass::kMatmul, {"batch1", "batch2"}},
      {"convolution", OpClass::kMatmul, {"input", "weight"}},
      {"convolution_backward", OpClass::kMatmul, {"grad_output", "input", "weight"}},
      {"add.Tensor", OpClass::kElementwise, {}},
      {"add_.Tensor", OpClass::kElementwise, {}},
      {"sub.Tensor", OpClass::kElementwise, {}},
      {"sub_.Tensor", OpClass::kElementwise, {}},
      {"mul.Tensor", OpClass::kElementwise, {}},
      {"mul_.Tensor", OpClass::kElementwise, {}},
      {"div.Tensor", OpClass::kElementwise, {}},
      {"div_.Tensor", OpClass::kElementwise, {}},
      {"neg", OpClass::kElementwise, {}},
      {"exp", OpClass::kElementwise, {}},
      {"log", OpClass::kElementwise, {}},
      {"sqrt", OpClass::kElementwise, {}},
      {"rsqrt", OpClass::kElementwise, {}},
      {"pow.Tensor_Scalar", OpClass::kElementwise, {}},
      {"sin", OpClass::kElementwise, {}},
      {"cos", OpClass::kElementwise, {}},
      {"erf", OpClass::kElementwise, {}},
      {"tanh", OpClass::kElementwise, {}},
      {"tanh_backward", OpClass::kElementwise, {}},
      {"sigmoid", OpClass::kElementwise, {}},
      {"sigmoid_backward", OpClass::kElementwise, {}},
      {"gelu", OpClass::kElementwise, {}},
      {"gelu_backward", OpClass::kElementwise, {}},
      {"silu", OpClass::kElementwise, {}},
      {"silu_backward", OpClass::kElementwise, {}},
      {"relu", OpClass::kElementwise, {}},
      {"threshold_backward", OpClass::kElementwise, {}},
      {"where.self", OpClass::kElementwise, {}},
      {"masked_fill.Scalar", OpClass::kElementwise, {}},
      {"masked_fill_.Scalar", OpClass::kElementwise, {}},
      {"clamp", OpClass::kElementwise, {}},
      {"maximum", OpClass::kElementwise, {}},
      {"minimum", OpClass::kElementwise, {}},
      {"eq.Scalar", OpClass::kElementwise, {}},
      {"ne.Scalar", OpClass::kElementwise, {}},
      {"embedding", OpClass::kElementwise, {}},
      {"embedding_dense_backward", OpClass::kReduction, {}},
      {"index_select", OpClass::kElementwise, {}},
      {"gather", OpClass::kElementwise, {}},
      {"cat", OpClass::kElementwise, {}},
      {"sum.dim_IntList", OpClass::kReduction, {}},
      {"sum", OpClass::kReduction, {}},
      {"mean.dim", OpClass::kReduction, {}},
      {"amax", OpClass::kReduction, {}},
      {"cumsum", OpClass::kReduction, {}},
      {"_softmax", OpClass::kReduction, {}},
      {"_softmax_backward_data", OpClass::kReduction, {}},
      {"_log_softmax", OpClass::kReduction, {}},
      {"_log_softmax_backward_data", OpClass::kReduction, {}},
      {"native_layer_norm", OpClass::kReduction, {}},
      {"native_layer_norm_backward", OpClass::kReduction, {}},
      {"nll_loss_forward", OpClass::kReduction, {}},
      {"nll_loss_backward", OpClass::kReduction, {}},
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
