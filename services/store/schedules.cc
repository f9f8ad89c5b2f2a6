// Schedules (issue 13): adding, listing, enabling and removing them, and the ticker's step that
// starts the due ones exactly once across schedulers (schema/0011_schedules.sql).
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <regex>

#include "services/common/cron.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

using TimePoint = Store::TimePoint;

double Epoch(TimePoint t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

// next_due for a spec after `now`: NULL (nullopt) when it never matches again.
std::optional<double> NextDue(const common::CronSpec& spec, TimePoint now) {
  auto next = spec.Next(now);
  if (!next) return std::nullopt;
  return Epoch(*next);
}

constexpr const char* kRfc3339 = "to_char(%s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')";

std::string Rfc(const char* column) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), kRfc3339, column);
  return buf;
}

const std::string& ScheduleColumns() {
  static const std::string cols =
      "s.schedule_id, s.name, s.cron, p.name, p.sha, s.filter::text, s.sample, s.baseline, "
      "s.priority, s.enabled, coalesce(" +
      Rfc("s.next_due") +
      ", ''), s.modes, s.seed, "
      "p.body, s.model_timeout_s, s.audit_ops";
  return cols;
}

pb::Schedule ScheduleFromRow(const pqxx::row& r) {
  pb::Schedule s;
  s.set_schedule_id(r[0].as<int64_t>());
  s.set_name(r[1].c_str());
  s.set_cron(r[2].c_str());
  s.set_profile_name(r[3].c_str());
  s.set_profile_sha(r[4].c_str());
  (void)google::protobuf::util::JsonStringToMessage(r[5].c_str(), s.mutable_filter());
  s.set_sample(r[6].as<int64_t>());
  s.set_baseline(r[7].c_str());
  s.set_priority(r[8].as<int>());
  s.set_enabled(r[9].as<bool>());
  s.set_next_due(r[10].c_str());
  for (const auto& m : ParseTextArray(r[11])) s.add_modes(m);
  s.set_seed(static_cast<uint64_t>(r[12].as<int64_t>()));
  return s;
}

void AddRuns(pqxx::transaction_base& t, int runs, pb::Schedule* s) {
  if (runs <= 0) return;
  for (const auto& r :
       t.exec_params("SELECT " + Rfc("due_at") +
                         ", outcome, coalesce(sweep_id, 0), detail "
                         "FROM schedule_runs WHERE schedule_id = $1 ORDER BY due_at DESC LIMIT $2",
                     s->schedule_id(), runs)) {
    pb::ScheduleRun* run = s->add_runs();
    run->set_due_at(r[0].c_str());
    run->set_outcome(r[1].c_str());
    run->set_sweep_id(r[2].as<int64_t>());
    run->set_detail(r[3].c_str());
  }
}

absl::StatusOr<pb::Schedule> ReadSchedule(pqxx::transaction_base& t, const std::string& name,
                                          int runs) {
  pqxx::result r = t.exec_params("SELECT " + ScheduleColumns() +
                                     " FROM schedules s JOIN profiles p USING (profile_id) "
                                     "WHERE s.name = $1",
                                 name);
  if (r.empty()) return absl::NotFoundError("name: no schedule '" + name + "'");
  pb::Schedule s = ScheduleFromRow(r[0]);
  AddRuns(t, runs, &s);
  return s;
}

// The sweep a due schedule starts, from its row (ScheduleColumns) and its baseline.
pb::CreateSweepRequest SweepOf(const pqxx::row& r, int64_t baseline) {
  pb::CreateSweepRequest c;
  c.set_name(r[1].c_str());
  (void)google::protobuf::util::JsonStringToMessage(r[5].c_str(), c.mutable_filter());
  c.set_sample(r[6].as<int64_t>());
  c.set_priority(r[8].as<int>());
  for (const auto& m : ParseTextArray(r[11])) c.add_modes(m);
  c.set_seed(static_cast<uint64_t>(r[12].as<int64_t>()));
  c.mutable_profile()->set_name(r[3].c_str());
  c.mutable_profile()->set_body(r[13].c_str());
  c.set_model_timeout_s(r[14].as<double>());
  c.set_audit_ops(r[15].as<bool>());
  c.set_baseline_sweep_id(baseline);
  return c;
}

