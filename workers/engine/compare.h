// Numeric comparison: the accuracy rule of DESIGN.md §4 (after PyTorch's dynamo harness) and the
// loss-curve rule.
//
// Outputs: pass if allclose(device, cpu_fp32) at the fp32 tolerance; otherwise pass iff
//   RMSE(device, fp64) <= m * RMSE(cpu_at_declared_numerics, fp64) + tol / 10
// where the reference error comes from a CPU run that emulates the profile's *declared* numerics
// (e.g. bf16-rounded matmul inputs), m = 3 for bf16 numerics, 2 for fp32 (the dynamo rule), AND
//   RMSE(device, cpu_at_declared_numerics) <= k * RMSE(cpu_at_declared_numerics, fp64) + tol / 10
// whenever the device is less accurate than the declared numerics (rmse_ratio > 1), with
// k = 0.5 (kConsistency): a device that honestly computes at its declared numerics differs
// from their emulation only by accumulation order (~1e-6 relative), far inside half the
// declared-numerics error budget, while a 1% error in one op is not. The dynamo rule alone lets
// a defect hide inside m times the bf16 noise (a 2% softmax error gives ratio ~2 on a tiny Llama).
//
// Loss curves, per step k: with noise_k = max over j <= k of |declared_j - reference_j| (the
// reference's own noise at the declared numerics so far) and floor_k = rel_floor *
// |reference_k| + tol / 10,
//   |device_k - reference_k| <= m * noise_k + floor_k   and, for the first
//   kLossConsistencySteps steps only,
//   |device_k - declared_k|  <= kConsistency * noise_k + floor_k  (when the device is further
//   from the reference than noise_k + floor_k, i.e. less accurate than declared).
// The consistency term stops after step 1: training amplifies whatever separates the device from
// its emulation (accumulation order, ~1e-7 relative) step after step, and on a high-curvature
// tiny model (Jais-2's relu² after a biased up_proj) an honest device that equals its emulation
// bit for bit through step 2 ends step 4 0.4x to 2.6x the bf16 noise off the declared curve.
// Steps 0 and 1 come from the initial weights and one update with the first step's gradients,
// which are themselves held to the declared numerics at 0.5x (engine README "Gradients").
// NaN/Inf fails; a failing curve that rises while the reference falls is called diverging.
//
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "workers/engine/verdict.h"

namespace ts::engine {

inline constexpr double kConsistency = 0.5;
inline constexpr size_t kLossConsistencySteps = 2;

struct Tolerance {
  double tol = 1e-4;        // allclose rtol = atol for float32 outputs
  double multiplier = 2.0;  // m
};

// All tensor lists hold the same outputs in the same order; any device (copied to CPU double).
// Non-float outputs are ignored.
Accuracy CompareOutputs(const std::vector<at::Tensor>& device,
                        const std::vector<at::Tensor>& cpu_fp32,
                        const std::vector<at::Tensor>& golden_fp64,
                        const std::vector<at::Tensor>& cpu_declared, const Tolerance& tol);
bool AccuracyPasses(const Accuracy& a, const Tolerance& tol);
// "rmse_ratio 4.12 > 3 (rmse 2.1e-02 vs reference 5.1e-03), cosine 0.9993"
std::string DescribeFailure(const Accuracy& a, const Tolerance& tol);

struct LossCurveVerdict {
  bool pass = true;
  std::string error;
  std::vector<double> band;
  double max_gap_ratio = 0;
};
LossCurveVerdict CompareLossCurves(const std::vector<double>& device,
                                   const std::vector<double>& reference,
                                   const std::vector<double>& reference_declared,
                                   const Tolerance& tol, double rel_floor = 2e-5);

// Gradients of one training step, per parameter (undefined: no gradient reached it), compared
// with the rule of the outputs after scaling each parameter's gradients by the RMS of its fp64
// reference (so the absolute terms of the rule are relative to that gradient's size). A
// parameter whose declared-numerics gradient is itself off by more than kGradNoiseDominated of
// that RMS (e.g. an analytically zero gradient, pure rounding noise) carries no signal and is
// not judged, unless the device's is not finite.
inline constexpr double kGradNoiseDominated = 0.1;
using GradMap = std::map<std::string, at::Tensor>;
struct GradientVerdict {
  bool pass = true;
  std::string error;       // "grad: model.layers.0.self_attn.q_proj.weight, ratio 4.1; ..."
  double worst_ratio = 0;  // largest rmse_ratio among the parameters judged
  std::string worst_param;
  int judged = 0;          // parameters judged
  int noise_dominated = 0; // parameters left out as noise-dominated
  // Parameters whose device gradient differs from the declared numerics' but that have no fp64
  // or fp32 reference gradient to judge it by (the fp64 step failed, or gave none for them): not
  // judged, and counted (the first by name in `unreferenced_param`). `pass` is about the judged
  // parameters only; the caller decides what an unjudged one makes of the verdict.
  int unreferenced = 0;
  std::string unreferenced_param;
};
//
// A parameter whose device gradient equals the declared numerics' bit for bit is judged at
// ratio 1 without its fp64 reference, so `golden_fp64` is called only for the first parameter
// that differs (never, for a device exact to its declared numerics): the engine's fp64 step is
// taken only then. A differing parameter with no fp64 (or fp32) reference is not judged and is
// counted in `unreferenced`.
GradientVerdict CompareGradients(const GradMap& device, const GradMap& cpu_fp32,
                                 const std::function<const GradMap&()>& golden_fp64,
                                 const GradMap& cpu_declared, const Tolerance& tol);
// The train mode's status and error once its gradients are compared (`status`, `error`: the loss
// curves' verdict): failing judged parameters make it fail_accuracy; unjudged ones
// (`unreferenced`) make a mode that would otherwise pass ref_fail, since the references are in
// question, not the device, and an unchecked gradient is no pass; on a mode that fails anyway
// they are noted in the error.
void ApplyGradientVerdict(const GradientVerdict& g, Verdict* status, std::string* error);

// The same with the fp64 gradients at hand.
GradientVerdict CompareGradients(const GradMap& device, const GradMap& cpu_fp32,
                                 const GradMap& golden_fp64, const GradMap& cpu_declared,
                                 const Tolerance& tol);

}  // namespace ts::engine
