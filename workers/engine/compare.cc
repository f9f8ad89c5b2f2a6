#include "workers/engine/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

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
  // The noise at step k is the largest gap between the declared and the reference curves up to
  // k, not the gap at k alone: the two curves can cross at a step (a gap near zero there) while
  // the process still amplifies any rounding difference as much as at the steps before, so an
  // honest device that differs from its emulation only by accumulation order can land well off
  // both curves at exactly that step.
  double noise = 0.0;
  for (size_t k = 0; k < device.size(); ++k) {
    noise = std::max(noise, std::abs(reference_declared[k] - reference[k]));
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
    // Past step 1 the device's drift from its own emulation is amplified chaos, not signal
    // (compare.h): only the band applies there.
    const bool inconsistent = k < kLossConsistencySteps && gap > noise + floor &&
                              gap_declared > consistency_band;
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

namespace {

// The gradient of `name` in `grads` in double on the CPU, or an undefined tensor.
at::Tensor GradOf(const GradMap& grads, const std::string& name) {
  auto it = grads.find(name);
  if (it == grads.end() || !it->second.defined()) return at::Tensor();
  return it->second.detach().to(at::kCPU).to(at::kDouble);
}

// Whether `name`'s device gradient is defined and equal to its defined declared one, bit for bit.
bool SameAsDeclared(const GradMap& device, const GradMap& declared, const std::string& name) {
  auto dev_it = device.find(name), decl_it = declared.find(name);
  return dev_it != device.end() && decl_it != declared.end() && dev_it->second.defined() &&
         decl_it->second.defined() &&
         dev_it->second.scalar_type() == decl_it->second.scalar_type() &&
         at::equal(dev_it->second.cpu(), decl_it->second.cpu());
}

struct ParamFailure {
  std::string name;
  double severity;  // how far over the rule (> 1)
  double ratio;
  std::string why;
};

// One parameter's gradients judged unit by unit: the rows of `views` (R units of C elements
// each). Every row is judged with the rule of the outputs, scaled by its fp64 gradient's RMS.
struct UnitJudgement {
  double ratio = NAN;  // worst rmse ratio among the units judged; NaN: none judged
  double severity = 0;  // worst (error / allowed) among failing units; 0: none fails
  int64_t worst_unit = -1;
  bool consistency = false;  // the worst failure is the declared-numerics consistency rule
  double err = 0, noise = 0, cons = 0;  // of the worst failure, relative to its gradient
};

void JudgeUnits(const at::Tensor& dev, const at::Tensor& ref, const at::Tensor& gold,
                const at::Tensor& decl, const Tolerance& tol, UnitJudgement* out) {
  auto rms = [](const at::Tensor& d) { return d.pow(2).mean(1).sqrt(); };
  const at::Tensor scale = rms(gold), noise = rms(decl - gold), err = rms(dev - gold),
                   cons = rms(dev - decl);
  const at::Tensor judged = (scale > 0) & (noise <= kGradNoiseDominated * scale);
  if (!judged.any().item<bool>()) return;
  const at::Tensor floor = tol.tol / 10 * scale;
  const at::Tensor allclose =
      ((dev - ref).abs() <= tol.tol * (scale.unsqueeze(1) + ref.abs())).all(1);
  const at::Tensor allowed = tol.multiplier * noise + floor;
  const at::Tensor allowed_cons = kConsistency * noise + floor;
  const at::Tensor ratio = at::where(noise > 0, err / noise, at::where(err > 0, INFINITY, 1.0));
  const double worst = at::where(judged, ratio, at::zeros_like(ratio)).max().item<double>();
  if (std::isnan(out->ratio) || worst > out->ratio) out->ratio = worst;
  const at::Tensor failing = judged & ~allclose;
  const at::Tensor over = at::where(failing, err / allowed, at::zeros_like(err));
  const at::Tensor inconsistent = at::where(failing & (err > noise), cons / allowed_cons,
                                            at::zeros_like(err));
  const at::Tensor severity = at::maximum(over, inconsistent);
  const int64_t unit = severity.argmax().item<int64_t>();
  const double sev = severity[unit].item<double>();
  if (sev <= 1 || sev <= out->severity) return;
  const double s = scale[unit].item<double>();
  out->severity = sev;
  out->worst_unit = unit;
  out->consistency = over[unit].item<double>() <= 1;
  out->err = err[unit].item<double>() / s;
  out->noise = noise[unit].item<double>() / s;
  out->cons = cons[unit].item<double>() / s;
}

// "row 3 of 64: 2.9% from the declared numerics' gradient (noise 0.61%, allowed 0.31%)"
std::string DescribeUnit(const char* axis, int64_t units, const UnitJudgement& u,
                         const Tolerance& tol) {
  char buf[200];
  if (u.consistency) {
    std::snprintf(buf, sizeof(buf),
                  "%s %lld of %lld: %.3g%% from the declared numerics' gradient (noise %.3g%%)",
                  axis, static_cast<long long>(u.worst_unit), static_cast<long long>(units),
                  100 * u.cons, 100 * u.noise);
  } else {
    std::snprintf(buf, sizeof(buf), "%s %lld of %lld: error %.3g%% > %.3g x noise %.3g%%", axis,
                  static_cast<long long>(u.worst_unit), static_cast<long long>(units),
                  100 * u.err, tol.multiplier, 100 * u.noise);
  }
  return buf;
}

// One parameter's verdict: judged as a whole when it is a vector, else row by row (dim 0) and
// column by column (last dim), so that an error in the slice of a fused weight that one op
// feeds (the query columns of a fused QKV projection) is not averaged away by the others.
// False with `why` when it fails; `ratio` is NaN when no unit was judged (noise-dominated).
bool JudgeParam(const at::Tensor& dev, const at::Tensor& ref, const at::Tensor& gold,
                const at::Tensor& decl, const Tolerance& tol, double* ratio, double* severity,
                std::string* why) {
  *ratio = NAN;
  *severity = 0;
  if (!dev.defined()) {
    *why = "no gradient on the device";
    *severity = INFINITY;
    return false;
  }
  if (!at::isfinite(dev).all().item<bool>()) {
    *why = "NaN/Inf";
    *ratio = *severity = INFINITY;
    return false;
  }
  struct Axis {
    const char* name;
    at::Tensor (*view)(const at::Tensor&);
  };
  static const Axis kWhole = {"whole", [](const at::Tensor& t) { return t.reshape({1, -1}); }};
  static const Axis kRows = {"row", [](const at::Tensor& t) { return t.reshape({t.size(0), -1}); }};
  static const Axis kColumns = {
      "column", [](const at::Tensor& t) { return t.reshape({-1, t.size(-1)}).t(); }};
  std::vector<Axis> axes = {kWhole};
  if (gold.dim() >= 2) axes = {kRows, kColumns};
  UnitJudgement worst;
  std::string worst_why;
  for (const Axis& axis : axes) {
    UnitJudgement u = worst;
    JudgeUnits(axis.view(dev), axis.view(ref), axis.view(gold), axis.view(decl), tol, &u);
    worst.ratio = u.ratio;
    if (u.severity > worst.severity) {
      worst = u;
      worst_why = DescribeUnit(axis.name, axis.view(gold).size(0), u, tol);
    }
  }
  *ratio = worst.ratio;
  *severity = worst.severity;
  if (worst.severity == 0) return true;
  *why = worst_why;
  return false;
}

}  // namespace

GradientVerdict CompareGradients(const GradMap& device, const GradMap& cpu_fp32,
                                 const std::function<const GradMap&()>& golden_fp64,
                                 const GradMap& cpu_declared, const Tolerance& tol) {
  GradientVerdict v;
  std::vector<ParamFailure> failures;
  const GradMap* golden = nullptr;  // asked for on the first parameter that needs it
  for (const auto& [name, g] : cpu_declared) {
    if (!g.defined()) continue;  // no gradient reaches it
    if (SameAsDeclared(device, cpu_declared, name)) {
      // Bit for bit the declared numerics' gradient: its error is the reference's (ratio 1),
      // and it passes every rule. The usual case of an honest device in this simulator.
      ++v.judged;
      if (v.worst_param.empty() || v.worst_ratio < 1) {
        v.worst_ratio = std::max(v.worst_ratio, 1.0);
        v.worst_param = name;
      }
      continue;
    }
    if (golden == nullptr) golden = &golden_fp64();
    const at::Tensor gold = GradOf(*golden, name);
    const at::Tensor ref = GradOf(cpu_fp32, name), decl = GradOf(cpu_declared, name);
    if (!gold.defined() || !ref.defined()) {  // no fp64 or fp32 reference to judge it by
      if (v.unreferenced++ == 0) v.unreferenced_param = name;
      continue;
    }
    double ratio = NAN, severity = 0;
    std::string why;
    const bool ok =
        JudgeParam(GradOf(device, name), ref, gold, decl, tol, &ratio, &severity, &why);
    if (ok && std::isnan(ratio)) {
      ++v.noise_dominated;
      continue;
    }
    ++v.judged;
    if (!(ratio <= v.worst_ratio)) {  // NaN and Inf count as worst
      v.worst_ratio = ratio;
      v.worst_param = name;
    }
    if (!ok) failures.push_back({name, severity, ratio, why});
  }
  if (failures.empty()) return v;
  v.pass = false;
  std::stable_sort(failures.begin(), failures.end(), [](const ParamFailure& a,
                                                        const ParamFailure& b) {
    return a.severity > b.severity;
  });
  v.worst_param = failures.front().name;
  v.worst_ratio = failures.front().ratio;
  std::ostringstream o;
  o << "grad: ";
  constexpr size_t kNamed = 3;
  for (size_t i = 0; i < failures.size() && i < kNamed; ++i) {
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.3g", failures[i].ratio);
    o << (i ? "; " : "") << failures[i].name << ", ratio " << ratio;
  }
  if (failures.size() > kNamed) o << " (+" << failures.size() - kNamed << " more)";
  o << " (" << failures.front().name << " " << failures.front().why << ")";
  v.error = o.str();
  return v;
}

void ApplyGradientVerdict(const GradientVerdict& g, Verdict* status, std::string* error) {
  std::string unjudged;
  if (g.unreferenced > 0) {
    unjudged = "grad: no fp64 reference gradient for " + std::to_string(g.unreferenced) +
               " parameter(s) whose device gradient differs from the declared numerics' (" +
               g.unreferenced_param + (g.unreferenced > 1 ? ", ..." : "") + "): not judged";
  }
  const auto note = [&](const std::string& more) {
    if (!more.empty()) *error = error->empty() ? more : *error + "; " + more;
  };
  if (!g.pass) {
    *status = Verdict::kFailAccuracy;
    note(g.error);
    note(unjudged);
    return;
  }
  if (unjudged.empty()) return;
  if (*status != Verdict::kPass) {
    note(unjudged);
    return;
  }
  *status = Verdict::kRefFail;
  *error = unjudged;
}

GradientVerdict CompareGradients(const GradMap& device, const GradMap& cpu_fp32,
                                 const GradMap& golden_fp64, const GradMap& cpu_declared,
                                 const Tolerance& tol) {
  return CompareGradients(
      device, cpu_fp32, [&]() -> const GradMap& { return golden_fp64; }, cpu_declared, tol);
}

}  // namespace ts::engine
