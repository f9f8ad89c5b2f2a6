#include "workers/engine/compare.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace ts::engine {
namespace {

at::Tensor Flatten(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> parts;
  for (const auto& t : ts) {
    if (!t.defined() || !at::isFloatingType(t.scalar_type())) continue;
    parts.push_back(t.detach().to(at::kCPU).to(at::kDouble).reshape({-1}));
  }
  if (parts.empty()) return at::zeros({0}, at::kDouble);
  return at::cat(parts);
}

double Rmse(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0) return 0;
  return (a - b).pow(2).mean().sqrt().item<double>();
}

}  // namespace

Accuracy CompareOutputs(const std::vector<at::Tensor>& device,
                        const std::vector<at::Tensor>& cpu_fp32,
                        const std::vector<at::Tensor>& golden_fp64,
                        const std::vector<at::Tensor>& cpu_declared, const Tolerance& tol) {
  Accuracy a;
  const at::Tensor dev = Flatten(device), ref = Flatten(cpu_fp32), gold = Flatten(golden_fp64),
                   decl = Flatten(cpu_declared);
  if (dev.numel() != ref.numel() || dev.numel() != gold.numel() || dev.numel() != decl.numel()) {
    a.finite = false;
    a.rmse_ratio = INFINITY;
    a.cosine = 0;
    return a;
  }
  if (dev.numel() == 0) {
    a.allclose = true;
    return a;
  }
  a.finite = at::isfinite(dev).all().item<bool>();
  const at::Tensor diff = (dev - ref).abs();
  a.max_abs_err = diff.max().item<double>();
  a.max_rel_err = (diff / (ref.abs() + 1e-12)).max().item<double>();
  const double nd = dev.norm().item<double>(), nr = ref.norm().item<double>();
  a.cosine = (nd == 0 || nr == 0) ? (nd == nr ? 1.0 : 0.0) : (dev.dot(ref).item<double>() / (nd * nr));
  a.allclose = a.finite && at::allclose(dev, ref, tol.tol, tol.tol);
  a.rmse_device = Rmse(dev, gold);
  a.rmse_reference = Rmse(decl, gold);
  a.rmse_vs_declared = Rmse(dev, decl);
  a.rmse_ratio = a.rmse_reference > 0 ? a.rmse_device / a.rmse_reference
                                       : (a.rmse_device > 0 ? INFINITY : 1.0);
  if (!a.finite) {
    a.rmse_ratio = INFINITY;
    a.cosine = NAN;
  }
  return a;
}

bool AccuracyPasses(const Accuracy& a, const Tolerance& tol) {
  if (!a.finite) return false;
  if (a.allclose) return true;
  if (a.rmse_device > tol.multiplier * a.rmse_reference + tol.tol / 10.0) return false;
  // At least as accurate as the declared numerics promise: fine (e.g. an op that falls back to
  // exact CPU fp32). Less accurate: it must then be consistent with those numerics.
  if (a.rmse_device <= a.rmse_reference) return true;
  return a.rmse_vs_declared <= kConsistency * a.rmse_reference + tol.tol / 10.0;
}

std::string DescribeFailure(const Accuracy& a, const Tolerance& tol) {
  char buf[256];
  if (!a.finite) return "device output has NaN/Inf";
  if (a.rmse_device > tol.multiplier * a.rmse_reference + tol.tol / 10.0) {
    std::snprintf(buf, sizeof(buf),
                  "rmse_ratio %.3g > %.3g (rmse vs fp64 %.3g, declared-numerics reference %.3g), "
                  "max_abs_err %.3g, cosine %.6f",
                  a.rmse_ratio, tol.multiplier, a.rmse_device, a.rmse_reference, a.max_abs_err,
                  a.cosine);
  } else {
    std::snprintf(buf, sizeof(buf),
                  "device differs from its declared numerics: rmse %.3g > %.2g x %.3g "
                  "(rmse_ratio %.3g, max_abs_err %.3g, cosine %.6f)",
                  a.rmse_vs_declared, kConsistency, a.rmse_reference, a.rmse_ratio, a.max_abs_err,
                  a.cosine);
  }
  return buf;
}

LossCurveVerdict CompareLossCurves(const std::vector<double>& device,
                                   const std::vector<double>& reference,
                                   const std::vector<double>& reference_declared,
                                   const Tolerance& tol, double rel_floor) {
  LossCurveVerdict v;
  if (device.size() != reference.size() || reference.size() != reference_declared.size()) {
    v.pass = false;
    v.error = "loss curves have different lengths";
    return v;
  }
  for (size_t k = 0; k < device.size(); ++k) {
    const double noise = std::abs(reference_declared[k] - reference[k]);
    const double floor = rel_floor * std::abs(reference[k]) + tol.tol / 10;
    const double band = tol.multiplier * noise + floor;
    const double consistency_band = kConsistency * noise + floor;
    v.band.push_back(band);
    if (!std::isfinite(device[k])) {
      v.pass = false;
      v.error = "device loss is " + std::string(std::isnan(device[k]) ? "NaN" : "Inf") +
                " at step " + std::to_string(k);
      v.max_gap_ratio = INFINITY;
      return v;
    }
    const double gap = std::abs(device[k] - reference[k]);
    const double gap_declared = std::abs(device[k] - reference_declared[k]);
    v.max_gap_ratio = std::max(v.max_gap_ratio, gap / band);
    const bool inconsistent = gap > noise + floor && gap_declared > consistency_band;
    if (v.pass && (gap > band || inconsistent)) {
      v.pass = false;
      char buf[256];
      std::snprintf(buf, sizeof(buf),
                    "loss at step %zu: device %.7g vs reference %.7g (declared numerics %.7g): "
                    "gap %.3g, allowed %.3g (%.3g from the declared curve)",
                    k, device[k], reference[k], reference_declared[k], gap, band,
                    consistency_band);
      v.error = buf;
    }
  }
  if (!v.pass && device.size() > 1 && device.back() > device.front() &&
      reference.back() < reference.front()) {
    v.error += " (diverging: device loss rises while the reference falls)";
  }
  return v;
}

}  // namespace ts::engine
