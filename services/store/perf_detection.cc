#include "services/store/perf_detection.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "proto/names.h"
#include "services/query/perf_regression.h"
#include "services/query/regression_stats.h"
#include "services/store/alert_writer.h"
#include "services/store/store_internal.h"

namespace ts::store {
namespace {

constexpr int kResolveAfterClean = 3;  // as the accuracy alerts
// The sweeps a speedup line reads: tonight, the sweep before, and the window before that one.
constexpr size_t kLineSweeps = query::kSpeedupLineWindow + query::kSpeedupLineSweeps;

// (mode, cause_kind, cause) of a performance alert.
using CauseKey = std::tuple<std::string, std::string, std::string>;

pb::Perf TopOps(const pqxx::field& f) {
  pb::Perf p;
  if (!f.is_null()) (void)ParseTopOps(nlohmann::json::parse(f.c_str(), nullptr, false), &p);
  return p;
}

// The head's models whose device time grew beyond the threshold, by (mode, op grown most).
std::map<CauseKey, std::vector<AlertMember>> FindRegressions(
    pqxx::transaction_base& w, const PerfDetection& in, pb::DetectRegressionsResponse* report) {
  std::map<CauseKey, std::vector<AlertMember>> out;
  for (const auto& r : w.exec_params(R"(
         SELECT h.model_id, h.mode, m.arch, m.task, b.perf_device_us, h.perf_device_us,
                b.perf_top_ops, h.perf_top_ops
         FROM results h JOIN models m USING (model_id)
         JOIN results b ON b.sweep_id = $2 AND b.model_id = h.model_id AND b.mode = h.mode
                       AND b.run = 1
         WHERE h.sweep_id = $1 AND h.run = 1 AND h.mode = ANY($4::text[])
           AND h.perf_device_us IS NOT NULL AND b.perf_device_us IS NOT NULL
           AND h.perf_device_us > b.perf_device_us * (1 + $3::float8)
         ORDER BY h.model_id, h.mode)",
                                     in.head, in.baseline, in.threshold, TextArray(in.modes))) {
    pb::Perf base = TopOps(r[6]), head = TopOps(r[7]);
    base.set_device_us(r[4].as<double>());
    head.set_device_us(r[5].as<double>());
    auto grown = query::PerfRegressed(base, head, in.threshold);
    if (!grown) continue;
    pb::PerfRegression* f = report->add_perf_regressions();
    f->set_model_id(r[0].c_str());
    auto mode = proto::ModeFromName(r[1].c_str());
    f->set_mode(mode ? *mode : pb::MODE_UNSPECIFIED);
    f->set_base_us(base.device_us());
    f->set_head_us(head.device_us());
    f->set_op(grown->op);
    f->set_op_growth_us(grown->growth_us);
    f->set_arch(r[2].c_str());
    f->set_task(r[3].c_str());
    char detail[160];
    std::snprintf(detail, sizeof detail, "device %.4g -> %.4g us (x%.3f), %s +%.4g us",
                  base.device_us(), head.device_us(), head.device_us() / base.device_us(),
                  grown->op.c_str(), grown->growth_us);
    out[{r[1].c_str(), "perf_op", grown->op}].push_back(
        {f->model_id(), f->arch(), f->task(), detail, {r[1].c_str()}});
  }
  return out;
}

// The classes and tasks whose geomean compile speedup fell for two sweeps in a row, with their
// models of the head that have a speedup.
std::map<CauseKey, std::vector<AlertMember>> FindFallenLines(
    pqxx::transaction_base& w, const PerfDetection& in, pb::DetectRegressionsResponse* report) {
  std::vector<int64_t> sweeps;  // oldest first, the head last
  for (auto it = in.line_sweeps.rbegin(); it != in.line_sweeps.rend(); ++it) sweeps.push_back(*it);
  if (sweeps.size() > kLineSweeps) sweeps.erase(sweeps.begin(), sweeps.end() - kLineSweeps);
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < sweeps.size(); ++i) index[sweeps[i]] = i;
  // (kind, group) -> geomean per sweep (NaN: none).
  std::map<std::pair<std::string, std::string>, std::vector<double>> series;
  for (const auto& r : w.exec_params(R"(
         SELECT sweep_id, CASE WHEN grouping(arch) = 0 THEN 'class' ELSE 'task' END,
                coalesce(arch, task), sum(perf_models)::bigint,
                sum(speedup_log_sum::numeric)::float8
         FROM sweep_groups WHERE sweep_id = ANY($1::bigint[])
         GROUP BY GROUPING SETS ((sweep_id, arch), (sweep_id, task)))",
                                     IdArray(sweeps))) {
    const int64_t n = r[3].as<int64_t>();
    if (n <= 0) continue;
    auto& s = series[{r[1].c_str(), r[2].c_str()}];
    s.resize(sweeps.size(), NAN);
    s[index.at(r[0].as<int64_t>())] = std::exp(r[4].as<double>() / static_cast<double>(n));
  }
  std::map<CauseKey, std::vector<AlertMember>> out;
  if (!in.modes.empty() &&
      std::find(in.modes.begin(), in.modes.end(), "compile") == in.modes.end()) {
    return out;
  }
  for (const auto& [key, g] : series) {
    const query::SpeedupLineVerdict v = query::CheckSpeedupLine(g);
    if (!v.fired) continue;
    pb::SpeedupLineFinding* f = report->add_speedup_lines();
    f->set_kind(key.first);
    f->set_group(key.second);
    f->set_speedup(g.back());
    f->set_best(v.best);
    f->set_previous(g[g.size() - 2]);
    f->set_previous_best(v.previous_best);
    char detail[120];
    std::snprintf(detail, sizeof detail, "geomean speedup %.3gx under 0.95 x its best %.3gx",
                  g.back(), v.best);
    auto& members = out[{"compile", "perf_line", key.first + ":" + key.second}];
    for (const auto& m :
         w.exec_params(std::string(R"(
           SELECT r.model_id, m.arch, m.task FROM results r JOIN models m USING (model_id)
           WHERE r.sweep_id = $1 AND r.run = 1 AND r.mode = 'compile'
             AND r.perf_speedup IS NOT NULL AND m.)") +
                           (key.first == "class" ? "arch" : "task") + " = $2 ORDER BY r.model_id",
                       in.head, key.second)) {
      members.push_back({m[0].c_str(), m[1].c_str(), m[2].c_str(), detail, {"compile"}});
    }
  }
  return out;
}

