// Regression detection (issue 11): DetectRegressions and DetectDoneSweeps. One transaction per
// sweep reads the sweep's failing primary verdicts and its fixes against the baseline, settles
// flips with the confirmation reruns (`regressions`), tests each class and task (McNemar with
// the Bonferroni bound, the drop rule; services/query/regression_stats.h), updates quarantine,
// raises one alert per root cause (a suspect op's across the modes it broke: one wrong kernel,
// one alert) and ages the line's other alerts.
//
// Why no infrastructure status counts, and which ones: regression_stats.h.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

#include "proto/names.h"
#include "services/common/error_signature.h"
#include "services/query/regression_stats.h"
#include "services/store/drift.h"
#include "services/store/perf_detection.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

constexpr int kResolveAfterClean = 3;    // consecutive clean sweeps resolve an alert
constexpr size_t kQuarantineWindow = 5;  // sweeps of the line searched for flakes
constexpr int kQuarantineFlakes = 2;     // flakes in the window that quarantine
constexpr int kQuarantineRelease = 3;    // passes in a row that release
constexpr size_t kDropWindow = 7;        // prior sweeps whose median the drop rule uses
// Serializes detections (alerts and quarantine of every line): detection is rare and short.
constexpr const char* kLock = "SELECT pg_advisory_xact_lock(736215011)";

// The first "aten::op[.overload]" named in `text`; "" for none.
std::string OpNamedIn(const std::string& text) {
  const size_t at = text.find("aten::");
  if (at == std::string::npos) return "";
  size_t end = at + 6;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                               text[end] == '_' || text[end] == '.')) {
    ++end;
  }
  std::string op = text.substr(at, end - at);
  while (!op.empty() && op.back() == '.') op.pop_back();
  return op.size() > 6 ? op : "";
}

// What an alert groups by: (kind, key); `text` is what a human reads.
struct Cause {
  std::string kind, key, text;
  bool operator<(const Cause& o) const { return std::tie(kind, key) < std::tie(o.kind, o.key); }
};

// A failing head verdict, with its base status ("" when the base lacks it).
struct Failing {
  std::string model_id, mode, status, base_status, arch, task, confirmation;
  Cause cause;
};

// The root cause of a failing verdict: its first suspect op, else the op its error or a break
// reason names (a fallback op, a graph break), else its normalized error, else its status.
Cause RootCause(const pqxx::row& r) {
  if (!r["suspect"].is_null()) {
    const std::string op = r["suspect"].c_str();
    if (!op.empty()) return {"suspect", op, op};
  }
  const std::string error = r["error"].c_str();
  std::string op = OpNamedIn(error);
  for (const auto& reason : ParseTextArray(r["break_reasons"])) {
    if (op.empty()) op = OpNamedIn(reason);
  }
  if (!op.empty()) return {"op", op, op};
  if (!error.empty()) {
    return {"signature", r["error_signature"].c_str(), common::NormalizeError(error)};
  }
  return {"status", r["status"].c_str(), r["status"].c_str()};
}

struct Head {
  int64_t id = 0, baseline = 0;
  std::string line;
  std::vector<std::string> modes;  // requested by both sweeps
};

absl::StatusOr<Head> ReadHead(pqxx::transaction_base& w, int64_t sweep_id, int64_t baseline) {
  const std::string name = "sweep " + std::to_string(sweep_id);
  pqxx::result h = w.exec_params(R"(
    SELECT s.state, coalesce(s.baseline_sweep, 0), p.name, s.modes FROM sweeps s
    JOIN profiles p USING (profile_id) WHERE s.sweep_id = $1 FOR UPDATE OF s)",
                                 sweep_id);
  if (h.empty()) return absl::NotFoundError("sweep_id: no " + name);
  const std::string state = h[0][0].c_str();
  Head out{sweep_id, h[0][1].as<int64_t>(), ProfileLine(h[0][2].c_str()), {}};
  if (state != "done") {
    return absl::FailedPreconditionError("sweep_id: " + name + " is " + state +
                                         "; detection needs a done sweep");
  }
  if (out.baseline == 0) {
    return absl::FailedPreconditionError("sweep_id: " + name + " has no baseline sweep");
  }
  if (baseline != 0 && baseline != out.baseline) {
    return absl::InvalidArgumentError(
        "baseline_sweep_id: " + name + " was confirmed against sweep " +
        std::to_string(out.baseline) + "; confirmation reruns exist only against it");
  }
  pqxx::result b =
      w.exec_params("SELECT state, modes FROM sweeps WHERE sweep_id = $1", out.baseline);
  if (b.empty() || std::string(b[0][0].c_str()) == "pruned") {
    return absl::FailedPreconditionError("baseline_sweep_id: sweep " +
                                         std::to_string(out.baseline) + " was pruned");
  }
  const std::vector<std::string> base_modes = ParseTextArray(b[0][1]);
  for (const auto& m : ParseTextArray(h[0][3])) {
    if (std::find(base_modes.begin(), base_modes.end(), m) != base_modes.end()) {
      out.modes.push_back(m);
    }
  }
  return out;
}

