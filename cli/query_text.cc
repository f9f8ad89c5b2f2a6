#include "cli/query_text.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cctype>
#include <ctime>
#include <map>

#include <google/protobuf/util/json_util.h>

#include "proto/names.h"

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

long long L(int64_t v) { return static_cast<long long>(v); }

std::string Time(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  const std::time_t secs = static_cast<std::time_t>(t.seconds());
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm);
  return buf;
}

// "aten::gelu x1.84, 3/12 calls, [2,8,64] float32" (1e300: a non-finite mismatch).
std::string SuspectText(const pb::Suspect& s) {
  const std::string ratio =
      s.ratio() >= 1e300 ? std::string("non-finite") : Format("x%.3g", s.ratio());
  return Fit(Format("%s %s, %lld/%lld calls, ", s.op().c_str(), ratio.c_str(), L(s.calls()),
                    L(s.total_calls())) +
                 s.shapes() + " " + s.dtype(),
             79);
}

std::string NextPage(const std::string& token) {
  return token.empty() ? std::string() : "(more: --page-token " + token + ")\n";
}

// An alert's modes, short: "eager", "eager,compile", "all" (every mode); the alert's own mode
// for a record without modes.
std::string ModesText(const pb::Alert& a) {
  if (a.modes_size() == 0) return proto::ModeName(a.mode());
  if (a.modes_size() == 3) return "all";
  std::string out;
  for (int m : a.modes()) out += (out.empty() ? "" : ",") + proto::ModeName(static_cast<pb::Mode>(m));
  return out;
}

