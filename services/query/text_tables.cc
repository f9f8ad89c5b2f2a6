#include "services/query/text_tables.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>

#include "proto/names.h"

namespace ts::query {

namespace {

// A name cut to `width` columns ('~' marks the cut).
std::string Cut(const std::string& s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 1) + "~";
}

void Line(std::string* out, const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  *out += buf;
}

const char* GroupHeader(pb::GroupBy g) {
  if (g == pb::GROUP_BY_FAMILY) return "Family";
  if (g == pb::GROUP_BY_ARCH) return "Class";
  return "Task";
}

void SummaryLine(std::string* out, const std::string& name, const pb::SummaryRow& r) {
  Line(out, "%-32s %7lld %8.1f %12.1f %10.1f %8.1f\n", Cut(name, 32).c_str(),
       static_cast<long long>(r.models()), r.eager_pct(), r.opcov_pct(), r.compile_pct(),
       r.train_pct());
}

void PerfLine(std::string* out, const std::string& name, const pb::SummaryRow& r) {
  char speedup[16] = "-", mfu[16] = "-", compression[16] = "-";
  if (r.has_geomean_speedup()) {
    std::snprintf(speedup, sizeof speedup, "%.2fx", r.geomean_speedup());
  }
  if (r.has_median_mfu()) std::snprintf(mfu, sizeof mfu, "%.3g", r.median_mfu());
  if (r.has_mean_compression()) {
    std::snprintf(compression, sizeof compression, "%.2f", r.mean_compression());
  }
  Line(out, "%-32s %7lld %9lld %9s %10s %12s %10.1f\n", Cut(name, 32).c_str(),
       static_cast<long long>(r.models()), static_cast<long long>(r.perf_models()), speedup, mfu,
       compression, r.compile_pct());
}

std::string Examples(const google::protobuf::RepeatedPtrField<std::string>& models) {
  std::string s;
  for (const auto& m : models) s += (s.empty() ? "" : ", ") + m;
  return s;
}

}  // namespace

std::string FormatSummary(const pb::Summary& s) {
  std::string out;
  Line(&out, "%-32s %7s %8s %12s %10s %8s\n", GroupHeader(s.group_by()), "Models", "Eager %",
       "Mean OpCov %", "Compile %", "Train %");
  for (const auto& r : s.rows()) SummaryLine(&out, r.group(), r);
  SummaryLine(&out, "Total", s.total());
  SummaryLine(&out, "Class-weighted (" + std::to_string(s.classes()) + " classes)",
              s.class_weighted());
  std::map<std::string, int64_t> statuses;
  for (const auto& m : s.total().modes()) {
    for (const auto& c : m.statuses()) statuses[c.status()] += c.models();
  }
  out += "statuses:";
  for (const auto& [status, n] : statuses) out += " " + status + "=" + std::to_string(n);
  return out + "\n";
}

std::string FormatPerfSummary(const pb::Summary& s) {
  std::string out;
  Line(&out, "%-32s %7s %9s %9s %10s %12s %10s\n", GroupHeader(s.group_by()), "Models", "Speedups",
       "Speedup", "MFU", "Compression", "Compile %");
  for (const auto& r : s.rows()) PerfLine(&out, r.group(), r);
  PerfLine(&out, "Total", s.total());
  PerfLine(&out, "Class-weighted (" + std::to_string(s.classes()) + " classes)",
           s.class_weighted());
  return out;
}

std::string FormatOpDemand(const pb::OpDemandResponse& r) {
  std::string out;
  Line(&out, "sweep %lld, %s: %lld models, %lld native\n", static_cast<long long>(r.sweep_id()),
       proto::ModeName(r.mode() == pb::MODE_UNSPECIFIED ? pb::MODE_EAGER : r.mode()).c_str(),
       static_cast<long long>(r.models()), static_cast<long long>(r.models_native()));
  Line(&out, "%-36s %8s %6s %9s %6s %10s %11s\n", "Op", "Blocked", "Alone", "Fallback",
       "Break", "Calls", "Fallback ms");
  for (const auto& o : r.ops()) {
    Line(&out, "%-36s %8lld %6lld %9lld %6lld %10lld %11.1f\n", Cut(o.op(), 36).c_str(),
         static_cast<long long>(o.models_blocked()), static_cast<long long>(o.blocks_alone()),
         static_cast<long long>(o.models_fallback()), static_cast<long long>(o.models_break()),
         static_cast<long long>(o.fallback_calls()), o.fallback_ms());
  }
  return out;
}