// The line's done sweeps, newest first: (id, answers kept, detected).
struct LineSweep {
  int64_t id;
  bool kept, detected;
};
std::vector<LineSweep> LineSweeps(pqxx::transaction_base& w, const Head& head) {
  std::vector<LineSweep> out;
  for (const auto& r : w.exec_params(R"(
         SELECT s.sweep_id, p.name, EXISTS (SELECT 1 FROM sweep_facts f
                                            WHERE f.sweep_id = s.sweep_id),
                s.detected_at IS NOT NULL
         FROM sweeps s JOIN profiles p USING (profile_id)
         WHERE s.state = 'done' ORDER BY s.sweep_id DESC)")) {
    if (ProfileLine(r[1].c_str()) != head.line) continue;
    out.push_back({r[0].as<int64_t>(), r[2].as<bool>(), r[3].as<bool>()});
  }
  return out;
}

// The head's failing primary verdicts that count, in the modes both sweeps ran.
std::vector<Failing> ReadFailing(pqxx::transaction_base& w, const Head& head) {
  std::vector<Failing> out;
  for (const auto& r :
       w.exec_params(R"(
         SELECT h.model_id, h.mode, h.status, coalesce(b.status, '') AS base_status, m.arch,
                m.task, coalesce(g.confirmation, '') AS confirmation, h.error, h.error_signature,
                h.suspects->0->>'op' AS suspect, h.break_reasons
         FROM results h JOIN models m USING (model_id)
         LEFT JOIN results b ON b.sweep_id = $2 AND b.model_id = h.model_id
                            AND b.mode = h.mode AND b.run = 1
         LEFT JOIN regressions g ON g.sweep_id = $1 AND g.model_id = h.model_id
                                AND g.mode = h.mode
         WHERE h.sweep_id = $1 AND h.run = 1 AND h.status <> 'pass'
           AND h.status <> ALL($3::text[]) AND h.mode = ANY($4::text[]))",
                     head.id, head.baseline, TextArray(query::InfrastructureStatuses()),
                     TextArray(head.modes))) {
    out.push_back({r["model_id"].c_str(), r["mode"].c_str(), r["status"].c_str(),
                   r["base_status"].c_str(), r["arch"].c_str(), r["task"].c_str(),
                   r["confirmation"].c_str(), RootCause(r)});
  }
  return out;
}

// (mode, kind, group): kind "arch" or "task".
using GroupKey = std::tuple<std::string, std::string, std::string>;
using ModelMode = std::pair<std::string, std::string>;

// Fixes (fail -> pass, both verdicts counting), as the c of each group's McNemar test.
void CountFixes(pqxx::transaction_base& w, const Head& head, const std::set<ModelMode>& quarantined,
                std::map<GroupKey, int64_t>* c) {
  for (const auto& r :
       w.exec_params(R"(
         SELECT h.model_id, h.mode, m.arch, m.task
         FROM results h JOIN models m USING (model_id)
         JOIN results b ON b.sweep_id = $2 AND b.model_id = h.model_id AND b.mode = h.mode
                       AND b.run = 1
         WHERE h.sweep_id = $1 AND h.run = 1 AND h.status = 'pass' AND b.status <> 'pass'
           AND b.status <> ALL($3::text[]) AND h.mode = ANY($4::text[]))",
                     head.id, head.baseline, TextArray(query::InfrastructureStatuses()),
                     TextArray(head.modes))) {
    if (quarantined.count({r[0].c_str(), r[1].c_str()})) continue;
    ++(*c)[{r[1].c_str(), "arch", r[2].c_str()}];
    ++(*c)[{r[1].c_str(), "task", r[3].c_str()}];
  }
}

