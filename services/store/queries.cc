// Read queries for the Query service: sweeps, group counters, compact records, a model's
// history, op demand, graph breaks; and keeping a done sweep's answers (MaterializeSweep).
// They read, never lease or write results, and run on the scheduler's query pool.
#include <algorithm>
#include <cmath>

#include "proto/names.h"
#include "services/common/error_signature.h"
#include "services/store/queries_sql.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

// Live reads see one snapshot across their statements, while reports keep landing.
using ReadTxn = pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>;

void SetTime(const pqxx::field& micros, google::protobuf::Timestamp* t) {
  const int64_t us = micros.as<int64_t>();
  t->set_seconds(us / 1000000);
  t->set_nanos(static_cast<int32_t>((us % 1000000) * 1000));
}

constexpr const char* kSweepColumns = R"(
  s.sweep_id, s.name, s.state, p.name, p.sha, s.modes, s.sample, coalesce(s.baseline_sweep, 0),
  (extract(epoch FROM s.created_at) * 1000000)::bigint,
  (extract(epoch FROM s.finished_at) * 1000000)::bigint)";

// A SweepInfo from a kSweepColumns row, with the counts of its progress.
absl::StatusOr<pb::SweepInfo> SweepInfoOf(pqxx::transaction_base& w, const pqxx::row& row) {
  pb::SweepInfo s;
  s.set_sweep_id(row[0].as<int64_t>());
  s.set_name(row[1].c_str());
  s.set_state(row[2].c_str());
  s.set_profile(row[3].c_str());
  s.set_profile_sha(row[4].c_str());
  for (auto& m : ParseTextArray(row[5])) s.add_modes(std::move(m));
  s.set_sample(row[6].as<int64_t>());
  s.set_baseline_sweep_id(row[7].as<int64_t>());
  SetTime(row[8], s.mutable_created_at());
  if (!row[9].is_null()) SetTime(row[9], s.mutable_finished_at());
  auto p = Progress(w, s.sweep_id());
  if (!p.ok()) return p.status();
  s.set_models_expected(p->models_expected());
  s.set_models_recorded(p->models_recorded());
  s.set_failures(p->failures());
  return s;
}

// NOT_FOUND / FAILED_PRECONDITION for a sweep whose results cannot be read; else its state.
absl::StatusOr<std::string> Readable(pqxx::transaction_base& t, int64_t sweep_id,
                                     const std::string& field) {
  const std::string state = SweepState(t, sweep_id);
  const std::string id = std::to_string(sweep_id);
  if (state.empty()) return absl::NotFoundError(field + ": no sweep " + id);
  if (state == "pruned") {
    return absl::FailedPreconditionError(field + ": sweep " + id +
                                         " was pruned; its results are gone");
  }
  return state;
}

bool Materialized(pqxx::transaction_base& t, int64_t sweep_id) {
  return !t.exec_params("SELECT 1 FROM sweep_facts WHERE sweep_id = $1", sweep_id).empty();
}

std::vector<int64_t> ParseIdArray(const pqxx::field& f) {
  std::vector<int64_t> out;
  for (const auto& s : ParseTextArray(f)) out.push_back(std::stoll(s));
  return out;
}

GroupTally TallyOf(const pqxx::row& row) {
  GroupTally g{row[0].c_str(), row[1].c_str(), row[2].c_str(), row[3].as<int64_t>(),
               row[4].as<double>(), {}};
  const auto keys = ParseTextArray(row[5]);
  const auto counts = ParseIdArray(row[6]);
  for (size_t i = 0; i < keys.size() && i < counts.size(); ++i) {
    const size_t eq = keys[i].find('=');
    g.statuses.push_back({keys[i].substr(0, eq), keys[i].substr(eq + 1), counts[i]});
  }
  return g;
}

pb::ResultRow RecordOf(const pqxx::row& row) {
  pb::ResultRow r;
  r.set_model_id(row[0].c_str());
  r.set_task(row[1].c_str());
  r.set_arch(row[2].c_str());
  r.set_family(row[3].c_str());
  r.set_opcov_ratio(row[4].as<double>());
  r.set_total_ms(row[5].as<double>());
  for (const auto& kv : ParseTextArray(row[6])) {
    const size_t eq = kv.find('=');
    (*r.mutable_status())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return r;
}

pb::OpDemandRow OpRowOf(const pqxx::row& row) {
  pb::OpDemandRow o;
  o.set_op(row[0].c_str());
  o.set_models_blocked(row[1].as<int64_t>());
  o.set_models_fallback(row[2].as<int64_t>());
  o.set_models_break(row[3].as<int64_t>());
  o.set_blocks_alone(row[4].as<int64_t>());
  o.set_fallback_calls(row[5].as<int64_t>());
  o.set_fallback_ms(row[6].as<double>());
  for (auto& m : ParseTextArray(row[7])) o.add_example_models(std::move(m));
  return o;
}

pb::GraphBreakRow BreakRowOf(const pqxx::row& row) {
  pb::GraphBreakRow b;
  b.set_reason(row[0].c_str());
  b.set_op(row[1].c_str());
  b.set_models(row[2].as<int64_t>());
  b.set_breaks(row[3].as<int64_t>());
  for (auto& m : ParseTextArray(row[4])) b.add_example_models(std::move(m));
  return b;
}

std::string Paged(const char* statement, int64_t offset, int limit) {
  return std::string(statement) + " OFFSET " + std::to_string(offset) + " LIMIT " +
         std::to_string(limit);
}

}  // namespace