// One due schedule, if any is left that no other scheduler holds: its sweep started, or its
// skip or failure recorded, and next_due moved past `now`. Returns the outcome, or "" when no
// schedule was due.
std::string HandleOneDue(pqxx::connection& conn, TimePoint now) {
  pqxx::work w(conn);
  pqxx::result due = w.exec_params("SELECT " + ScheduleColumns() +
                                       ", s.next_due FROM schedules s "
                                       "JOIN profiles p USING (profile_id) "
                                       "WHERE s.enabled AND s.next_due <= to_timestamp($1) "
                                       "ORDER BY s.next_due LIMIT 1 FOR UPDATE OF s SKIP LOCKED",
                                   Epoch(now));
  if (due.empty()) return "";
  const pqxx::row row = due[0];
  const int64_t id = row[0].as<int64_t>();
  const std::string due_at = row[16].c_str();
  std::string outcome, detail;
  int64_t sweep_id = 0;
  pqxx::result running = w.exec_params(
      "SELECT sweep_id FROM sweeps WHERE schedule_id = $1 AND state = 'running' "
      "ORDER BY sweep_id DESC LIMIT 1",
      id);
  if (!running.empty()) {
    outcome = "skipped";
    sweep_id = running[0][0].as<int64_t>();
    detail = "sweep " + std::to_string(sweep_id) + " of the schedule is still running";
  } else {
    int64_t baseline = 0;
    if (std::string(row[7].c_str()) == "previous") {
      pqxx::result prev = w.exec_params(
          "SELECT sweep_id FROM sweeps WHERE schedule_id = $1 AND state = 'done' "
          "ORDER BY sweep_id DESC LIMIT 1",
          id);
      if (!prev.empty()) baseline = prev[0][0].as<int64_t>();
    }
    // A savepoint: a refused sweep (the catalog lost the filter's models) rolls back alone and
    // the failure is still recorded with the schedule moved on.
    absl::StatusOr<pb::CreateSweepResponse> created = absl::InternalError("not run");
    w.exec("SAVEPOINT schedule_sweep");
    try {
      created = CreateSweepIn(w, SweepOf(row, baseline));
    } catch (const pqxx::broken_connection&) {
      throw;
    } catch (const std::exception& e) {
      created = absl::InternalError(e.what());
    }
    if (created.ok()) {
      w.exec_params("UPDATE sweeps SET schedule_id = $1 WHERE sweep_id = $2", id,
                    created->sweep_id());
      w.exec("RELEASE SAVEPOINT schedule_sweep");
    } else {
      w.exec("ROLLBACK TO SAVEPOINT schedule_sweep");
    }
    if (created.ok()) {
      outcome = "started";
      sweep_id = created->sweep_id();
      detail = std::to_string(created->models()) + " models in " +
               std::to_string(created->shards()) + " shards" +
               (baseline ? ", baseline sweep " + std::to_string(baseline) : "");
    } else {
      outcome = "failed";
      detail = std::string(created.status().message());
    }
  }
  auto spec = common::CronSpec::Parse(row[2].c_str());
  std::optional<double> next = spec.ok() ? NextDue(*spec, now) : std::nullopt;
  w.exec_params("UPDATE schedules SET next_due = to_timestamp($2) WHERE schedule_id = $1", id,
                next);
  w.exec_params(
      "INSERT INTO schedule_runs (schedule_id, due_at, outcome, sweep_id, detail) "
      "VALUES ($1, $2::timestamptz, $3, NULLIF($4, 0), $5) ON CONFLICT DO NOTHING",
      id, due_at, outcome, sweep_id, detail);
  w.commit();
  return outcome;
}

}  // namespace