// Pass % per (mode, kind, group) of each sweep, from the kept group counters (sweep_groups),
// for the modes each sweep ran: {sweep -> {key -> (rate, models)}}.
using Rates = std::map<int64_t, std::map<GroupKey, std::pair<double, int64_t>>>;
Rates GroupRates(pqxx::transaction_base& w, const std::vector<int64_t>& sweeps,
                 const std::vector<std::string>& modes) {
  Rates out;
  for (const auto& r : w.exec_params(R"(
         WITH p AS (
           SELECT g.sweep_id, g.arch, g.task, m.mode, g.models,
                  coalesce((SELECT sum(x.n) FROM unnest(g.statuses, g.counts) AS x(k, n)
                            WHERE x.k = m.mode || '=pass'), 0) AS pass
           FROM sweep_groups g JOIN sweeps s USING (sweep_id)
           CROSS JOIN unnest($2::text[]) AS m(mode)
           WHERE g.sweep_id = ANY($1::bigint[]) AND m.mode = ANY(s.modes))
         SELECT sweep_id, mode, CASE WHEN grouping(arch) = 0 THEN 'arch' ELSE 'task' END,
                coalesce(arch, task), sum(models)::bigint, sum(pass)::bigint
         FROM p GROUP BY GROUPING SETS ((sweep_id, mode, arch), (sweep_id, mode, task)))",
                                     IdArray(sweeps), TextArray(modes))) {
    const int64_t models = r[4].as<int64_t>();
    if (models <= 0) continue;
    out[r[0].as<int64_t>()][{r[1].c_str(), r[2].c_str(), r[3].c_str()}] = {
        100.0 * static_cast<double>(r[5].as<int64_t>()) / static_cast<double>(models), models};
  }
  return out;
}

struct Detection {
  Head head;
  std::vector<LineSweep> line;  // newest first, head included
  bool writes = true;           // false: a newer sweep of the line was detected already
  std::set<ModelMode> quarantined;
  std::vector<Failing> failing;
  std::set<GroupKey> fired;                       // groups whose test fired
  std::set<std::tuple<std::string, Cause>> seen;  // (mode, cause) failing in the head
  std::vector<DriftRow> drift;                    // passing models whose metric stepped up
  pb::DetectRegressionsResponse report;
};

Cause DriftCause(const std::string& metric) {
  return {"drift", metric,
          metric == "rmse_ratio" ? "rmse ratio stepped up (doubled or more) while passing"
                                 : "compile time stepped up (doubled or more) while passing"};
}

// The head's drifting models (drift.cc), into the report and `seen` (their alert stays open).
void FindHeadDrift(pqxx::transaction_base& w, Detection& d) {
  std::vector<int64_t> window;  // oldest first, the head last
  for (auto it = d.line.rbegin(); it != d.line.rend(); ++it) window.push_back(it->id);
  d.drift = FindDrift(w, window, d.head.modes, d.quarantined);
  for (const DriftRow& r : d.drift) {
    d.seen.insert({r.mode, DriftCause(r.metric)});
    pb::DriftFinding* f = d.report.add_drift();
    f->set_model_id(r.model_id);
    auto mode = proto::ModeFromName(r.mode);
    f->set_mode(mode ? *mode : pb::MODE_UNSPECIFIED);
    f->set_metric(r.metric);
    f->set_before(r.before);
    f->set_after(r.after);
    f->set_first_sweep_id(r.first_sweep);
    f->set_arch(r.arch);
    f->set_task(r.task);
  }
}

