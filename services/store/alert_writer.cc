#include "services/store/alert_writer.h"

#include "services/query/regression_stats.h"
#include "services/store/store_internal.h"

namespace ts::store {
namespace {

int SeverityRank(const std::string& s) { return s == "critical" ? 2 : s == "major" ? 1 : 0; }

// "{compile,eager}": a text[] literal of sorted names.
std::string ModesArray(const std::set<std::string>& modes) {
  return TextArray(std::vector<std::string>(modes.begin(), modes.end()));
}

// Opens, reopens or updates the alert of `a`'s key with its modes; its id, or 0 where this
// sweep counted already. `severity` is the alert's severity so far.
int64_t OpenOrUpdate(pqxx::transaction_base& w, const AlertWrite& a, const std::string& modes,
                     std::string* severity, pb::DetectRegressionsResponse* report) {
  pqxx::result found = w.exec_params(R"(
    SELECT alert_id, state, checked_sweep, severity FROM alerts
    WHERE line = $1 AND mode = $2 AND cause_kind = $3 AND cause = $4 FOR UPDATE)",
                                     a.line, a.mode, a.cause_kind, a.cause);
  *severity = "warning";
  if (found.empty()) {
    const int64_t id = w.exec_params(R"(
      INSERT INTO alerts (line, mode, modes, cause_kind, cause, cause_text, severity, first_sweep,
                          last_sweep, checked_sweep, kind)
      VALUES ($1, $2, $7::text[], $3, $4, $5, 'warning', $6, $6, $6, $8) RETURNING alert_id)",
                                     a.line, a.mode, a.cause_kind, a.cause, a.cause_text, a.head,
                                     modes, a.kind)[0][0]
                           .as<int64_t>();
    report->add_opened(id);
    return id;
  }
  const int64_t id = found[0][0].as<int64_t>();
  if (found[0][2].as<int64_t>() >= a.head) return 0;  // this sweep counted already
  const bool resolved = std::string(found[0][1].c_str()) == "resolved";
  *severity = found[0][3].c_str();
  w.exec_params(R"(
    UPDATE alerts SET state = CASE WHEN $3 THEN 'open' ELSE state END,
           reopened = reopened + CASE WHEN $3 THEN 1 ELSE 0 END, clean_sweeps = 0,
           last_sweep = $2, checked_sweep = $2, updated_at = now(),
           modes = ARRAY(SELECT DISTINCT x FROM unnest(modes || $4::text[]) AS x ORDER BY x)
    WHERE alert_id = $1)",
                id, a.head, resolved, modes);
  resolved ? report->add_reopened(id) : report->add_updated(id);
  return id;
}

}  // namespace

void WriteAlert(pqxx::transaction_base& w, const AlertWrite& a,
                const std::vector<AlertMember>& members, pb::DetectRegressionsResponse* report) {
  std::set<std::string> modes;
  for (const AlertMember& m : members) modes.insert(m.modes.begin(), m.modes.end());
  std::string severity;
  const int64_t id = OpenOrUpdate(w, a, ModesArray(modes), &severity, report);
  if (id == 0) return;
  std::vector<std::string> ids, archs, tasks, details, member_modes;
  for (const AlertMember& m : members) {
    ids.push_back(m.model_id);
    archs.push_back(m.arch);
    tasks.push_back(m.task);
    details.push_back(m.detail);
    member_modes.push_back(ModesArray(m.modes));
  }
  w.exec_params(R"(
    INSERT INTO alert_models (alert_id, model_id, arch, task, sweep_id, detail, modes)
    SELECT $1, u.m, u.a, u.t, $5, u.d, u.o::text[]
    FROM unnest($2::text[], $3::text[], $4::text[], $6::text[], $7::text[]) AS u(m, a, t, d, o)
    ON CONFLICT (alert_id, model_id) DO UPDATE SET
      detail = CASE WHEN excluded.detail <> '' THEN excluded.detail ELSE alert_models.detail END,
      sweep_id = CASE WHEN $8 THEN excluded.sweep_id ELSE alert_models.sweep_id END,
      modes = ARRAY(SELECT DISTINCT x FROM unnest(alert_models.modes || excluded.modes) AS x
                    ORDER BY x))",
                id, TextArray(ids), TextArray(archs), TextArray(tasks), a.head, TextArray(details),
                TextArray(member_modes), a.refresh_member_sweep);
  if (!a.rated) return;
  pqxx::result n = w.exec_params(
      "SELECT count(*), count(DISTINCT arch) FROM alert_models WHERE alert_id = $1", id);
  const std::string now =
      query::AlertSeverity(n[0][0].as<int64_t>(), n[0][1].as<int64_t>(), a.group_fired);
  if (SeverityRank(now) > SeverityRank(severity)) severity = now;
  w.exec_params("UPDATE alerts SET severity = $2 WHERE alert_id = $1", id, severity);
}

}  // namespace ts::store
