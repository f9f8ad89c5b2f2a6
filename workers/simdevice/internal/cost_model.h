// The cost model of the simulated device (README.md, "Cost model"): what one op costs, from its
// shapes and the profile's `performance` section. Pure arithmetic, no state: the clock
// (internal/perf_clock.h) decides when each formula applies. PRIVATE to workers/simdevice.
//
// Units: FLOPs and bytes as counts, rates per second, times in microseconds.
//
// Thread-safety: CostModel is immutable after construction; the free functions are pure.
#pragma once

#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <string>

#include "workers/simdevice/profile.h"

namespace ts::simdevice::internal {

enum class Engine : uint8_t { kMatrix, kVector };

// How an op's work follows from its shapes: one row of the cost table.
enum class Work : uint8_t {
  kElementwise,   // flops_per_elem x the largest tensor operand or result
  kGather,        // as elementwise, but operand 0 is a table read only where indexed: it
                  // counts as many bytes as the result, not its own size
  kMatmul,        // 2 x numel(result) x K, K the last dim of operand `k_arg`
  kConv,          // 2 x numel(result) x weight.numel / weight.size(0) (weight: operand 1);
                  // transposed: numel(input) instead of numel(result)
  kConvBackward,  // the forward's work once per gradient computed (grad_input, grad_weight)
};

struct OpCostClass {
  Engine engine = Engine::kVector;
  Work work = Work::kElementwise;
  double flops_per_elem = 1;
  int k_arg = 0;            // kMatmul: the operand whose last dim is K; kConv*: the weight
  bool transposed = false;  // kConv: always transposed (conv_transpose*)
};

// The cost class of an op ("aten::mm", "aten::add.Tensor"; looked up without its overload):
// matmul-class ops (mm, bmm, addmm, baddbmm, convolutions, ...) on the matrix engine;
// everything else on the vector engine with a per-element FLOP count (1 by default; 0 for data
// movement, 4 for transcendental functions, 5 for softmax, 8 for gelu/silu and norms).
OpCostClass CostClassOf(const std::string& op);

// What an op's tensors say: gathered from its operands before it runs and its results after.
struct OpShapes {
  double in_bytes = 0;     // tensor operands (lists included)
  double out_bytes = 0;    // tensor results
  int64_t max_numel = 0;   // of any tensor operand or result
  double k = 0;            // kMatmul: K; kConv*: weight elements per output channel
  int64_t work_numel = 0;  // kMatmul, kConv*: the elements each costing 2 x k FLOPs
  bool transposed = false;
  int gradients = 0;  // kConvBackward: grad_input and grad_weight computed
  c10::ScalarType dtype = c10::ScalarType::Float;  // of the first tensor operand
};
// Reads the top `num_args` slots of `stack` (the operands, on the device or the host).
void ShapesBefore(const OpCostClass& c, const torch::jit::Stack& stack, size_t num_args,
                  OpShapes* s);
// Reads the top `num_rets` slots of `stack` (the results).
void ShapesAfter(const OpCostClass& c, const torch::jit::Stack& stack, size_t num_rets,
                 OpShapes* s);

struct OpWork {
  double flops = 0;
  double bytes = 0;  // read + written
};
OpWork WorkOf(const OpCostClass& c, const OpShapes& s);

// The profile's performance section as the arithmetic of one call: peaks per ScalarType.
class CostModel {
 public:
  CostModel() : CostModel(PerformanceSpec(), MatmulNumerics::kFp32) {}
  CostModel(const PerformanceSpec& spec, MatmulNumerics matmul);

  // Peak FLOP/s of `engine` at `dtype`. Matrix-engine ops whose operands the declared numerics
  // round to bf16 run at the bf16 peak (MatrixDtype).
  double Peak(Engine engine, c10::ScalarType dtype) const;
  c10::ScalarType MatrixDtype(c10::ScalarType operand) const;

  // flops / (efficiency x peak).
  static double ComputeUs(double flops, double peak, double efficiency);
  // max(compute, bytes / HBM bandwidth): a kernel's roofline, without its launch.
  double RooflineUs(double flops, double peak, double efficiency, double bytes) const;
  // One transfer over the host link: latency + bytes / link bandwidth.
  double TransferUs(double bytes) const;
  // An op run by the host (a fallback, a CPU segment's node): max(flops / host FLOP/s,
  // bytes / host bandwidth). Fixed numbers, never wall clock.
  double HostUs(double flops, double bytes) const;
  // A compiled segment: one launch + max(its ops' compute, its boundary traffic / bandwidth).
  double SegmentUs(double compute_us, double boundary_bytes) const;
  // The part of SegmentUs that is not its ops' compute (launch and exposed memory time).
  double SegmentOverheadUs(double compute_us, double boundary_bytes) const;

  const PerformanceSpec& spec() const { return spec_; }
  double peak_flops() const { return peak_flops_; }  // MFU's denominator: the highest peak

 private:
  PerformanceSpec spec_;
  bool bf16_matmul_ = false;
  double peak_flops_ = 0;
  static constexpr size_t kTypes = static_cast<size_t>(c10::ScalarType::NumOptions);
  std::array<double, kTypes> matrix_peak_{};
  std::array<double, kTypes> vector_peak_{};
};

}  // namespace ts::simdevice::internal
