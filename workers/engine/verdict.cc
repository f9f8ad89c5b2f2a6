#include "workers/engine/verdict.h"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace ts::engine {

const std::vector<Verdict>& AllVerdicts() {
  static const std::vector<Verdict> kAll = {
      Verdict::kSkipped,       Verdict::kLoadFail,     Verdict::kRefFail,
      Verdict::kRefNondeterministic, Verdict::kCrash, Verdict::kTimeout,
      Verdict::kUnsupportedDtype, Verdict::kDeviceError, Verdict::kOom,
      Verdict::kCompileFail,   Verdict::kCompileTimeout, Verdict::kFailAccuracy,
      Verdict::kPass};
  return kAll;
}

const char* VerdictName(Verdict s) {
  switch (s) {
    case Verdict::kSkipped: return "skipped";
    case Verdict::kLoadFail: return "load_fail";
    case Verdict::kRefFail: return "ref_fail";
    case Verdict::kRefNondeterministic: return "ref_nondeterministic";
    case Verdict::kCrash: return "crash";
    case Verdict::kTimeout: return "timeout";
    case Verdict::kUnsupportedDtype: return "unsupported_dtype";
    case Verdict::kDeviceError: return "device_error";
    case Verdict::kOom: return "oom";
    case Verdict::kCompileFail: return "compile_fail";
    case Verdict::kCompileTimeout: return "compile_timeout";
    case Verdict::kFailAccuracy: return "fail_accuracy";
    case Verdict::kPass: return "pass";
  }
  return "unknown";
}

std::optional<Verdict> VerdictFromName(const std::string& name) {
  for (Verdict s : AllVerdicts()) {
    if (name == VerdictName(s)) return s;
  }
  return std::nullopt;
}

namespace {

// JSON has no NaN/Inf: encode them as null so consumers see "no number" rather than garbage.
nlohmann::json Num(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

nlohmann::json Nums(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(Num(x));
  return a;
}

nlohmann::json OptNum(const std::optional<double>& v) { return v ? Num(*v) : nullptr; }

nlohmann::json PerfJson(const ModePerf& p) {
  nlohmann::json top = nlohmann::json::array();
  for (const OpTimeShare& o : p.top_ops) {
    top.push_back({{"op", o.op}, {"us", Num(o.us)}, {"share", Num(o.share)}});
  }
  return {{"device_us", Num(p.device_us)},
          {"flops", Num(p.flops)},
          {"bytes", Num(p.bytes)},
          {"mfu", Num(p.mfu)},
          {"launches", p.launches},
          {"fallback_us", Num(p.fallback_us)},
          {"transfer_bytes", Num(p.transfer_bytes)},
          {"peak_device_bytes", p.peak_device_bytes},
          {"top_ops", top},
          {"speedup", OptNum(p.speedup)},
          {"compression", OptNum(p.compression)}};
}

nlohmann::json ModeJson(const std::string& mode, const ModeResult& m) {
  nlohmann::json j;
  j["status"] = VerdictName(m.status);
  j["error"] = m.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.error);
  j["ms"] = Num(m.ms);
  if (m.accuracy) {
    const Accuracy& a = *m.accuracy;
    j["rmse_ratio"] = Num(a.rmse_ratio);
    j["rmse_device"] = Num(a.rmse_device);
    j["rmse_reference"] = Num(a.rmse_reference);
    j["rmse_vs_declared"] = Num(a.rmse_vs_declared);
    j["max_abs_err"] = Num(a.max_abs_err);
    j["max_rel_err"] = Num(a.max_rel_err);
    j["cosine"] = Num(a.cosine);
    j["allclose"] = a.allclose;
  } else if (mode != "train") {
    j["rmse_ratio"] = nullptr;
    j["max_abs_err"] = nullptr;
    j["cosine"] = nullptr;
  }
  if (mode == "compile") {
    j["graph_breaks"] = m.graph_breaks;
    j["break_reasons"] = m.break_reasons;
    j["device_segments"] = m.device_segments;
    j["graph_nodes"] = m.graph_nodes;
    j["compile_ms"] = Num(m.compile_ms);
    j["compile_wall_ms"] = Num(m.compile_wall_ms);
    j["first_run_ms"] = Num(m.first_run_ms);
  }
  if (mode == "train") {
    j["loss_reference"] = Nums(m.loss_reference);
    j["loss_device"] = Nums(m.loss_device);
    j["loss_declared"] = Nums(m.loss_declared);
    j["loss_band"] = Nums(m.loss_band);
    j["max_loss_gap_ratio"] = Num(m.max_loss_gap_ratio);
    j["grad_rmse_ratio"] = m.grad_rmse_ratio ? Num(*m.grad_rmse_ratio) : nullptr;
    j["grad_worst_param"] =
        m.grad_worst_param.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.grad_worst_param);
  }
  j["audited"] = m.audited;
  nlohmann::json suspects = nlohmann::json::array();
  for (const Suspect& s : m.suspects) {
    suspects.push_back({{"op", s.op}, {"shapes", s.shapes}, {"dtype", s.dtype},
                        {"ratio", Num(s.ratio)}, {"calls", s.calls},
                        {"total_calls", s.total_calls}});
  }
  j["suspects"] = suspects;
  nlohmann::json unchecked = nlohmann::json::array();
  for (const UncheckedOp& u : m.unchecked) {
    unchecked.push_back({{"op", u.op}, {"calls", u.calls}, {"error", u.error}});
  }
  j["unchecked"] = unchecked;
  j["perf"] = m.perf ? PerfJson(*m.perf) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json OpsJson(const std::map<std::string, OpUse>& ops) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [op, use] : ops) j[op] = {{"calls", use.calls}, {"ms", Num(use.ms)}};
  return j;
}

}  // namespace