std::string FormatGraphBreaks(const pb::GraphBreaksResponse& r) {
  std::string out;
  Line(&out, "sweep %lld: %lld models with graph breaks\n", static_cast<long long>(r.sweep_id()),
       static_cast<long long>(r.models_with_breaks()));
  Line(&out, "%-48s %7s %7s  %s\n", "Reason", "Models", "Breaks", "Examples");
  for (const auto& b : r.reasons()) {
    Line(&out, "%-48s %7lld %7lld  %s\n", Cut(b.reason(), 48).c_str(),
         static_cast<long long>(b.models()), static_cast<long long>(b.breaks()),
         Cut(Examples(b.example_models()), 34).c_str());
  }
  return out;
}

std::string FormatSuspectOps(const pb::SuspectOpsResponse& r) {
  std::string out;
  const std::string mode =
      r.mode() == pb::MODE_UNSPECIFIED ? "every mode" : proto::ModeName(r.mode());
  Line(&out, "sweep %lld, %s: %lld models fail accuracy, %lld with a suspect; %lld audited\n",
       static_cast<long long>(r.sweep_id()), mode.c_str(),
       static_cast<long long>(r.models_failed()), static_cast<long long>(r.models_attributed()),
       static_cast<long long>(r.models_audited()));
  Line(&out, "%-32s %7s %6s %7s %10s  %s\n", "Op", "Failed", "Named", "Warned", "Max ratio",
       "Examples");
  for (const auto& o : r.ops()) {
    char ratio[32];
    if (o.max_ratio() >= 1e300) {
      std::snprintf(ratio, sizeof(ratio), "non-finite");
    } else {
      std::snprintf(ratio, sizeof(ratio), "%.3g", o.max_ratio());
    }
    Line(&out, "%-32s %7lld %6lld %7lld %10s  %s\n", Cut(o.op(), 32).c_str(),
         static_cast<long long>(o.models_failed()), static_cast<long long>(o.models_named()),
         static_cast<long long>(o.models_warned()), ratio,
         Cut(Examples(o.example_models()), 34).c_str());
  }
  return out;
}

std::string FormatCompare(const pb::CompareSweepsResponse& r) {
  std::string out;
  Line(&out, "sweep %lld -> %lld: %lld common models, %lld regressed, %lld fixed, %lld appeared, "
       "%lld disappeared\n",
       static_cast<long long>(r.base_sweep_id()), static_cast<long long>(r.head_sweep_id()),
       static_cast<long long>(r.common_models()), static_cast<long long>(r.regressed()),
       static_cast<long long>(r.fixed()), static_cast<long long>(r.appeared()),
       static_cast<long long>(r.disappeared()));
  if (r.groups_size() > 0) {
    Line(&out, "%-32s %9s %9s %9s %9s\n", "Group", "Eager pp", "OpCov pp", "Compile pp",
         "Train pp");
    for (const auto& g : r.groups()) {
      Line(&out, "%-32s %+9.1f %+9.1f %+9.1f %+9.1f\n", Cut(g.group(), 32).c_str(),
           g.eager_delta(), g.opcov_delta(), g.compile_delta(), g.train_delta());
    }
  }
  const char* kinds[] = {"?", "regressed", "fixed", "appeared", "disappeared"};
  for (const auto& c : r.changes()) {
    Line(&out, "%-11s %-40s %-8s %s -> %s %s\n", kinds[c.kind()], Cut(c.model_id(), 40).c_str(),
         proto::ModeName(c.mode()).c_str(), c.base_status().c_str(), c.head_status().c_str(),
         c.confirmation().c_str());
  }
  return out;
}

std::string FormatGate(const pb::GateResponse& r) {
  std::string out = r.pass() ? "PASS\n" : "FAIL\n";
  for (const auto& c : r.checks()) {
    Line(&out, "%-4s %-22s %-28s %10.2f %10.2f  %s\n", c.ok() ? "ok" : "FAIL",
         Cut(c.rule(), 22).c_str(), Cut(c.group(), 28).c_str(), c.measured(), c.limit(),
         c.detail().c_str());
  }
  Line(&out, "flaky flips (not counted): %d, pending: %d, quarantined (not counted): %d\n",
       r.flaky_size(), r.pending_size(), r.quarantined_size());
  return out;
}

}  // namespace ts::query