// The line's last 5 sweeps (head included): a model and mode that flaked in the head and twice
// in them goes in; each quarantined one the head ran passes (+1) or not (back to 0; an
// infrastructure status leaves it); 3 passes in a row release it.
void UpdateQuarantine(pqxx::transaction_base& w, Detection& d) {
  std::vector<int64_t> window;
  for (const auto& s : d.line) {
    if (window.size() < kQuarantineWindow) window.push_back(s.id);
  }
  if (d.writes) {
    pqxx::result in = w.exec_params(R"(
      INSERT INTO quarantine (model_id, mode, since_sweep, checked_sweep)
      SELECT model_id, mode, $1, $1 FROM regressions
      WHERE sweep_id = ANY($2::bigint[]) AND confirmation = 'flaky'
      GROUP BY model_id, mode HAVING count(*) >= $3 AND bool_or(sweep_id = $1)
      ON CONFLICT DO NOTHING RETURNING 1)",
                                    d.head.id, IdArray(window), kQuarantineFlakes);
    d.report.set_newly_quarantined(static_cast<int64_t>(in.size()));
    w.exec_params(R"(
      UPDATE quarantine q SET checked_sweep = $1, clean_passes = CASE
          WHEN r.status = 'pass' THEN q.clean_passes + 1
          WHEN r.status = ANY($2::text[]) THEN q.clean_passes ELSE 0 END
      FROM results r WHERE r.sweep_id = $1 AND r.run = 1 AND r.model_id = q.model_id
        AND r.mode = q.mode AND q.checked_sweep < $1)",
                  d.head.id, TextArray(query::InfrastructureStatuses()));
    pqxx::result out = w.exec_params("DELETE FROM quarantine WHERE clean_passes >= $1 RETURNING 1",
                                     kQuarantineRelease);
    d.report.set_released(static_cast<int64_t>(out.size()));
  }
  for (const auto& r : w.exec("SELECT model_id, mode FROM quarantine")) {
    d.quarantined.insert({r[0].c_str(), r[1].c_str()});
  }
}

// Flips settled by their reruns; the McNemar test per (mode, class) and (mode, task) with the
// Bonferroni bound over every group the head has; the drop rule against the line's history.
void TestGroups(pqxx::transaction_base& w, Detection& d) {
  std::map<GroupKey, int64_t> b, c;
  for (const Failing& f : d.failing) {
    if (f.base_status != "pass") continue;
    d.report.set_flips(d.report.flips() + 1);
    if (d.quarantined.count({f.model_id, f.mode})) {
      d.report.set_quarantined(d.report.quarantined() + 1);
    } else if (f.confirmation == "flaky") {
      d.report.set_flaky(d.report.flaky() + 1);
    } else if (f.confirmation == "deterministic") {
      d.report.set_deterministic(d.report.deterministic() + 1);
      ++b[{f.mode, "arch", f.arch}];
      ++b[{f.mode, "task", f.task}];
    } else {
      d.report.set_pending(d.report.pending() + 1);
    }
  }
  CountFixes(w, d.head, d.quarantined, &c);
  std::vector<int64_t> history;  // prior kept sweeps of the line, newest first
  for (const auto& s : d.line) {
    if (s.id != d.head.id && s.kept && history.size() < kDropWindow) history.push_back(s.id);
  }
  std::vector<int64_t> ids = history;
  ids.push_back(d.head.id);
  const Rates rates = GroupRates(w, ids, d.head.modes);
  const auto tonight = rates.find(d.head.id);
  if (tonight == rates.end()) return;
  d.report.set_tests(static_cast<int64_t>(tonight->second.size()));
  for (const auto& [key, now] : tonight->second) {
    std::vector<double> past;  // oldest first
    for (auto it = history.rbegin(); it != history.rend(); ++it) {
      auto sw = rates.find(*it);
      if (sw == rates.end()) continue;
      auto g = sw->second.find(key);
      if (g != sw->second.end()) past.push_back(g->second.first);
    }
    pb::GroupTest t;
    t.set_kind(std::get<1>(key));
    t.set_group(std::get<2>(key));
    t.set_flips(b.count(key) ? b.at(key) : 0);
    t.set_fixes(c.count(key) ? c.at(key) : 0);
    t.set_p(query::McNemarOneSidedP(t.flips(), t.fixes()));
    t.set_mcnemar(query::BonferroniSignificant(t.p(), d.report.tests()));
    const query::DropVerdict drop = query::CheckDrop(past, now.first, now.second);
    t.set_median(drop.median);
    t.set_rate(now.first);
    t.set_drop(drop.fired);
    if (!t.mcnemar() && !t.drop()) continue;
    auto mode = proto::ModeFromName(std::get<0>(key));
    t.set_mode(mode ? *mode : pb::MODE_UNSPECIFIED);
    d.fired.insert(key);
    *d.report.add_fired() = std::move(t);
  }
}

