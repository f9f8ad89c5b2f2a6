#include "services/query/gate.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace ts::query {

namespace {

constexpr size_t kExamples = kGateExamples;

class Checks {
 public:
  explicit Checks(pb::GateResponse* out) : out_(out) {}
  void Add(const std::string& rule, const std::string& group, double measured, double limit,
           bool ok, const std::string& detail) {
    pb::GateCheck* c = out_->add_checks();
    c->set_rule(rule);
    c->set_group(group);
    c->set_measured(measured);
    c->set_limit(limit);
    c->set_ok(ok);
    if (!ok) {
      c->set_detail(detail);
      *out_->add_failures() = *c;
    }
  }

 private:
  pb::GateResponse* out_;
};

std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

// min.<mode> style checks of one row against one Thresholds.
void CheckRow(Checks& checks, const std::string& rule, const std::string& group,
              const pb::SummaryRow* row, const pb::Thresholds& t) {
  struct Limit {
    const char* mode;
    bool has;
    double limit;
    double measured;
  };
  const Limit limits[] = {
      {"eager", t.has_eager(), t.eager(), row ? row->eager_pct() : 0},
      {"compile", t.has_compile(), t.compile(), row ? row->compile_pct() : 0},
      {"train", t.has_train(), t.train(), row ? row->train_pct() : 0},
      {"opcov", t.has_opcov(), t.opcov(), row ? row->opcov_pct() : 0}};
  for (const Limit& l : limits) {
    if (!l.has) continue;
    const bool ok = row && l.measured >= l.limit;
    const std::string where = group.empty() ? "the sweep" : "'" + group + "'";
    const std::string detail =
        row ? std::string(l.mode) + " % of " + where + " is " + Fmt(l.measured) + " < " +
                  Fmt(l.limit) + " (" + std::to_string(row->models()) + " models)"
            : "the sweep has no model in " + where;
    checks.Add(rule + "." + l.mode, group, l.measured, l.limit, ok, detail);
  }
}

void CheckGroups(Checks& checks, const std::string& rule,
                 const google::protobuf::Map<std::string, pb::Thresholds>& by,
                 const pb::Summary& summary) {
  std::map<std::string, const pb::SummaryRow*> rows;
  for (const auto& r : summary.rows()) rows[r.group()] = &r;
  const std::map<std::string, pb::Thresholds> sorted(by.begin(), by.end());
  for (const auto& [group, t] : sorted) {
    auto it = rows.find(group);
    CheckRow(checks, rule, group, it == rows.end() ? nullptr : it->second, t);
  }
}

void CheckFlips(Checks& checks, const pb::GateRules& rules, const GateInputs& in,
                pb::GateResponse* out) {
  int64_t deterministic = 0;
  std::string detail;
  for (const auto& c : in.regressed) {
    if (c.quarantined()) {
      *out->add_quarantined() = c;  // a flaky history: shown, never counted
    } else if (c.confirmation() == "deterministic") {
      if (deterministic++ < static_cast<int64_t>(kExamples)) {
        detail += (detail.empty() ? "" : ", ") + c.model_id() + " (" + c.base_status() + " -> " +
                  c.head_status() + ")";
      }
    } else if (c.confirmation() == "flaky") {
      *out->add_flaky() = c;
    } else {
      *out->add_pending() = c;
    }
  }
  if (!rules.has_max_new_failures()) return;
  const bool ok = deterministic <= rules.max_new_failures();
  checks.Add("max_new_failures", "", static_cast<double>(deterministic),
             static_cast<double>(rules.max_new_failures()), ok,
             std::to_string(deterministic) + " deterministic pass->fail flips vs sweep " +
                 std::to_string(rules.baseline_sweep_id()) + ": " + detail);
}

void CheckForbid(Checks& checks, const pb::GateRules& rules, const GateInputs& in) {
  for (const std::string& status : rules.forbid()) {
    const int64_t n = VerdictCount(*in.groups, status);
    std::string detail;
    auto ex = in.forbid_examples.find(status);
    if (ex != in.forbid_examples.end()) {
      for (size_t k = 0; k < ex->second.size() && k < kExamples; ++k) {
        detail += (detail.empty() ? "" : ", ") + ex->second[k];
      }
    }
    checks.Add("forbid", status, static_cast<double>(n), 0, n == 0,
               std::to_string(n) + " verdicts '" + status + "': " + detail);
  }
}

void CheckMustPass(Checks& checks, const pb::GateRules& rules, const GateInputs& in) {
  std::map<std::string, const pb::ResultRow*> wanted;
  for (const auto& id : rules.must_pass()) wanted[id] = nullptr;
  for (const auto& r : in.must_pass) {
    auto it = wanted.find(r.model_id());
    if (it != wanted.end()) it->second = &r;
  }
  for (const auto& [id, row] : wanted) {
    std::string detail = row ? "" : "not recorded in sweep " + std::to_string(in.sweep_id);
    for (const std::string& mode : in.modes) {
      if (!row) break;
      auto s = row->status().find(mode);
      const std::string status = s == row->status().end() ? "missing" : s->second;
      if (status != "pass") detail += (detail.empty() ? "" : ", ") + mode + "=" + status;
    }
    checks.Add("must_pass", id, detail.empty() ? 1 : 0, 1, detail.empty(), detail);
  }
}

std::string Speedup(double v) { return std::isfinite(v) ? Fmt(v) + "x" : std::string("none"); }

// min_geomean_speedup (the Total row) and min_geomean_speedup_by_task (per named task).
void CheckSpeedup(Checks& checks, const pb::GateRules& rules, const pb::Summary& tasks) {
  if (rules.has_min_geomean_speedup()) {
    const double g = tasks.total().has_geomean_speedup() ? tasks.total().geomean_speedup() : NAN;
    checks.Add("min_geomean_speedup", "", std::isfinite(g) ? g : 0, rules.min_geomean_speedup(),
               std::isfinite(g) && g >= rules.min_geomean_speedup(),
               "geomean compile speedup of the sweep is " + Speedup(g) + " < " +
                   Fmt(rules.min_geomean_speedup()) + "x (" +
                   std::to_string(tasks.total().perf_models()) + " models)");
  }
  std::map<std::string, const pb::SummaryRow*> rows;
  for (const auto& r : tasks.rows()) rows[r.group()] = &r;
  const std::map<std::string, double> by(rules.min_geomean_speedup_by_task().begin(),
                                         rules.min_geomean_speedup_by_task().end());
  for (const auto& [task, limit] : by) {
    auto it = rows.find(task);
    const double g = it == rows.end() || !it->second->has_geomean_speedup()
                         ? NAN
                         : it->second->geomean_speedup();
    const std::string detail = it == rows.end()
                                   ? "the sweep has no model in '" + task + "'"
                                   : "geomean compile speedup of '" + task + "' is " + Speedup(g) +
                                         " < " + Fmt(limit) + "x (" +
                                         std::to_string(it->second->perf_models()) + " models)";
    checks.Add("min_geomean_speedup_by_task", task, std::isfinite(g) ? g : 0, limit,
               std::isfinite(g) && g >= limit, detail);
  }
}

void CheckPerfRegressions(Checks& checks, const pb::GateRules& rules, const GateInputs& in) {
  if (!rules.has_max_perf_regressions()) return;
  const auto n = static_cast<int64_t>(in.perf_regressions.size());
  std::string detail;
  for (size_t k = 0; k < in.perf_regressions.size() && k < kExamples; ++k) {
    const pb::PerfRegression& p = in.perf_regressions[k];
    char buf[64];
    std::snprintf(buf, sizeof buf, " x%.3f", p.base_us() > 0 ? p.head_us() / p.base_us() : 0.0);
    detail += (detail.empty() ? "" : ", ") + p.model_id() + " (" +
              (p.mode() == pb::MODE_EAGER     ? "eager"
               : p.mode() == pb::MODE_COMPILE ? "compile"
                                              : "train") +
              buf + ", " + p.op() + ")";
  }
  checks.Add("max_perf_regressions", "", static_cast<double>(n),
             static_cast<double>(rules.max_perf_regressions()), n <= rules.max_perf_regressions(),
             std::to_string(n) + " performance regressions vs sweep " +
                 std::to_string(rules.baseline_sweep_id()) + ": " + detail);
}

}  // namespace

