// Alerts as the Query API reads them (ListAlerts) and acknowledges them (AckAlert). Detection
// writes them (detection.cc).
#include <map>
#include <set>

#include "proto/names.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

constexpr const char* kAlertColumns = R"(
  a.alert_id, a.state, a.line, a.mode, a.cause_kind, a.cause, a.cause_text, a.severity,
  a.first_sweep, a.last_sweep, a.clean_sweeps, a.reopened, coalesce(a.ack_note, ''),
  coalesce(a.ack_by, ''), (extract(epoch FROM a.ack_at) * 1000000)::bigint,
  (extract(epoch FROM a.created_at) * 1000000)::bigint,
  (extract(epoch FROM a.updated_at) * 1000000)::bigint, a.kind, a.modes)";
// How many columns kAlertColumns selects (AlertOf reads them by position; a query that selects
// more puts its own after them).
constexpr int kAlertColumnCount = 19;

void SetMicros(const pqxx::field& f, google::protobuf::Timestamp* t) {
  if (f.is_null()) return;
  const int64_t us = f.as<int64_t>();
  t->set_seconds(us / 1000000);
  t->set_nanos(static_cast<int32_t>((us % 1000000) * 1000));
}

// A text[] of mode names into `out`, in Mode order (names this build does not know are left
// out).
void AddModes(const pqxx::field& f, google::protobuf::RepeatedField<int>* out) {
  std::set<int> modes;
  for (const auto& name : ParseTextArray(f)) {
    if (auto m = proto::ModeFromName(name)) modes.insert(*m);
  }
  for (int m : modes) out->Add(m);
}

pb::Alert AlertOf(const pqxx::row& r) {
  pb::Alert a;
  a.set_alert_id(r[0].as<int64_t>());
  a.set_state(r[1].c_str());
  a.set_line(r[2].c_str());
  auto mode = proto::ModeFromName(r[3].c_str());
  a.set_mode(mode ? *mode : pb::MODE_UNSPECIFIED);
  a.set_cause_kind(r[4].c_str());
  a.set_cause(r[5].c_str());
  a.set_cause_text(r[6].c_str());
  a.set_severity(r[7].c_str());
  a.set_first_sweep_id(r[8].as<int64_t>());
  a.set_last_sweep_id(r[9].as<int64_t>());
  a.set_clean_sweeps(r[10].as<int>());
  a.set_reopened(r[11].as<int>());
  a.set_ack_note(r[12].c_str());
  a.set_ack_by(r[13].c_str());
  SetMicros(r[14], a.mutable_ack_at());
  SetMicros(r[15], a.mutable_created_at());
  SetMicros(r[16], a.mutable_updated_at());
  a.set_kind(r[17].c_str());
  if (a.cause_kind() == "perf_op") a.set_op(a.cause());
  AddModes(r[18], a.mutable_modes());
  return a;
}

// Each alert's models (by model_id), and its classes and tasks (sorted, distinct).
void AddModels(pqxx::transaction_base& t, std::vector<pb::Alert>* alerts) {
  if (alerts->empty()) return;
  std::vector<int64_t> ids;
  std::map<int64_t, pb::Alert*> by_id;
  for (auto& a : *alerts) {
    ids.push_back(a.alert_id());
    by_id[a.alert_id()] = &a;
  }
  std::map<int64_t, std::pair<std::set<std::string>, std::set<std::string>>> groups;
  for (const auto& r : t.exec_params(R"(
         SELECT alert_id, model_id, arch, task, sweep_id, detail, modes FROM alert_models
         WHERE alert_id = ANY($1::bigint[]) ORDER BY alert_id, model_id)",
                                     IdArray(ids))) {
    const int64_t id = r[0].as<int64_t>();
    pb::AlertModel* m = by_id.at(id)->add_models();
    m->set_model_id(r[1].c_str());
    m->set_arch(r[2].c_str());
    m->set_task(r[3].c_str());
    m->set_sweep_id(r[4].as<int64_t>());
    m->set_detail(r[5].c_str());
    AddModes(r[6], m->mutable_modes());
    groups[id].first.insert(m->arch());
    groups[id].second.insert(m->task());
  }
  for (const auto& [id, g] : groups) {
    for (const auto& arch : g.first) by_id.at(id)->add_archs(arch);
    for (const auto& task : g.second) by_id.at(id)->add_tasks(task);
  }
}

}  // namespace

absl::StatusOr<std::vector<pb::Alert>> Store::ListAlerts(const std::string& state,
                                                         int64_t before_id, int limit) {
  return impl_->Run("ListAlerts", [&]() -> absl::StatusOr<std::vector<pb::Alert>> {
    ReadTxn t(*impl_->conn);
    std::vector<pb::Alert> out;
    for (const auto& r : t.exec_params(std::string("SELECT ") + kAlertColumns + R"(
           FROM alerts a WHERE ($1 = '' OR a.state = $1) AND ($2 = 0 OR a.alert_id < $2)
           ORDER BY a.alert_id DESC LIMIT $3)",
                                       state, before_id, limit)) {
      out.push_back(AlertOf(r));
    }
    AddModels(t, &out);
    return out;
  });
}