int SeverityRank(const std::string& s) { return s == "critical" ? 2 : s == "major" ? 1 : 0; }

// A model of an alert: its class and task, the modes it regressed in for the alert's cause, and
// for drift what a human reads of its step.
struct Member {
  std::string model_id, arch, task, detail;
  std::set<std::string> modes;
};

// The mode an alert is keyed by: a suspect op is one root cause whatever the mode it broke (one
// wrong kernel fails eager, compile and train alike), so its alert spans modes ('', its modes a
// dimension of the alert); any other cause is read per mode (an op that only the compiler
// refuses, an error of one path).
std::string AlertMode(const Cause& cause, const std::string& mode) {
  return cause.kind == "suspect" ? "" : mode;
}

// "{compile,eager}": a text[] literal of sorted names (the modes a member or an alert covers).
std::string ModesArray(const std::set<std::string>& modes) {
  return TextArray(std::vector<std::string>(modes.begin(), modes.end()));
}

// One alert for one (mode, cause) of the head's regressions (mode '' for a suspect op: every
// mode): opened, reopened (it was resolved) or updated (an alert that already counted this sweep
// is left alone); its models added with their modes (a drift model's detail refreshed) and its
// modes widened to theirs; its severity from its breadth and whether a group test fired on them
// in a mode they regressed in (never lowered), or always a warning for drift.
void RaiseAlert(pqxx::transaction_base& w, Detection& d, const std::string& mode,
                const Cause& cause, const std::vector<Member>& models) {
  std::set<std::string> modes;
  for (const Member& m : models) modes.insert(m.modes.begin(), m.modes.end());
  pqxx::result a = w.exec_params(R"(
    SELECT alert_id, state, checked_sweep, severity FROM alerts
    WHERE line = $1 AND mode = $2 AND cause_kind = $3 AND cause = $4 FOR UPDATE)",
                                 d.head.line, mode, cause.kind, cause.key);
  int64_t id = 0;
  std::string severity = "warning";
  if (a.empty()) {
    id = w.exec_params(R"(
      INSERT INTO alerts (line, mode, modes, cause_kind, cause, cause_text, severity, first_sweep,
                          last_sweep, checked_sweep)
      VALUES ($1, $2, $7::text[], $3, $4, $5, 'warning', $6, $6, $6) RETURNING alert_id)",
                       d.head.line, mode, cause.kind, cause.key, cause.text, d.head.id,
                       ModesArray(modes))[0][0]
             .as<int64_t>();
    d.report.add_opened(id);
  } else {
    id = a[0][0].as<int64_t>();
    if (a[0][2].as<int64_t>() >= d.head.id) return;
    const bool resolved = std::string(a[0][1].c_str()) == "resolved";
    severity = a[0][3].c_str();
    w.exec_params(R"(
      UPDATE alerts SET state = CASE WHEN $3 THEN 'open' ELSE state END,
             reopened = reopened + CASE WHEN $3 THEN 1 ELSE 0 END, clean_sweeps = 0,
             last_sweep = $2, checked_sweep = $2, updated_at = now(),
             modes = ARRAY(SELECT DISTINCT x FROM unnest(modes || $4::text[]) AS x ORDER BY x)
      WHERE alert_id = $1)",
                  id, d.head.id, resolved, ModesArray(modes));
    resolved ? d.report.add_reopened(id) : d.report.add_updated(id);
  }
  std::vector<std::string> ids, archs, tasks, details, member_modes;
  bool fired = false;
  for (const Member& m : models) {
    ids.push_back(m.model_id);
    archs.push_back(m.arch);
    tasks.push_back(m.task);
    details.push_back(m.detail);
    member_modes.push_back(ModesArray(m.modes));
    for (const std::string& in : m.modes) {
      fired = fired || d.fired.count({in, "arch", m.arch}) || d.fired.count({in, "task", m.task});
    }
  }
  w.exec_params(R"(
    INSERT INTO alert_models (alert_id, model_id, arch, task, sweep_id, detail, modes)
    SELECT $1, u.m, u.a, u.t, $5, u.d, u.o::text[]
    FROM unnest($2::text[], $3::text[], $4::text[], $6::text[], $7::text[]) AS u(m, a, t, d, o)
    ON CONFLICT (alert_id, model_id) DO UPDATE SET
      detail = CASE WHEN excluded.detail <> '' THEN excluded.detail ELSE alert_models.detail END,
      modes = ARRAY(SELECT DISTINCT x FROM unnest(alert_models.modes || excluded.modes) AS x
                    ORDER BY x))",
                id, TextArray(ids), TextArray(archs), TextArray(tasks), d.head.id,
                TextArray(details), TextArray(member_modes));
  if (cause.kind == "drift") return;  // a warning: the model still passes
  pqxx::result n = w.exec_params(
      "SELECT count(*), count(DISTINCT arch) FROM alert_models WHERE alert_id = $1", id);
  const std::string now = query::AlertSeverity(n[0][0].as<int64_t>(), n[0][1].as<int64_t>(), fired);
  if (SeverityRank(now) > SeverityRank(severity)) severity = now;
  w.exec_params("UPDATE alerts SET severity = $2 WHERE alert_id = $1", id, severity);
}