std::string Ids(const google::protobuf::RepeatedField<int64_t>& ids) {
  if (ids.empty()) return "-";
  std::string out;
  for (int64_t id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

}  // namespace

std::string AlertsText(const pb::ListAlertsResponse& r) {
  std::string out = Format("%-6s %-12s %-8s %-13s %-27s %6s %7s %6s %6s %5s\n", "Alert", "State",
                           "Severity", "Modes", "Cause", "Models", "Classes", "First", "Last",
                           "Clean");
  for (const auto& a : r.alerts()) {
    out += Format("%-6lld %-12s %-8s %-13s %-27s %6d %7d %6lld %6lld %5d\n", L(a.alert_id()),
                  a.state().c_str(), a.severity().c_str(), ModesText(a).c_str(),
                  Fit(a.cause_kind() + " " + a.cause_text(), 27).c_str(), a.models_size(),
                  a.archs_size(), L(a.first_sweep_id()), L(a.last_sweep_id()), a.clean_sweeps());
    std::string models;
    for (int k = 0; k < a.models_size() && k < 5; ++k) {
      models += (k ? ", " : "") + a.models(k).model_id();
    }
    if (a.models_size() > 5) models += Format(", ... (%d more)", a.models_size() - 5);
    out += "       models: " + Fit(models, 86) + "\n";
    for (int k = 0; k < a.models_size() && k < 5; ++k) {
      if (a.models(k).detail().empty()) continue;  // drift: each model's step
      out += "         " + Fit(a.models(k).model_id() + ": " + a.models(k).detail(), 91) + "\n";
    }
    std::string archs;
    for (const auto& arch : a.archs()) archs += (archs.empty() ? "" : ", ") + arch;
    out += "       classes: " + Fit(archs, 85) + "\n";
    if (!a.ack_note().empty()) {
      out += "       ack by " + a.ack_by() + " at " + Time(a.ack_at()) + ": " +
             Fit(a.ack_note(), 60) + "\n";
    }
  }
  out += NextPage(r.next_page_token());
  return out;
}

std::string DetectText(const pb::DetectRegressionsResponse& r) {
  std::string out = Format(
      "sweep %lld vs %lld (line %s): %lld flips: %lld deterministic, %lld flaky, %lld pending, "
      "%lld quarantined\n",
      L(r.sweep_id()), L(r.baseline_sweep_id()), r.line().c_str(), L(r.flips()),
      L(r.deterministic()), L(r.flaky()), L(r.pending()), L(r.quarantined()));
  out += Format("group tests: %lld, %d fired\n", L(r.tests()), r.fired_size());
  for (const auto& t : r.fired()) {
    out += Format("  %-4s %-32s %-7s %lld flips, %lld fixes, p %.3g%s; pass %.1f%% vs median "
                  "%.1f%%%s\n",
                  t.kind().c_str(), Fit(t.group(), 32).c_str(), proto::ModeName(t.mode()).c_str(),
                  L(t.flips()), L(t.fixes()), t.p(), t.mcnemar() ? " (McNemar)" : "", t.rate(),
                  t.median(), t.drop() ? " (drop)" : "");
  }
  out += "alerts opened: " + Ids(r.opened()) + "; reopened: " + Ids(r.reopened()) +
         "; updated: " + Ids(r.updated()) + "; resolved: " + Ids(r.resolved()) + "\n";
  out += Format("quarantine: %lld new, %lld released\n", L(r.newly_quarantined()),
                L(r.released()));
  out += Format("drift (passing, stepped up; warnings): %d\n", r.drift_size());
  for (const auto& d : r.drift()) {
    out += Format("  %-40s %-7s %-10s %.3g -> %.3g from sweep %lld\n",
                  Fit(d.model_id(), 40).c_str(), proto::ModeName(d.mode()).c_str(),
                  d.metric().c_str(), d.before(), d.after(), L(d.first_sweep_id()));
  }
  return out;
}

std::string QuarantineText(const pb::ListQuarantineResponse& r) {
  std::string out = Format("%-48s %-7s %-28s %6s %6s\n", "Model", "Mode", "Class", "Since",
                           "Passes");
  for (const auto& e : r.entries()) {
    out += Format("%-48s %-7s %-28s %6lld %4d/3\n", Fit(e.model_id(), 48).c_str(),
                  proto::ModeName(e.mode()).c_str(), Fit(e.arch(), 28).c_str(),
                  L(e.since_sweep_id()), e.clean_passes());
  }
  out += Format("%d quarantined (flaky twice in 5 sweeps; 3 passes in a row release)\n",
                r.entries_size());
  return out;
}

std::string AlertsUpdateText(const pb::AlertsUpdate& u) {
  pb::ListAlertsResponse r;
  *r.mutable_alerts() = u.alerts();
  return Format("-- %s: %d alert%s\n", u.snapshot() ? "snapshot" : "changed", u.alerts_size(),
                u.alerts_size() == 1 ? "" : "s") +
         AlertsText(r);
}

std::string MessageJson(const google::protobuf::Message& m, bool multiline) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = multiline;
  o.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

std::string Fit(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  if (width == 0) return "";
  return s.substr(0, width - 1) + "~";
}

std::string SweepsText(const pb::ListSweepsResponse& r) {
  std::string out = Format("%-6s %-20s %-9s %-12s %-16s %9s %9s %8s %5s\n", "Sweep", "Name",
                           "State", "Profile", "Created (UTC)", "Expected", "Recorded",
                           "Failures", "Base");
  for (const auto& s : r.sweeps()) {
    out += Format("%-6lld %-20s %-9s %-12s %-16s %9lld %9lld %8lld %5s\n", L(s.sweep_id()),
                  Fit(s.name(), 20).c_str(), s.state().c_str(), Fit(s.profile(), 12).c_str(),
                  Time(s.created_at()).c_str(), L(s.models_expected()), L(s.models_recorded()),
                  L(s.failures()),
                  s.baseline_sweep_id() ? std::to_string(s.baseline_sweep_id()).c_str() : "-");
  }
  return out + NextPage(r.next_page_token());
}

namespace {

// A mode's device time and the ops it went to (`touchstone model ID`).
std::string PerfText(const pb::Perf& p) {
  std::string out = Format("           device %.4g us, mfu %.3g, %lld launches, %.4g GFLOP",
                           p.device_us(), p.mfu(), L(p.launches()), p.flops() / 1e9);
  if (p.fallback_us() > 0) out += Format(", host %.4g us", p.fallback_us());
  if (std::isfinite(p.speedup())) out += Format(", speedup %.2fx", p.speedup());
  if (std::isfinite(p.compression())) out += Format(", memory x%.2f", p.compression());
  out += "\n";
  for (const auto& t : p.top_ops()) {
    out += Format("             %-40s %10.4g us %5.1f%%\n", Fit(t.op(), 40).c_str(), t.us(),
                  100 * t.share());
  }
  return out;
}

}  // namespace

std::string ModelText(const pb::ModelHistory& h) {
  std::string out = Format("%s  (%s, %s, %s)\n", h.model_id().c_str(), h.task().c_str(),
                           h.arch().c_str(), h.family().c_str());
  for (const auto& rec : h.sweeps()) {
    const pb::ModelResult& r = rec.result();
    out += Format("sweep %lld %s (%s, %s): opcov %.1f%%, %.0f ms\n", L(rec.sweep().sweep_id()),
                  Fit(rec.sweep().name(), 24).c_str(), rec.sweep().profile().c_str(),
                  Time(rec.sweep().created_at()).c_str(), 100.0 * r.opcov_ratio(), r.total_ms());
    for (const auto& m : r.modes()) {
      const std::string mode = proto::ModeName(m.mode());
      auto conf = rec.confirmation().find(mode);
      std::string line =
          Format("  %-8s %-22s", mode.c_str(), proto::VerdictName(m.status()).c_str());
      if (m.has_accuracy() && std::isfinite(m.rmse_ratio())) {
        line += Format(" rmse x%.2f", m.rmse_ratio());
      }
      if (m.graph_breaks() > 0) line += Format(" breaks %d", m.graph_breaks());
      if (m.loss_device_size() > 0) line += Format(" loss gap x%.2f", m.max_loss_gap_ratio());
      if (std::isfinite(m.grad_rmse_ratio())) line += Format(" grad x%.2f", m.grad_rmse_ratio());
      if (m.audited()) line += Format(" audited (%d suspects)", m.suspects_size());
      if (conf != rec.confirmation().end() && !conf->second.empty()) {
        line += " [" + conf->second + "]";
      }
      out += line + "\n";
      if (!m.error().empty()) out += "           " + Fit(m.error(), 88) + "\n";
      for (const auto& reason : m.break_reasons()) {
        out += "           break: " + Fit(reason, 81) + "\n";
      }
      if (!m.grad_worst_param().empty()) {
        out += "           worst gradient: " + Fit(m.grad_worst_param(), 72) + "\n";
      }
      for (const auto& sus : m.suspects()) out += "           suspect: " + SuspectText(sus) + "\n";
      if (m.has_perf()) out += PerfText(m.perf());
    }
    std::string fallback;
    for (const auto& op : r.ops()) {
      if (!op.native()) fallback += Format(" %s x%lld", op.op().c_str(), L(op.calls()));
    }
    if (!fallback.empty()) out += "  fallback:" + Fit(fallback, 88) + "\n";
  }
  return out;
}

namespace {
nlohmann::json NumOrNull(double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; }

nlohmann::json LineJson(const pb::SummaryRow& r, const std::string& name) {
  return {
      {"task", name},
      {"models", r.models()},
      {"eager_pct", r.eager_pct()},
      {"opcov_pct", r.opcov_pct()},
      {"compile_pct", r.compile_pct()},
      {"train_pct", r.train_pct()},
      {"perf_models", r.perf_models()},
      {"geomean_speedup", r.has_geomean_speedup() ? NumOrNull(r.geomean_speedup()) : nullptr},
      {"median_mfu", r.has_median_mfu() ? NumOrNull(r.median_mfu()) : nullptr},
      {"mean_compression", r.has_mean_compression() ? NumOrNull(r.mean_compression()) : nullptr}};
}
}  // namespace

nlohmann::json SummaryJson(const pb::Summary& s) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : s.rows()) rows.push_back(LineJson(r, r.group()));
  nlohmann::json cw = LineJson(s.class_weighted(), "Class-weighted");
  cw["classes"] = s.classes();
  std::map<std::string, int64_t> statuses;
  for (const auto& m : s.total().modes()) {
    for (const auto& c : m.statuses()) {
      if (c.status() != "skipped") statuses[c.status()] += c.models();
    }
  }
  return {{"tasks", rows},
          {"total", LineJson(s.total(), "Total")},
          {"class_weighted", cw},
          {"statuses", statuses}};
}

}  // namespace ts::cli