pb::GateResponse EvaluateGate(const pb::GateRules& rules, const GateInputs& in) {
  pb::GateResponse out;
  out.set_sweep_state(in.sweep_state);
  Checks checks(&out);
  checks.Add("sweep.state", "", in.sweep_state == "done" ? 1 : 0, 1, in.sweep_state == "done",
             "sweep " + std::to_string(in.sweep_id) + " is " + in.sweep_state + ", not done");
  SummaryBuilder by_task(pb::GROUP_BY_TASK, in.modes), by_arch(pb::GROUP_BY_ARCH, in.modes);
  for (const auto& g : *in.groups) {
    by_task.AddTally(g);
    by_arch.AddTally(g);
  }
  const pb::Summary tasks = by_task.Build();
  if (rules.has_min()) CheckRow(checks, "min", "", &tasks.total(), rules.min());
  CheckGroups(checks, "min_by_task", rules.min_by_task(), tasks);
  CheckGroups(checks, "min_by_class", rules.min_by_class(), by_arch.Build());
  CheckFlips(checks, rules, in, &out);
  CheckForbid(checks, rules, in);
  CheckMustPass(checks, rules, in);
  CheckSpeedup(checks, rules, tasks);
  CheckPerfRegressions(checks, rules, in);
  out.set_pass(out.failures_size() == 0);
  return out;
}

}  // namespace ts::query