// The head's deterministic regressions, quarantined ones left out, one alert per (mode, cause),
// a suspect op's across modes (AlertMode); its drifting models, one warning per (mode, metric).
void RaiseAlerts(pqxx::transaction_base& w, Detection& d) {
  // (alert mode, cause) -> model -> member
  std::map<std::pair<std::string, Cause>, std::map<std::string, Member>> by_cause;
  const auto add = [&](const std::string& mode, const Cause& cause, const Member& m) {
    Member& in = by_cause[{AlertMode(cause, mode), cause}].try_emplace(m.model_id, m).first->second;
    in.modes.insert(mode);
  };
  for (const Failing& f : d.failing) {
    if (f.base_status != "pass" || f.confirmation != "deterministic") continue;
    if (d.quarantined.count({f.model_id, f.mode})) continue;
    add(f.mode, f.cause, {f.model_id, f.arch, f.task, "", {}});
  }
  for (const DriftRow& r : d.drift) {
    add(r.mode, DriftCause(r.metric), {r.model_id, r.arch, r.task, r.detail, {}});
  }
  for (const auto& [key, members] : by_cause) {
    std::vector<Member> models;
    for (const auto& [id, m] : members) models.push_back(m);
    RaiseAlert(w, d, key.first, key.second, models);
  }
}

// The line's other unresolved alerts in a mode the head ran (one of its modes, for an alert
// across modes): a cause still failing in the head (in one of those modes) keeps its alert
// (last_sweep, no clean sweeps); otherwise one more clean sweep, and the third resolves it.
void AgeAlerts(pqxx::transaction_base& w, Detection& d) {
  pqxx::result alerts = w.exec_params(R"(
    SELECT alert_id, modes, cause_kind, cause, clean_sweeps FROM alerts
    WHERE line = $1 AND kind = 'accuracy' AND state <> 'resolved' AND checked_sweep < $2
      AND modes && $3::text[]
    ORDER BY alert_id FOR UPDATE)",
                                      d.head.line, d.head.id, TextArray(d.head.modes));
  for (const auto& r : alerts) {
    const int64_t id = r[0].as<int64_t>();
    const Cause cause{r[2].c_str(), r[3].c_str(), ""};
    const auto modes = ParseTextArray(r[1]);
    if (std::any_of(modes.begin(), modes.end(),
                    [&](const std::string& m) { return d.seen.count({m, cause}) > 0; })) {
      w.exec_params(R"(
        UPDATE alerts SET last_sweep = $2, checked_sweep = $2, clean_sweeps = 0,
               updated_at = now() WHERE alert_id = $1)",
                    id, d.head.id);
      continue;
    }
    const int clean = r[4].as<int>() + 1;
    const bool resolve = clean >= kResolveAfterClean;
    w.exec_params(R"(
      UPDATE alerts SET checked_sweep = $2, clean_sweeps = $3, updated_at = now(),
             state = CASE WHEN $4 THEN 'resolved' ELSE state END
      WHERE alert_id = $1)",
                  id, d.head.id, clean, resolve);
    if (resolve) d.report.add_resolved(id);
  }
}

}  // namespace