void MaterializeSweep(pqxx::transaction_base& w, int64_t sweep_id) {
  if (Materialized(w, sweep_id)) return;
  w.exec_params(std::string("INSERT INTO sweep_groups SELECT $1, q.* FROM (") + sql::kGroups +
                    ") q",
                sweep_id);
  w.exec_params(std::string("INSERT INTO sweep_verdicts SELECT $1, q.* FROM (") +
                    sql::kVerdicts + ") q",
                sweep_id);
  for (const char* mode : {"eager", "compile"}) {
    w.exec_params(std::string("INSERT INTO sweep_op_demand SELECT $1, $2, row_number() OVER "
                              "(), q.* FROM (") +
                      sql::kOpDemand + ") q",
                  sweep_id, mode);
  }
  w.exec_params(std::string("INSERT INTO sweep_breaks SELECT $1, row_number() OVER (), q.* "
                            "FROM (") +
                    sql::kBreaks + ") q",
                sweep_id);
  w.exec_params(std::string("INSERT INTO sweep_facts SELECT $1, q.* FROM (") + sql::kFacts +
                    ") q",
                sweep_id);
}

void DropMaterialized(pqxx::transaction_base& w, int64_t sweep_id) {
  for (const char* table : {"sweep_facts", "sweep_groups", "sweep_verdicts", "sweep_op_demand",
                            "sweep_breaks"}) {
    w.exec_params(std::string("DELETE FROM ") + table + " WHERE sweep_id = $1", sweep_id);
  }
}

absl::StatusOr<std::vector<pb::SweepInfo>> Store::ListSweeps(const pb::ListSweepsRequest& r,
                                                             int64_t before_id, int limit) {
  return impl_->Run("ListSweeps", [&]() -> absl::StatusOr<std::vector<pb::SweepInfo>> {
    pqxx::work w(*impl_->conn);
    const auto micros = [](const google::protobuf::Timestamp& t) {
      return std::to_string(t.seconds() * 1000000 + t.nanos() / 1000);
    };
    pqxx::result rows = w.exec_params(
        std::string("SELECT ") + kSweepColumns + R"(
        FROM sweeps s JOIN profiles p USING (profile_id)
        WHERE ($1 = 0 OR s.sweep_id < $1) AND ($2 = '' OR p.name = $2)
          AND ($3 = '' OR s.state = $3) AND strpos(s.name, $4) > 0
          AND ($5::bigint IS NULL OR s.created_at > to_timestamp($5::bigint / 1e6))
          AND ($6::bigint IS NULL OR s.created_at < to_timestamp($6::bigint / 1e6))
        ORDER BY s.sweep_id DESC LIMIT $7)",
        before_id, r.profile(), r.state(), r.name_contains(),
        r.has_created_after() ? std::optional<std::string>(micros(r.created_after()))
                              : std::nullopt,
        r.has_created_before() ? std::optional<std::string>(micros(r.created_before()))
                               : std::nullopt,
        limit);
    std::vector<pb::SweepInfo> out;
    for (const auto& row : rows) {
      auto s = SweepInfoOf(w, row);
      if (!s.ok()) return s.status();
      out.push_back(std::move(*s));
    }
    w.commit();  // Progress may have kept a done sweep's counts
    return out;
  });
}

absl::StatusOr<pb::SweepInfo> Store::GetSweepInfo(int64_t sweep_id, const std::string& field) {
  return impl_->Run("GetSweepInfo", [&]() -> absl::StatusOr<pb::SweepInfo> {
    pqxx::work w(*impl_->conn);
    pqxx::result rows = w.exec_params(std::string("SELECT ") + kSweepColumns +
                                          " FROM sweeps s JOIN profiles p USING (profile_id) "
                                          "WHERE s.sweep_id = $1",
                                      sweep_id);
    if (rows.empty()) return absl::NotFoundError(field + ": no sweep " + std::to_string(sweep_id));
    auto s = SweepInfoOf(w, rows[0]);
    if (s.ok()) w.commit();
    return s;
  });
}

absl::StatusOr<std::vector<GroupTally>> Store::SweepGroups(int64_t sweep_id,
                                                           const std::string& field) {
  return impl_->Run("SweepGroups", [&]() -> absl::StatusOr<std::vector<GroupTally>> {
    ReadTxn t(*impl_->conn);
    auto state = Readable(t, sweep_id, field);
    if (!state.ok()) return state.status();
    pqxx::result rows =
        Materialized(t, sweep_id)
            ? t.exec_params("SELECT task, family, arch, models, opcov_sum, statuses, counts "
                            "FROM sweep_groups WHERE sweep_id = $1",
                            sweep_id)
            : t.exec_params(sql::kGroups, sweep_id);
    std::vector<GroupTally> out;
    for (const auto& row : rows) out.push_back(TallyOf(row));
    return out;
  });
}

