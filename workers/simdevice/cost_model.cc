#include "workers/simdevice/internal/cost_model.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "workers/simdevice/internal/device_state.h"
#include "workers/simdevice/internal/performance_spec.h"

namespace ts::simdevice::internal {
namespace {

// Ops named without "aten::" and without overload.
const std::unordered_map<std::string, OpCostClass>& CostTable() {
  static const auto* kTable = [] {
    auto* t = new std::unordered_map<std::string, OpCostClass>();
    auto matmul = [&](const char* op, int k_arg) {
      (*t)[op] = {Engine::kMatrix, Work::kMatmul, 0, k_arg};
    };
    for (const char* op : {"mm", "bmm", "matmul", "linear", "mv", "dot", "vdot"}) matmul(op, 0);
    for (const char* op : {"addmm", "baddbmm", "addbmm", "addmv", "addr"}) matmul(op, 1);
    for (const char* op : {"convolution", "_convolution", "convolution_overrideable", "conv1d",
                           "conv2d", "conv3d"}) {
      (*t)[op] = {Engine::kMatrix, Work::kConv, 0, 1};
    }
    for (const char* op : {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}) {
      (*t)[op] = {Engine::kMatrix, Work::kConv, 0, 1, /*transposed=*/true};
    }
    for (const char* op : {"convolution_backward", "convolution_backward_overrideable"}) {
      (*t)[op] = {Engine::kMatrix, Work::kConvBackward, 0, 2};
    }
    auto vector = [&](std::initializer_list<const char*> ops, double flops, Work work) {
      for (const char* op : ops) (*t)[op] = {Engine::kVector, work, flops, 0};
    };
    vector({"embedding", "index_select", "gather", "index"}, 0, Work::kGather);
    vector({"cat",
            "stack",
            "clone",
            "copy_",
            "_to_copy",
            "contiguous",
            "repeat",
            "constant_pad_nd",
            "flip",
            "roll",
            "fill_",
            "zero_",
            "zeros_like",
            "ones_like",
            "full_like",
            "scatter",
            "index_put_",
            "_index_put_impl_",
            "masked_scatter",
            "embedding_dense_backward",
            "_unsafe_view",
            "slice_backward",
            "select_backward"},
           0, Work::kElementwise);
    vector({"exp",
            "log",
            "log1p",
            "expm1",
            "sqrt",
            "rsqrt",
            "pow",
            "sin",
            "cos",
            "tan",
            "erf",
            "erfc",
            "tanh",
            "sigmoid",
            "log_sigmoid_forward",
            "tanh_backward",
            "sigmoid_backward",
            "reciprocal",
            "atan",
            "asin",
            "acos"},
           4, Work::kElementwise);
    vector({"_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data"}, 5,
           Work::kElementwise);
    vector({"gelu", "gelu_backward", "silu", "silu_backward", "mish", "mish_backward", "softplus",
            "softplus_backward", "native_layer_norm", "native_layer_norm_backward",
            "native_group_norm", "native_group_norm_backward", "native_batch_norm",
            "native_batch_norm_backward", "_native_batch_norm_legit"},
           8, Work::kElementwise);
    return t;
  }();
  return *kTable;
}

std::string BaseName(const std::string& op) {
  const std::string base = StripOverload(op);
  return base.rfind("aten::", 0) == 0 ? base.substr(6) : base;
}

double Bytes(const at::Tensor& t) {
  return static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
}

// Visits every defined tensor of `v` (a tensor or a list of tensors).
template <typename Fn>
void ForEachTensor(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) {
      if (t.defined()) fn(t);
    }
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined()) fn(e.toTensor());
    }
  }
}

const at::Tensor* TensorAt(const torch::jit::Stack& stack, size_t first, size_t num, int i) {
  if (i < 0 || static_cast<size_t>(i) >= num) return nullptr;
  const c10::IValue& v = stack[first + i];
  return v.isTensor() && v.toTensor().defined() ? &v.toTensor() : nullptr;
}

// Weight elements per output channel of a convolution weight [C_out, C_in/groups, k...] (for a
// transposed one, [C_in, C_out/groups, k...]: per input channel).
double PerChannel(const at::Tensor* w) {
  if (w == nullptr || w->dim() < 1 || w->size(0) == 0) return 0;
  return static_cast<double>(w->numel() / w->size(0));
}

void ConvShapes(const OpCostClass& c, const torch::jit::Stack& stack, size_t first, size_t num,
                OpShapes* s) {
  const at::Tensor* w = TensorAt(stack, first, num, c.k_arg);
  s->k = PerChannel(w);
  const int transposed_arg = c.work == Work::kConvBackward ? 7 : 6;
  if (c.transposed) {
    s->transposed = true;
  } else if (static_cast<size_t>(transposed_arg) < num && stack[first + transposed_arg].isBool()) {
    s->transposed = stack[first + transposed_arg].toBool();
  }
  if (c.work == Work::kConvBackward) {
    // The forward's outputs are grad_output (operand 0); a transposed forward's inputs are
    // operand 1.
    const at::Tensor* t = TensorAt(stack, first, num, s->transposed ? 1 : 0);
    s->work_numel = t != nullptr ? t->numel() : 0;
  } else if (s->transposed) {
    const at::Tensor* x = TensorAt(stack, first, num, 0);
    s->work_numel = x != nullptr ? x->numel() : 0;
  }
}

}  // namespace