absl::StatusOr<pb::DetectRegressionsResponse> Store::DetectRegressions(int64_t sweep_id,
                                                                       int64_t baseline) {
  return impl_->Run("DetectRegressions", [&]() -> absl::StatusOr<pb::DetectRegressionsResponse> {
    pqxx::work w(*impl_->conn);
    w.exec(kLock);
    auto head = ReadHead(w, sweep_id, baseline);
    if (!head.ok()) return head.status();
    // A sweep that just ended has no planner statistics yet (autovacuum comes later); without
    // them the joins below nest loops over its whole partition. ANALYZE samples it (30k rows
    // at most) and its model_runs: at 2,020 models x 2 modes, detection took 3.1 s without, 0.13 s
    // with (alerts_test).
    w.exec("ANALYZE results_" + std::to_string(sweep_id) + ", model_runs_" +
           std::to_string(sweep_id));
    MaterializeSweep(w, sweep_id);  // the group counters the drop rule reads (kept once)
    Detection d;
    d.head = *head;
    d.line = LineSweeps(w, d.head);
    d.writes = std::none_of(d.line.begin(), d.line.end(),
                            [&](const LineSweep& s) { return s.id > sweep_id && s.detected; });
    // History is what came before the head: a newer sweep (done, not yet detected) is not.
    d.line.erase(std::remove_if(d.line.begin(), d.line.end(),
                                [&](const LineSweep& s) { return s.id > sweep_id; }),
                 d.line.end());
    d.report.set_sweep_id(sweep_id);
    d.report.set_baseline_sweep_id(d.head.baseline);
    d.report.set_line(d.head.line);
    UpdateQuarantine(w, d);
    d.failing = ReadFailing(w, d.head);
    for (const Failing& f : d.failing) d.seen.insert({f.mode, f.cause});
    TestGroups(w, d);
    FindHeadDrift(w, d);
    PerfDetection perf{d.head.id, d.head.baseline,           d.head.line, d.head.modes, {},
                       d.writes,  impl_->opts.perf_threshold};
    for (const LineSweep& s : d.line) perf.line_sweeps.push_back(s.id);
    DetectPerformance(w, perf, &d.report);  // kind performance: its own alerts (perf_detection.h)
    if (d.writes) {
      RaiseAlerts(w, d);
      AgeAlerts(w, d);
      w.exec_params(
          "UPDATE sweeps SET detected_at = now() WHERE sweep_id = $1 "
          "AND detected_at IS NULL",
          sweep_id);
    }
    w.commit();
    return d.report;
  });
}

absl::StatusOr<int> Store::DetectDoneSweeps(int max) {
  auto ids = impl_->Run("DetectDoneSweeps", [&]() -> absl::StatusOr<std::vector<int64_t>> {
    pqxx::nontransaction n(*impl_->conn);
    std::vector<int64_t> out;
    for (const auto& r : n.exec_params(R"(
           SELECT sweep_id FROM sweeps WHERE state = 'done' AND baseline_sweep IS NOT NULL
             AND detected_at IS NULL ORDER BY sweep_id LIMIT $1)",
                                       std::max(0, max))) {
      out.push_back(r[0].as<int64_t>());
    }
    return out;
  });
  if (!ids.ok()) return ids.status();
  int done = 0;
  for (int64_t id : *ids) {
    auto d = DetectRegressions(id, 0);
    if (d.ok()) {
      ++done;
      continue;
    }
    if (d.status().code() != absl::StatusCode::kFailedPrecondition) return d.status();
    // Its baseline was pruned: nothing to detect against, ever. Marked, so it is not retried.
    auto st = impl_->Run("DetectDoneSweeps", [&]() -> absl::Status {
      pqxx::work w(*impl_->conn);
      w.exec_params("UPDATE sweeps SET detected_at = now() WHERE sweep_id = $1", id);
      w.commit();
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
  }
  return done;
}

std::string ProfileLine(const std::string& name) {
  size_t end = name.size();
  bool digit = false;
  while (end > 0 &&
         (std::isdigit(static_cast<unsigned char>(name[end - 1])) || name[end - 1] == '.')) {
    digit = digit || name[end - 1] != '.';
    --end;
  }
  if (!digit || end < 2 || name[end - 1] != '-') return name;
  return name.substr(0, end - 1);
}

}  // namespace ts::store