absl::StatusOr<pb::Alert> Store::AckAlert(int64_t alert_id, const std::string& note,
                                          const std::string& by) {
  return impl_->Run("AckAlert", [&]() -> absl::StatusOr<pb::Alert> {
    pqxx::work w(*impl_->conn);
    pqxx::result s =
        w.exec_params("SELECT state FROM alerts WHERE alert_id = $1 FOR UPDATE", alert_id);
    const std::string name = "alert " + std::to_string(alert_id);
    if (s.empty()) return absl::NotFoundError("alert_id: no " + name);
    if (std::string(s[0][0].c_str()) == "resolved") {
      return absl::FailedPreconditionError("alert_id: " + name + " is resolved");
    }
    w.exec_params(R"(
      UPDATE alerts SET state = 'acknowledged', ack_note = $2, ack_by = $3, ack_at = now(),
             updated_at = now() WHERE alert_id = $1)",
                  alert_id, note, by.empty() ? std::string("admin") : by);
    std::vector<pb::Alert> out;
    for (const auto& r : w.exec_params(
             std::string("SELECT ") + kAlertColumns + " FROM alerts a WHERE a.alert_id = $1",
             alert_id)) {
      out.push_back(AlertOf(r));
    }
    AddModels(w, &out);
    w.commit();
    return out.at(0);
  });
}

absl::StatusOr<Store::AlertBatch> Store::AlertsToDeliver() {
  return impl_->Run("AlertsToDeliver", [&]() -> absl::StatusOr<AlertBatch> {
    ReadTxn t(*impl_->conn);
    AlertBatch out;
    for (const auto& r : t.exec(std::string("SELECT ") + kAlertColumns + R"(,
           a.delivered_at IS DISTINCT FROM a.updated_at
           FROM alerts a
           WHERE a.state <> 'resolved' OR a.delivered_at IS DISTINCT FROM a.updated_at
           ORDER BY a.alert_id)")) {
      out.alerts.push_back(AlertOf(r));
      if (r[kAlertColumnCount].as<bool>()) ++out.changed;
    }
    AddModels(t, &out.alerts);
    return out;
  });
}

absl::Status Store::MarkAlertsDelivered(const std::vector<pb::Alert>& delivered) {
  return impl_->Run("MarkAlertsDelivered", [&]() -> absl::Status {
    std::vector<int64_t> ids, micros;
    for (const auto& a : delivered) {
      ids.push_back(a.alert_id());
      micros.push_back(a.updated_at().seconds() * 1000000 + a.updated_at().nanos() / 1000);
    }
    // delivered_at = the updated_at of the version that was sent, and only where that is still
    // the alert's version: a change committed while the post was in flight (even one stamped
    // before the snapshot was read, by a transaction that began earlier) stays undelivered.
    pqxx::work w(*impl_->conn);
    w.exec_params(R"(
      UPDATE alerts a SET delivered_at = a.updated_at
      FROM unnest($1::bigint[], $2::bigint[]) AS u(id, us)
      WHERE a.alert_id = u.id AND (extract(epoch FROM a.updated_at) * 1000000)::bigint = u.us)",
                  IdArray(ids), IdArray(micros));
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<pb::Alert>> Store::AlertsChangedSince(int64_t since_micros) {
  return impl_->Run("AlertsChangedSince", [&]() -> absl::StatusOr<std::vector<pb::Alert>> {
    ReadTxn t(*impl_->conn);
    std::vector<pb::Alert> out;
    for (const auto& r : t.exec_params(std::string("SELECT ") + kAlertColumns + R"(
           FROM alerts a WHERE a.updated_at >= to_timestamp($1::double precision / 1000000)
           ORDER BY a.alert_id DESC LIMIT 1000)",
                                       since_micros)) {
      out.push_back(AlertOf(r));
    }
    AddModels(t, &out);
    return out;
  });
}

absl::StatusOr<std::vector<Store::OpenRegressions>> Store::OpenRegressionsByTask() {
  return impl_->Run("OpenRegressionsByTask",
                    [&]() -> absl::StatusOr<std::vector<OpenRegressions>> {
    ReadTxn t(*impl_->conn);
    std::vector<OpenRegressions> out;
    for (const auto& r : t.exec(R"(
           SELECT m.task, a.severity, count(DISTINCT a.alert_id)
           FROM alerts a JOIN alert_models m USING (alert_id)
           WHERE a.state <> 'resolved' AND a.cause_kind <> 'drift'
           GROUP BY m.task, a.severity ORDER BY 1, 2)")) {
      out.push_back({r[0].c_str(), r[1].c_str(), r[2].as<int64_t>()});
    }
    return out;
  });
}

absl::StatusOr<std::vector<pb::QuarantineEntry>> Store::ListQuarantine() {
  return impl_->Run("ListQuarantine", [&]() -> absl::StatusOr<std::vector<pb::QuarantineEntry>> {
    ReadTxn t(*impl_->conn);
    std::vector<pb::QuarantineEntry> out;
    for (const auto& r : t.exec(R"(
           SELECT q.model_id, q.mode, q.since_sweep, q.clean_passes, coalesce(m.arch, ''),
                  coalesce(m.task, '')
           FROM quarantine q LEFT JOIN models m USING (model_id)
           ORDER BY q.model_id, q.mode)")) {
      pb::QuarantineEntry e;
      e.set_model_id(r[0].c_str());
      auto mode = proto::ModeFromName(r[1].c_str());
      e.set_mode(mode ? *mode : pb::MODE_UNSPECIFIED);
      e.set_since_sweep_id(r[2].as<int64_t>());
      e.set_clean_passes(r[3].as<int>());
      e.set_arch(r[4].c_str());
      e.set_task(r[5].c_str());
      out.push_back(std::move(e));
    }
    return out;
  });
}

}  // namespace ts::store