nlohmann::json ToJson(const ModelResult& r) {
  nlohmann::json j;
  j["model"] = {{"arch", r.arch}, {"task", r.task}, {"family", r.family},
                {"config_hash", r.config_hash}};
  nlohmann::json modes = nlohmann::json::object();
  for (const auto& [name, m] : r.modes) modes[name] = ModeJson(name, m);
  j["modes"] = modes;
  j["op_coverage"] = {{"distinct_ops", r.op_coverage.distinct_ops},
                      {"native_ops", r.op_coverage.native_ops},
                      {"ratio", Num(r.op_coverage.ratio)},
                      {"call_ratio", Num(r.op_coverage.call_ratio)}};
  j["fallback_ops"] = OpsJson(r.fallback_ops);
  j["native_ops"] = OpsJson(r.native_ops);
  nlohmann::json t = nlohmann::json::object();
  for (const auto& [k, v] : r.timings_ms) t[k] = Num(v);
  j["timings_ms"] = t;
  j["peak_device_bytes"] = r.peak_device_bytes;
  if (!r.tiny_config.is_null()) j["tiny_config"] = r.tiny_config;
  if (!r.references.source.empty()) {
    j["references"] = {{"source", r.references.source},
                       {"key_digest", r.references.key_digest},
                       {"content_digest", r.references.content_digest},
                       {"warning", r.references.warning}};
  }
  return j;
}

std::string ToText(const ModelResult& r) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(3);
  o << r.arch << " (" << r.task << ", " << r.family << ")\n";
  for (const auto& [name, m] : r.modes) {
    o << "  " << std::left << std::setw(8) << name << std::setw(20) << VerdictName(m.status);
    if (m.accuracy) o << " rmse_ratio=" << m.accuracy->rmse_ratio << " cos=" << m.accuracy->cosine;
    if (name == "compile" && m.status != Verdict::kSkipped) {
      o << " breaks=" << m.graph_breaks << " compile_ms=" << m.compile_ms;
    }
    if (name == "train" && !m.loss_device.empty()) {
      o << " loss " << m.loss_reference.front() << "->" << m.loss_reference.back() << " (device "
        << m.loss_device.back() << ")";
    }
    o << " [" << m.ms << " ms]";
    if (m.perf) {
      o << "\n           device " << m.perf->device_us << " us, mfu " << std::defaultfloat
        << m.perf->mfu << std::fixed << ", " << m.perf->launches << " launches";
      if (m.perf->speedup) o << ", speedup " << *m.perf->speedup << "x";
      for (const OpTimeShare& t : m.perf->top_ops) {
        o << "\n             " << std::setw(36) << t.op << std::right << std::setw(12) << t.us
          << " us " << std::setw(6) << std::setprecision(1) << 100 * t.share << "%"
          << std::setprecision(3) << std::left;
      }
    }
    if (!m.error.empty()) o << "\n           " << m.error;
    for (const Suspect& s : m.suspects) {
      o << "\n           suspect " << s.op << " " << s.shapes << " " << s.dtype << " ratio "
        << std::defaultfloat << s.ratio << std::fixed << " (" << s.calls << "/"
        << s.total_calls << " calls)";
    }
    for (const UncheckedOp& u : m.unchecked) {
      o << "\n           unchecked " << u.op << " (" << u.calls << " calls: " << u.error << ")";
    }
    o << "\n";
  }
  o << "  op coverage " << r.op_coverage.native_ops << "/" << r.op_coverage.distinct_ops << " ("
    << 100 * r.op_coverage.ratio << "%, calls " << 100 * r.op_coverage.call_ratio << "%)\n";
  if (!r.fallback_ops.empty()) {
    o << "  fallback:";
    for (const auto& [op, use] : r.fallback_ops) o << " " << op << "x" << use.calls;
    o << "\n";
  }
  return o.str();
}

}  // namespace ts::engine
