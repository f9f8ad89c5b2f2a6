#include "cli/query_text.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cctype>
#include <ctime>
#include <map>

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

std::string Pct(double v) { return std::isfinite(v) ? Format("%.1f", v) : std::string("-"); }

std::string SummaryLine(const pb::SummaryRow& r, const std::string& name) {
  return Format("%-44s %7lld %7s %7s %8s %7s\n", Fit(name, 44).c_str(), L(r.models()),
                Pct(r.eager_pct()).c_str(), Pct(r.opcov_pct()).c_str(),
                Pct(r.compile_pct()).c_str(), Pct(r.train_pct()).c_str());
}

const char* GroupName(pb::GroupBy g) {
  switch (g) {
    case pb::GROUP_BY_FAMILY: return "Family";
    case pb::GROUP_BY_ARCH: return "Class";
    default: return "Task";
  }
}

std::string NextPage(const std::string& token) {
  return token.empty() ? std::string() : "(more: --page-token " + token + ")\n";
}

}  // namespace

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

std::string SummaryText(const pb::Summary& s) {
  std::string out = Format("%-44s %7s %7s %7s %8s %7s\n", GroupName(s.group_by()), "Models",
                           "Eager %", "OpCov %", "Compile %", "Train %");
  for (const auto& r : s.rows()) out += SummaryLine(r, r.group());
  out += SummaryLine(s.total(), "Total");
  out += SummaryLine(s.class_weighted(),
                     "Class-weighted (" + std::to_string(s.classes()) + " classes)");
  std::map<std::string, int64_t> statuses;
  for (const auto& m : s.total().modes()) {
    for (const auto& c : m.statuses()) {
      if (c.status() != "skipped") statuses[c.status()] += c.models();
    }
  }
  out += "statuses:";
  for (const auto& [name, n] : statuses) out += " " + name + "=" + std::to_string(n);
  return out + "\n";
}

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
      std::string line = Format("  %-8s %-22s", mode.c_str(), proto::VerdictName(m.status()).c_str());
      if (m.has_accuracy() && std::isfinite(m.rmse_ratio())) {
        line += Format(" rmse x%.2f", m.rmse_ratio());
      }
      if (m.graph_breaks() > 0) line += Format(" breaks %d", m.graph_breaks());
      if (m.loss_device_size() > 0) line += Format(" loss gap x%.2f", m.max_loss_gap_ratio());
      if (conf != rec.confirmation().end() && !conf->second.empty()) {
        line += " [" + conf->second + "]";
      }
      out += line + "\n";
      if (!m.error().empty()) out += "           " + Fit(m.error(), 88) + "\n";
      for (const auto& reason : m.break_reasons()) out += "           break: " + Fit(reason, 81) + "\n";
    }
    std::string fallback;
    for (const auto& op : r.ops()) {
      if (!op.native()) fallback += Format(" %s x%lld", op.op().c_str(), L(op.calls()));
    }
    if (!fallback.empty()) out += "  fallback:" + Fit(fallback, 88) + "\n";
  }
  return out;
}

std::string OpDemandText(const pb::OpDemandResponse& r) {
  std::string out = Format("sweep %lld, %s: %lld models, %lld run natively\n", L(r.sweep_id()),
                           proto::ModeName(r.mode()).c_str(), L(r.models()),
                           L(r.models_native()));
  out += Format("%-36s %8s %8s %7s %7s %10s %10s\n", "Op", "Blocked", "Alone", "Fallbk",
                "Breaks", "Calls", "Fallbk ms");
  for (const auto& o : r.ops()) {
    out += Format("%-36s %8lld %8lld %7lld %7lld %10lld %10.1f\n", Fit(o.op(), 36).c_str(),
                  L(o.models_blocked()), L(o.blocks_alone()), L(o.models_fallback()),
                  L(o.models_break()), L(o.fallback_calls()), o.fallback_ms());
  }
  return out + NextPage(r.next_page_token());
}

std::string GraphBreaksText(const pb::GraphBreaksResponse& r) {
  std::string out = Format("sweep %lld: %lld models with graph breaks\n", L(r.sweep_id()),
                           L(r.models_with_breaks()));
  out += Format("%-44s %7s %7s  %s\n", "Reason", "Models", "Breaks", "Examples");
  for (const auto& b : r.reasons()) {
    std::string examples;
    for (const auto& m : b.example_models()) examples += (examples.empty() ? "" : ", ") + m;
    out += Format("%-44s %7lld %7lld  %s\n", Fit(b.reason(), 44).c_str(), L(b.models()),
                  L(b.breaks()), Fit(examples, 38).c_str());
  }
  return out + NextPage(r.next_page_token());
}

std::string CompareText(const pb::CompareSweepsResponse& r) {
  std::string out = Format(
      "sweep %lld -> %lld: %lld models in both, %lld regressed, %lld fixed, %lld appeared, "
      "%lld disappeared\n",
      L(r.base_sweep_id()), L(r.head_sweep_id()), L(r.common_models()), L(r.regressed()),
      L(r.fixed()), L(r.appeared()), L(r.disappeared()));
  if (r.groups_size() > 0) {
    out += Format("%-44s %7s %9s %9s %9s %9s\n", "Group", "Models", "Eager pp", "OpCov pp",
                  "Compile pp", "Train pp");
    for (const auto& g : r.groups()) {
      out += Format("%-44s %7lld %+9.1f %+9.1f %+10.1f %+9.1f\n", Fit(g.group(), 44).c_str(),
                    L(g.head().models()), g.eager_delta(), g.opcov_delta(), g.compile_delta(),
                    g.train_delta());
    }
  }
  if (r.changes_size() > 0) {
    out += Format("%-44s %-12s %-8s %-15s %-15s\n", "Model", "Change", "Mode", "Base", "Head");
  }
  for (const auto& c : r.changes()) {
    std::string kind = pb::ModelChange::Kind_Name(c.kind()).substr(5);  // KIND_REGRESSED
    for (auto& ch : kind) ch = static_cast<char>(std::tolower(ch));
    const bool flip = c.kind() == pb::ModelChange::KIND_REGRESSED ||
                      c.kind() == pb::ModelChange::KIND_FIXED;
    std::string line = Format("%-44s %-12s %-8s %-15s %-15s", Fit(c.model_id(), 44).c_str(),
                              kind.c_str(), flip ? proto::ModeName(c.mode()).c_str() : "-",
                              Fit(c.base_status(), 15).c_str(), Fit(c.head_status(), 15).c_str());
    if (!c.confirmation().empty()) line += " " + c.confirmation();
    out += line + "\n";
  }
  return out + NextPage(r.next_page_token());
}

std::string GateText(const pb::GateResponse& r) {
  std::string out = r.pass() ? "gate: PASS" : "gate: FAIL";
  out += Format(" (%d checks, %d failed; sweep %s)\n", r.checks_size(), r.failures_size(),
                r.sweep_state().c_str());
  for (const auto& f : r.failures()) {
    std::string line = Format("  FAIL %-20s %-28s measured %-9.6g limit %-9.6g",
                              f.rule().c_str(), Fit(f.group().empty() ? "(all)" : f.group(), 28).c_str(),
                              f.measured(), f.limit());
    out += line + "\n";
    if (!f.detail().empty()) out += "       " + Fit(f.detail(), 92) + "\n";
  }
  if (r.flaky_size() > 0 || r.pending_size() > 0) {
    out += Format("  not counted: %d flaky flips, %d flips awaiting reruns\n", r.flaky_size(),
                  r.pending_size());
  }
  return out;
}

}  // namespace ts::cli