std::string CauseText(const CauseKey& key) {
  if (std::get<1>(key) == "perf_op") return "device time grew most in " + std::get<2>(key);
  return std::get<2>(key) + ": geomean compile speedup fell";
}

// The alert of one cause with its models (WriteAlert, alert_writer.h), each of them in the
// alert's mode; a fallen line counts as a fired group test; a model already on it takes
// tonight's figures and sweep.
void RaisePerfAlert(pqxx::transaction_base& w, const PerfDetection& in, const CauseKey& key,
                    const std::vector<AlertMember>& models, pb::DetectRegressionsResponse* report) {
  const auto& [mode, kind, cause] = key;
  AlertWrite a;
  a.line = in.line;
  a.head = in.head;
  a.kind = "performance";
  a.mode = mode;
  a.cause_kind = kind;
  a.cause = cause;
  a.cause_text = CauseText(key);
  a.group_fired = kind == "perf_line";
  a.refresh_member_sweep = true;
  WriteAlert(w, a, models, report);
}

// The line's other unresolved performance alerts in a mode the head ran: still seen, kept;
// otherwise one more clean sweep, and the third resolves it.
void AgePerfAlerts(pqxx::transaction_base& w, const PerfDetection& in,
                   const std::set<CauseKey>& seen, pb::DetectRegressionsResponse* report) {
  for (const auto& r : w.exec_params(R"(
         SELECT alert_id, mode, cause_kind, cause, clean_sweeps FROM alerts
         WHERE line = $1 AND kind = 'performance' AND state <> 'resolved' AND checked_sweep < $2
           AND mode = ANY($3::text[])
         ORDER BY alert_id FOR UPDATE)",
                                     in.line, in.head, TextArray(in.modes))) {
    const int64_t id = r[0].as<int64_t>();
    if (seen.count({r[1].c_str(), r[2].c_str(), r[3].c_str()})) {
      w.exec_params(R"(
        UPDATE alerts SET last_sweep = $2, checked_sweep = $2, clean_sweeps = 0,
               updated_at = now() WHERE alert_id = $1)",
                    id, in.head);
      continue;
    }
    const int clean = r[4].as<int>() + 1;
    const bool resolve = clean >= kResolveAfterClean;
    w.exec_params(R"(
      UPDATE alerts SET checked_sweep = $2, clean_sweeps = $3, updated_at = now(),
             state = CASE WHEN $4 THEN 'resolved' ELSE state END
      WHERE alert_id = $1)",
                  id, in.head, clean, resolve);
    if (resolve) report->add_resolved(id);
  }
}

}  // namespace

void DetectPerformance(pqxx::transaction_base& w, const PerfDetection& in,
                       pb::DetectRegressionsResponse* report) {
  std::map<CauseKey, std::vector<AlertMember>> causes = FindRegressions(w, in, report);
  for (auto& [key, members] : FindFallenLines(w, in, report)) causes[key] = std::move(members);
  if (!in.writes) return;
  std::set<CauseKey> seen;
  for (const auto& [key, members] : causes) {
    seen.insert(key);
    RaisePerfAlert(w, in, key, members, report);
  }
  AgePerfAlerts(w, in, seen, report);
}

absl::StatusOr<std::vector<pb::PerfRegression>> Store::PerfRegressions(int64_t sweep_id,
                                                                       int64_t baseline) {
  return impl_->Run("PerfRegressions", [&]() -> absl::StatusOr<std::vector<pb::PerfRegression>> {
    ReadTxn t(*impl_->conn);
    for (const auto& [id, field] :
         {std::pair<int64_t, const char*>{sweep_id, "sweep_id"}, {baseline, "baseline_sweep_id"}}) {
      if (t.exec_params("SELECT 1 FROM sweeps WHERE sweep_id = $1", id).empty()) {
        return absl::NotFoundError(std::string(field) + ": no sweep " + std::to_string(id));
      }
    }
    PerfDetection in;
    in.head = sweep_id;
    in.baseline = baseline;
    for (auto m : proto::AllModes()) in.modes.push_back(proto::ModeName(m));
    in.threshold = impl_->opts.perf_threshold;
    pb::DetectRegressionsResponse report;
    (void)FindRegressions(t, in, &report);
    return std::vector<pb::PerfRegression>(report.perf_regressions().begin(),
                                           report.perf_regressions().end());
  });
}

}  // namespace ts::store