absl::StatusOr<std::vector<pb::ResultRow>> Store::SweepRecords(int64_t sweep_id,
                                                               const std::string& field) {
  return impl_->Run("SweepRecords", [&]() -> absl::StatusOr<std::vector<pb::ResultRow>> {
    ReadTxn t(*impl_->conn);
    auto state = Readable(t, sweep_id, field);
    if (!state.ok()) return state.status();
    pqxx::result rows =
        Materialized(t, sweep_id)
            ? t.exec_params("SELECT model_id, task, arch, family, opcov_ratio, total_ms, "
                            "statuses FROM sweep_verdicts WHERE sweep_id = $1 ORDER BY model_id",
                            sweep_id)
            : t.exec_params(std::string(sql::kVerdicts) + " ORDER BY mr.model_id", sweep_id);
    std::vector<pb::ResultRow> out;
    out.reserve(rows.size());
    for (const auto& row : rows) out.push_back(RecordOf(row));
    return out;
  });
}

absl::StatusOr<std::vector<RegressionRow>> Store::Regressions(int64_t sweep_id) {
  return impl_->Run("Regressions", [&]() -> absl::StatusOr<std::vector<RegressionRow>> {
    pqxx::read_transaction t(*impl_->conn);
    std::vector<RegressionRow> out;
    for (const auto& row : t.exec_params(
             "SELECT model_id, mode, confirmation FROM regressions WHERE sweep_id = $1",
             sweep_id)) {
      out.push_back({row[0].c_str(), row[1].c_str(), row[2].c_str()});
    }
    return out;
  });
}

absl::StatusOr<pb::OpDemandResponse> Store::OpDemand(int64_t sweep_id, const std::string& mode,
                                                     int64_t offset, int limit) {
  return impl_->Run("OpDemand", [&]() -> absl::StatusOr<pb::OpDemandResponse> {
    ReadTxn t(*impl_->conn);
    auto state = Readable(t, sweep_id, "sweep_id");
    if (!state.ok()) return state.status();
    pb::OpDemandResponse out;
    out.set_sweep_id(sweep_id);
    out.set_mode(*proto::ModeFromName(mode));
    const bool kept = Materialized(t, sweep_id);
    pqxx::result facts =
        kept ? t.exec_params("SELECT models, eager_native, compile_native FROM sweep_facts "
                             "WHERE sweep_id = $1",
                             sweep_id)
             : t.exec_params(sql::kFacts, sweep_id);
    out.set_models(facts[0][0].as<int64_t>());
    out.set_models_native(facts[0][mode == "compile" ? 2 : 1].as<int64_t>());
    pqxx::result rows =
        kept ? t.exec_params("SELECT op, models_blocked, models_fallback, models_break, "
                             "blocks_alone, fallback_calls, fallback_ms, example_models "
                             "FROM sweep_op_demand WHERE sweep_id = $1 AND mode = $2 "
                             "AND rank > $3 ORDER BY rank LIMIT $4",
                             sweep_id, mode, offset, limit)
             : t.exec_params(Paged(sql::kOpDemand, offset, limit), sweep_id, mode);
    for (const auto& row : rows) *out.add_ops() = OpRowOf(row);
    return out;
  });
}

absl::StatusOr<pb::GraphBreaksResponse> Store::GraphBreaks(int64_t sweep_id, int64_t offset,
                                                           int limit) {
  return impl_->Run("GraphBreaks", [&]() -> absl::StatusOr<pb::GraphBreaksResponse> {
    ReadTxn t(*impl_->conn);
    auto state = Readable(t, sweep_id, "sweep_id");
    if (!state.ok()) return state.status();
    pb::GraphBreaksResponse out;
    out.set_sweep_id(sweep_id);
    const bool kept = Materialized(t, sweep_id);
    pqxx::result facts =
        kept ? t.exec_params("SELECT 0, 0, 0, models_with_breaks FROM sweep_facts "
                             "WHERE sweep_id = $1",
                             sweep_id)
             : t.exec_params(sql::kFacts, sweep_id);
    out.set_models_with_breaks(facts[0][3].as<int64_t>());
    pqxx::result rows =
        kept ? t.exec_params("SELECT reason, op, models, breaks, example_models FROM "
                             "sweep_breaks WHERE sweep_id = $1 AND rank > $2 ORDER BY rank "
                             "LIMIT $3",
                             sweep_id, offset, limit)
             : t.exec_params(Paged(sql::kBreaks, offset, limit), sweep_id);
    for (const auto& row : rows) *out.add_reasons() = BreakRowOf(row);
    return out;
  });
}

}  // namespace ts::store