OpCostClass CostClassOf(const std::string& op) {
  const auto& table = CostTable();
  auto it = table.find(BaseName(op));
  return it == table.end() ? OpCostClass() : it->second;
}

void ShapesBefore(const OpCostClass& c, const torch::jit::Stack& stack, size_t num_args,
                  OpShapes* s) {
  const size_t first = stack.size() - num_args;
  bool first_tensor = true;
  for (size_t i = 0; i < num_args; ++i) {
    ForEachTensor(stack[first + i], [&](const at::Tensor& t) {
      if (first_tensor) s->dtype = t.scalar_type();
      // A gather reads its table (operand 0) only where indexed: ShapesAfter counts the rows.
      if (!(c.work == Work::kGather && first_tensor && i == 0)) s->in_bytes += Bytes(t);
      first_tensor = false;
      s->max_numel = std::max<int64_t>(s->max_numel, t.numel());
    });
  }
  if (c.work == Work::kMatmul) {
    const at::Tensor* a = TensorAt(stack, first, num_args, c.k_arg);
    if (a != nullptr && a->dim() >= 1) s->k = static_cast<double>(a->size(-1));
  }
  if (c.work == Work::kConv || c.work == Work::kConvBackward) {
    ConvShapes(c, stack, first, num_args, s);
  }
}

void ShapesAfter(const OpCostClass& c, const torch::jit::Stack& stack, size_t num_rets,
                 OpShapes* s) {
  const size_t first = stack.size() - num_rets;
  int64_t result_numel = -1;
  for (size_t i = 0; i < num_rets; ++i) {
    ForEachTensor(stack[first + i], [&](const at::Tensor& t) {
      s->out_bytes += Bytes(t);
      s->max_numel = std::max<int64_t>(s->max_numel, t.numel());
      if (result_numel < 0) result_numel = t.numel();
      if (c.work == Work::kConvBackward && i < 2 && t.numel() > 0) ++s->gradients;
    });
  }
  if (c.work == Work::kGather) s->in_bytes += s->out_bytes;  // the rows read
  if (c.work == Work::kMatmul || (c.work == Work::kConv && !s->transposed)) {
    s->work_numel = std::max<int64_t>(result_numel, 0);
  }
}

OpWork WorkOf(const OpCostClass& c, const OpShapes& s) {
  OpWork w;
  w.bytes = s.in_bytes + s.out_bytes;
  switch (c.work) {
    case Work::kElementwise:
    case Work::kGather:
      w.flops = c.flops_per_elem * static_cast<double>(s.max_numel);
      break;
    case Work::kMatmul:
    case Work::kConv:
      w.flops = 2.0 * static_cast<double>(s.work_numel) * s.k;
      break;
    case Work::kConvBackward:
      w.flops = 2.0 * static_cast<double>(s.work_numel) * s.k * s.gradients;
      break;
  }
  return w;
}

CostModel::CostModel(const PerformanceSpec& spec, MatmulNumerics matmul)
    : spec_(spec), bf16_matmul_(matmul != MatmulNumerics::kFp32), peak_flops_(PeakFlops(spec)) {
  auto fill = [](const std::map<std::string, double>& tflops, std::array<double, kTypes>& out) {
    double lowest = std::numeric_limits<double>::infinity();
    for (const auto& [dtype, v] : tflops) lowest = std::min(lowest, v);
    if (tflops.empty()) lowest = 1;  // a parsed profile always names one
    for (size_t t = 0; t < kTypes; ++t) {
      auto it = tflops.find(DtypeName(static_cast<c10::ScalarType>(t)));
      out[t] = (it != tflops.end() ? it->second : lowest) * 1e12;
    }
  };
  fill(spec.matrix_tflops, matrix_peak_);
  fill(spec.vector_tflops, vector_peak_);
}

double CostModel::Peak(Engine engine, c10::ScalarType dtype) const {
  const auto i = static_cast<size_t>(dtype);
  if (i >= kTypes) return engine == Engine::kMatrix ? matrix_peak_[0] : vector_peak_[0];
  return engine == Engine::kMatrix ? matrix_peak_[i] : vector_peak_[i];
}

c10::ScalarType CostModel::MatrixDtype(c10::ScalarType operand) const {
  return bf16_matmul_ && operand == c10::ScalarType::Float ? c10::ScalarType::BFloat16 : operand;
}

double CostModel::ComputeUs(double flops, double peak, double efficiency) {
  return flops / (efficiency * peak) * 1e6;
}

double CostModel::RooflineUs(double flops, double peak, double efficiency, double bytes) const {
  return std::max(ComputeUs(flops, peak, efficiency), bytes / (spec_.hbm_gbps * 1e3));
}

double CostModel::TransferUs(double bytes) const {
  return spec_.host_link_latency_us + bytes / (spec_.host_link_gbps * 1e3);
}

double CostModel::HostUs(double flops, double bytes) const {
  return std::max(flops / (spec_.host_gflops * 1e3), bytes / (spec_.host_gbps * 1e3));
}

double CostModel::SegmentUs(double compute_us, double boundary_bytes) const {
  return spec_.launch_us + std::max(compute_us, boundary_bytes / (spec_.hbm_gbps * 1e3));
}

double CostModel::SegmentOverheadUs(double compute_us, double boundary_bytes) const {
  return SegmentUs(compute_us, boundary_bytes) - compute_us;
}

}  // namespace ts::simdevice::internal