absl::StatusOr<pb::Schedule> Store::AddSchedule(const pb::AddScheduleRequest& r, TimePoint now) {
  auto spec = common::CronSpec::Parse(r.cron());
  if (!spec.ok()) return spec.status();
  return impl_->Run("AddSchedule", [&]() -> absl::StatusOr<pb::Schedule> {
    pqxx::work w(*impl_->conn);
    if (!w.exec_params("SELECT 1 FROM schedules WHERE name = $1", r.name()).empty()) {
      return absl::AlreadyExistsError("name: a schedule named '" + r.name() +
                                      "' exists; remove it first");
    }
    // The filter must select models now: the same checks CreateSweep makes, rolled back (an
    // explicit savepoint; an exception leaves with the whole transaction).
    {
      w.exec("SAVEPOINT schedule_probe");
      pb::CreateSweepRequest c = r.sweep();
      c.set_name(r.name());
      auto created = CreateSweepIn(w, c);
      w.exec("ROLLBACK TO SAVEPOINT schedule_probe");
      if (!created.ok()) {
        return absl::Status(created.status().code(),
                            "sweep." + std::string(created.status().message()));
      }
    }
    const pb::CreateSweepRequest& c = r.sweep();
    std::string filter;
    (void)google::protobuf::util::MessageToJsonString(c.filter(), &filter);
    pqxx::result p = w.exec_params(
        "INSERT INTO profiles (name, sha, body) VALUES ($1, encode(sha256(convert_to($2, "
        "'UTF8')), 'hex'), $2) ON CONFLICT (sha) DO UPDATE SET name = profiles.name "
        "RETURNING profile_id",
        c.profile().name(), c.profile().body());
    std::vector<std::string> modes(c.modes().begin(), c.modes().end());
    w.exec_params(
        "INSERT INTO schedules (name, cron, profile_id, filter, sample, seed, modes, priority, "
        "baseline, model_timeout_s, audit_ops, enabled, next_due) "
        "VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7::text[], $8, $9, $10, $11, $12, "
        "to_timestamp($13))",
        r.name(), spec->text(), p[0][0].as<int64_t>(), filter, c.sample(),
        static_cast<int64_t>(c.seed()), TextArray(modes), c.priority(),
        r.baseline().empty() ? "previous" : r.baseline(), c.model_timeout_s(), c.audit_ops(),
        !r.disabled(), NextDue(*spec, now));
    auto out = ReadSchedule(w, r.name(), 0);
    if (out.ok()) w.commit();
    return out;
  });
}

absl::StatusOr<std::vector<pb::Schedule>> Store::ListSchedules(int runs) {
  return impl_->Run("ListSchedules", [&]() -> absl::StatusOr<std::vector<pb::Schedule>> {
    ReadTxn t(*impl_->conn);
    std::vector<pb::Schedule> out;
    for (const auto& r : t.exec("SELECT " + ScheduleColumns() +
                                " FROM schedules s JOIN profiles p USING (profile_id) "
                                "ORDER BY s.name")) {
      out.push_back(ScheduleFromRow(r));
      AddRuns(t, runs, &out.back());
    }
    return out;
  });
}

absl::Status Store::RemoveSchedule(const std::string& name) {
  return impl_->Run("RemoveSchedule", [&]() -> absl::Status {
    pqxx::work w(*impl_->conn);
    if (w.exec_params("DELETE FROM schedules WHERE name = $1 RETURNING 1", name).empty()) {
      return absl::NotFoundError("name: no schedule '" + name + "'");
    }
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<pb::Schedule> Store::SetScheduleEnabled(const std::string& name, bool enabled,
                                                       TimePoint now) {
  return impl_->Run("SetScheduleEnabled", [&]() -> absl::StatusOr<pb::Schedule> {
    pqxx::work w(*impl_->conn);
    pqxx::result r =
        w.exec_params("SELECT cron, enabled FROM schedules WHERE name = $1 FOR UPDATE", name);
    if (r.empty()) return absl::NotFoundError("name: no schedule '" + name + "'");
    if (enabled && !r[0][1].as<bool>()) {
      auto spec = common::CronSpec::Parse(r[0][0].c_str());
      if (!spec.ok()) return spec.status();
      w.exec_params("UPDATE schedules SET next_due = to_timestamp($2) WHERE name = $1", name,
                    NextDue(*spec, now));
    }
    w.exec_params("UPDATE schedules SET enabled = $2 WHERE name = $1", name, enabled);
    auto out = ReadSchedule(w, name, 5);
    if (out.ok()) w.commit();
    return out;
  });
}

absl::StatusOr<Store::ScheduleTick> Store::StartDueSchedules(TimePoint now) {
  return impl_->Run("StartDueSchedules", [&]() -> absl::StatusOr<ScheduleTick> {
    ScheduleTick tick;
    // Bounded: a tick handles at most this many, the next tick the rest.
    for (int i = 0; i < 64; ++i) {
      const std::string outcome = HandleOneDue(*impl_->conn, now);
      if (outcome.empty()) break;
      if (outcome == "started") ++tick.started;
      if (outcome == "skipped") ++tick.skipped;
      if (outcome == "failed") ++tick.failed;
    }
    return tick;
  });
}

}  // namespace ts::store
