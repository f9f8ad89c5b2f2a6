#include "services/query/request_checks.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "proto/names.h"

namespace ts::query {

namespace {

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(field + ": " + what);
}

absl::Status CheckSweepId(int64_t id, const std::string& field) {
  return id > 0 ? absl::OkStatus() : Bad(field, "required (a sweep id > 0)");
}

absl::Status CheckPaging(int32_t page_size, const std::string& page_token,
                         std::string_view method) {
  if (page_size < 0) return Bad("page_size", "must be >= 0");
  auto pos = DecodePageToken(method, page_token);
  return pos.ok() ? absl::OkStatus() : pos.status();
}

absl::Status CheckNames(const google::protobuf::RepeatedPtrField<std::string>& names,
                        const std::string& field) {
  for (int i = 0; i < names.size(); ++i) {
    if (names.Get(i).empty()) return Bad(field + "[" + std::to_string(i) + "]", "empty");
  }
  return absl::OkStatus();
}

absl::Status CheckThresholds(const pb::Thresholds& t, const std::string& field) {
  struct Limit {
    const char* name;
    bool has;
    double value;
  };
  const Limit limits[] = {{"eager", t.has_eager(), t.eager()},
                          {"compile", t.has_compile(), t.compile()},
                          {"train", t.has_train(), t.train()},
                          {"opcov", t.has_opcov(), t.opcov()}};
  for (const Limit& l : limits) {
    if (l.has && !(l.value >= 0 && l.value <= 100)) {
      return Bad(field + "." + l.name, "must be in [0, 100]");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckThresholdMap(const google::protobuf::Map<std::string, pb::Thresholds>& m,
                               const std::string& field) {
  for (const auto& [key, t] : m) {
    const std::string at = field + "[\"" + key + "\"]";
    if (key.empty()) return Bad(at, "empty name");
    if (auto st = CheckThresholds(t, at); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckGroupBy(pb::GroupBy g, const std::string& field) {
  if (pb::GroupBy_IsValid(g)) return absl::OkStatus();
  return Bad(field, "unknown value " + std::to_string(static_cast<int>(g)) +
                        " (task, family or arch)");
}

absl::Status CheckFilter(const pb::ResultFilter& f, const std::string& field) {
  if (auto st = CheckNames(f.tasks(), field + ".tasks"); !st.ok()) return st;
  if (auto st = CheckNames(f.families(), field + ".families"); !st.ok()) return st;
  return CheckNames(f.archs(), field + ".archs");
}

absl::Status CheckGateRules(const pb::GateRules& r, const std::string& field) {
  if (r.baseline_sweep_id() < 0) return Bad(field + ".baseline_sweep_id", "must be >= 0");
  if (auto st = CheckThresholds(r.min(), field + ".min"); !st.ok()) return st;
  if (auto st = CheckThresholdMap(r.min_by_task(), field + ".min_by_task"); !st.ok()) return st;
  if (auto st = CheckThresholdMap(r.min_by_class(), field + ".min_by_class"); !st.ok()) {
    return st;
  }
  if (r.has_max_new_failures()) {
    // baseline_sweep_id 0 means the sweep's own baseline (the service checks that it has one).
    if (r.max_new_failures() < 0) return Bad(field + ".max_new_failures", "must be >= 0");
  }
  if (r.has_min_geomean_speedup() &&
      !(std::isfinite(r.min_geomean_speedup()) && r.min_geomean_speedup() > 0)) {
    return Bad(field + ".min_geomean_speedup", "must be a number > 0");
  }
  for (const auto& [task, v] : r.min_geomean_speedup_by_task()) {
    const std::string at = field + ".min_geomean_speedup_by_task[" + task + "]";
    if (task.empty()) return Bad(field + ".min_geomean_speedup_by_task", "empty task name");
    if (!(std::isfinite(v) && v > 0)) return Bad(at, "must be a number > 0");
  }
  if (r.has_max_perf_regressions() && r.max_perf_regressions() < 0) {
    return Bad(field + ".max_perf_regressions", "must be >= 0");
  }
  for (int i = 0; i < r.forbid_size(); ++i) {
    const auto v = proto::VerdictFromName(r.forbid(i));
    if (!v || *v == pb::VERDICT_PASS) {
      return Bad(field + ".forbid[" + std::to_string(i) + "]",
                 "unknown status '" + r.forbid(i) + "'");
    }
  }
  return CheckNames(r.must_pass(), field + ".must_pass");
}

absl::Status Check(const pb::ListSweepsRequest& r) {
  const std::string& s = r.state();
  if (!s.empty() && s != "running" && s != "done" && s != "cancelled" && s != "pruned") {
    return Bad("state", "unknown state '" + s + "' (running, done, cancelled or pruned)");
  }
  return CheckPaging(r.page_size(), r.page_token(), "ListSweeps");
}

absl::Status Check(const pb::GetSummaryRequest& r) {
  if (auto st = CheckSweepId(r.sweep_id(), "sweep_id"); !st.ok()) return st;
  if (auto st = CheckGroupBy(r.group_by(), "group_by"); !st.ok()) return st;
  return CheckFilter(r.filter(), "filter");
}

absl::Status Check(const pb::GetModelRequest& r) {
  if (r.model_id().empty()) return Bad("model_id", "required");
  if (r.last() < 0) return Bad("last", "must be >= 0");
  return absl::OkStatus();
}

absl::Status Check(const pb::OpDemandRequest& r) {
  if (auto st = CheckSweepId(r.sweep_id(), "sweep_id"); !st.ok()) return st;
  if (r.mode() != pb::MODE_UNSPECIFIED && r.mode() != pb::MODE_EAGER &&
      r.mode() != pb::MODE_COMPILE) {
    return Bad("mode", "op demand is ranked for eager or compile, not '" +
                           proto::ModeName(r.mode()) + "'");
  }
  return CheckPaging(r.page_size(), r.page_token(), "OpDemand");
}

absl::Status Check(const pb::GraphBreaksRequest& r) {
  if (auto st = CheckSweepId(r.sweep_id(), "sweep_id"); !st.ok()) return st;
  return CheckPaging(r.page_size(), r.page_token(), "GraphBreaks");
}

absl::Status Check(const pb::SuspectOpsRequest& r) {
  if (auto st = CheckSweepId(r.sweep_id(), "sweep_id"); !st.ok()) return st;
  if (r.mode() != pb::MODE_UNSPECIFIED && proto::ModeName(r.mode()).empty()) {
    return Bad("mode", "unknown mode " + std::to_string(static_cast<int>(r.mode())) +
                           " (eager, compile, train, or unset for every mode)");
  }
  return CheckPaging(r.page_size(), r.page_token(), "SuspectOps");
}

absl::Status Check(const pb::ListAlertsRequest& r) {
  const std::string& s = r.state();
  if (!s.empty() && s != "open" && s != "acknowledged" && s != "resolved") {
    return Bad("state", "'" + s + "' is not open, acknowledged or resolved (or empty: any)");
  }
  return CheckPaging(r.page_size(), r.page_token(), "ListAlerts");
}

absl::Status Check(const pb::WatchAlertsRequest& r) {
  const std::string& s = r.state();
  if (!s.empty() && s != "open" && s != "acknowledged" && s != "resolved") {
    return Bad("state", "'" + s + "' is not open, acknowledged or resolved (or empty: any)");
  }
  if (r.interval_ms() != 0 && r.interval_ms() < 100) {
    return Bad("interval_ms", "must be 0 (1000) or at least 100");
  }
  return absl::OkStatus();
}

absl::Status Check(const pb::ListQuarantineRequest&) { return absl::OkStatus(); }

absl::Status Check(const pb::AckAlertRequest& r) {
  if (r.alert_id() <= 0) return Bad("alert_id", "required (an alert id > 0)");
  if (r.note().empty()) return Bad("note", "required: say why the alert is acknowledged");
  if (r.note().size() > 2000) return Bad("note", "at most 2000 characters");
  if (r.by().size() > 200) return Bad("by", "at most 200 characters");
  return absl::OkStatus();
}

absl::Status Check(const pb::DetectRegressionsRequest& r) {
  if (auto st = CheckSweepId(r.sweep_id(), "sweep_id"); !st.ok()) return st;
  if (r.baseline_sweep_id() < 0) return Bad("baseline_sweep_id", "must be >= 0 (0: its own)");
  return absl::OkStatus();
}

absl::Status Check(const pb::CompareSweepsRequest& r) {
  if (auto st = CheckSweepId(r.base_sweep_id(), "base_sweep_id"); !st.ok()) return st;
  if (auto st = CheckSweepId(r.head_sweep_id(), "head_sweep_id"); !st.ok()) return st;
  if (auto st = CheckGroupBy(r.group_by(), "group_by"); !st.ok()) return st;
  if (auto st = CheckFilter(r.filter(), "filter"); !st.ok()) return st;
  return CheckPaging(r.page_size(), r.page_token(), "CompareSweeps");
}

absl::Status Check(const pb::GateRequest& r) {
  if (auto st = CheckSweepId(r.sweep_id(), "sweep_id"); !st.ok()) return st;
  return CheckGateRules(r.rules(), "rules");
}

absl::Status Check(const pb::WatchSweepRequest& r) {
  if (auto st = CheckSweepId(r.sweep_id(), "sweep_id"); !st.ok()) return st;
  if (r.interval_ms() != 0 && r.interval_ms() < 100) {
    return Bad("interval_ms", "must be 0 (1000) or at least 100");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> PageSize(int32_t requested, int def, int max) {
  if (requested < 0) return Bad("page_size", "must be >= 0");
  if (requested == 0) return def;
  return requested > max ? max : requested;
}

std::string EncodePageToken(std::string_view method, int64_t position) {
  return absl::WebSafeBase64Escape("ts1:" + std::string(method) + ":" + std::to_string(position));
}

absl::StatusOr<int64_t> DecodePageToken(std::string_view method, const std::string& token) {
  if (token.empty()) return 0;
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw)) {
    return Bad("page_token", "not a page token (use next_page_token as given)");
  }
  const std::string prefix = "ts1:" + std::string(method) + ":";
  int64_t pos = 0;
  if (raw.compare(0, prefix.size(), prefix) != 0 ||
      !absl::SimpleAtoi(raw.substr(prefix.size()), &pos) || pos < 0) {
    return Bad("page_token", "not a page token of " + std::string(method));
  }
  return pos;
}

int WatchIntervalMs(int32_t requested) { return requested == 0 ? 1000 : requested; }

}  // namespace ts::query
