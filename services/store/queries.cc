// Read queries for the Query service: sweeps, group counters, compact records, a model's
// history, op demand, graph breaks; and keeping a done sweep's answers (MaterializeSweep).
// They read, never lease or write results, and run on the scheduler's query pool.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "proto/names.h"
#include "services/common/error_signature.h"
#include "services/store/queries_sql.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

void SetTime(const pqxx::field& micros, google::protobuf::Timestamp* t) {
  const int64_t us = micros.as<int64_t>();
  t->set_seconds(us / 1000000);
  t->set_nanos(static_cast<int32_t>((us % 1000000) * 1000));
}

constexpr const char* kSweepColumns = R"(
  s.sweep_id, s.name, s.state, p.name, p.sha, s.modes, s.sample, coalesce(s.baseline_sweep, 0),
  (extract(epoch FROM s.created_at) * 1000000)::bigint,
  (extract(epoch FROM s.finished_at) * 1000000)::bigint, s.summary::text, s.audit_ops)";

// A SweepInfo from a kSweepColumns row, with the counts of its progress.
absl::StatusOr<pb::SweepInfo> SweepInfoOf(pqxx::transaction_base& w, const pqxx::row& row) {
  pb::SweepInfo s;
  s.set_sweep_id(row[0].as<int64_t>());
  s.set_name(row[1].c_str());
  s.set_state(row[2].c_str());
  s.set_profile(row[3].c_str());
  s.set_profile_sha(row[4].c_str());
  s.set_line(ProfileLine(s.profile()));
  for (auto& m : ParseTextArray(row[5])) s.add_modes(std::move(m));
  s.set_sample(row[6].as<int64_t>());
  s.set_baseline_sweep_id(row[7].as<int64_t>());
  SetTime(row[8], s.mutable_created_at());
  if (!row[9].is_null()) SetTime(row[9], s.mutable_finished_at());
  s.set_audit_ops(row[11].as<bool>());
  // A finished sweep's kept counts are in the row; else they are summed from its shards'
  // tallies (a reader never scans a sweep's results for them: GetSweep and the keeping of a
  // done sweep's answers count and keep them).
  pb::SweepProgress p;
  if (!row[10].is_null()) {
    if (auto st = ParseSummary(row[10], s.sweep_id(), &p); !st.ok()) return st;
  } else {
    SumTallies(w, s.sweep_id(), &p);
  }
  s.set_models_expected(p.models_expected());
  s.set_models_recorded(p.models_recorded());
  s.set_failures(p.failures());
  return s;
}

}  // namespace

absl::StatusOr<ReadableSweep> Readable(pqxx::transaction_base& t, int64_t sweep_id,
                                       const std::string& field) {
  pqxx::result r = t.exec_params(
      "SELECT s.state, EXISTS (SELECT 1 FROM sweep_facts f WHERE f.sweep_id = s.sweep_id) "
      "FROM sweeps s WHERE s.sweep_id = $1",
      sweep_id);
  const std::string id = std::to_string(sweep_id);
  if (r.empty()) return absl::NotFoundError(field + ": no sweep " + id);
  ReadableSweep out{r[0][0].c_str(), r[0][1].as<bool>()};
  if (out.state == "pruned") {
    return absl::FailedPreconditionError(field + ": sweep " + id +
                                         " was pruned; its results are gone");
  }
  return out;
}

namespace {

bool Materialized(pqxx::transaction_base& t, int64_t sweep_id) {
  return !t.exec_params("SELECT 1 FROM sweep_facts WHERE sweep_id = $1", sweep_id).empty();
}

// A bigint[] column: strtoll over PostgreSQL's text, no string per element (a kept sweep's
// verdict_codes has one element per model).
std::vector<int64_t> ParseIdArray(const pqxx::field& f) {
  std::vector<int64_t> out;
  const char* p = f.c_str();
  while (*p && *p != '{') ++p;
  while (*p && *p != '}') {
    char* end = nullptr;
    const long long v = std::strtoll(p + 1, &end, 10);
    if (end == p + 1) break;  // "{}"
    out.push_back(v);
    p = end;
  }
  return out;
}

// A float8 column: strtod reads PostgreSQL's text (NaN, Infinity included) several times faster
// than pqxx's stream-based conversion, which shows on 100k-row reads.
double Double(const pqxx::field& f) { return std::strtod(f.c_str(), nullptr); }

// A float8[] column.
std::vector<double> ParseDoubleArray(const pqxx::field& f) {
  std::vector<double> out;
  for (const auto& s : ParseTextArray(f)) out.push_back(std::strtod(s.c_str(), nullptr));
  return out;
}

// A group row of sql::kGroups (or sweep_groups): identity, models, opcov_sum, statuses, counts,
// then the perf columns.
GroupTally TallyOf(const pqxx::row& row) {
  GroupTally g{
      row[0].c_str(), row[1].c_str(), row[2].c_str(), row[3].as<int64_t>(), Double(row[4]), {}, {}};
  const auto keys = ParseTextArray(row[5]);
  const auto counts = ParseIdArray(row[6]);
  for (size_t i = 0; i < keys.size() && i < counts.size(); ++i) {
    const size_t eq = keys[i].find('=');
    g.statuses.push_back({keys[i].substr(0, eq), keys[i].substr(eq + 1), counts[i]});
  }
  g.perf.models = row[7].as<int64_t>();
  g.perf.log_speedup_sum = Double(row[8]);
  g.perf.compression_n = row[9].as<int64_t>();
  g.perf.compression_sum = Double(row[10]);
  g.perf.mfus = ParseDoubleArray(row[11]);
  return g;
}

// A compact record from 9 columns at `at`: model_id, task, arch, family, opcov_ratio, total_ms,
// then the modes' statuses in Mode order (eager, compile, train; NULL: not recorded).
pb::ResultRow RecordOf(const pqxx::row& row, int at = 0) {
  pb::ResultRow r;
  r.set_model_id(row[at].c_str());
  r.set_task(row[at + 1].c_str());
  r.set_arch(row[at + 2].c_str());
  r.set_family(row[at + 3].c_str());
  r.set_opcov_ratio(Double(row[at + 4]));
  r.set_total_ms(Double(row[at + 5]));
  auto& status = *r.mutable_status();
  for (size_t k = 0; k < proto::AllModes().size(); ++k) {
    const pqxx::field f = row[at + 6 + static_cast<int>(k)];
    if (!f.is_null()) status[proto::ModeName(proto::AllModes()[k])] = f.c_str();
  }
  return r;
}

// The sweep's compact per-model rows (RecordOf's columns) as a subquery with the sweep as $n:
// kept for a summarized sweep, else live.
std::string VerdictRows(const ReadableSweep& sweep, int n) {
  const std::string param = "$" + std::to_string(n);
  if (sweep.kept) {
    return "SELECT model_id, task, arch, family, opcov_ratio, total_ms, eager, compile, train "
           "FROM sweep_verdicts WHERE sweep_id = " + param;
  }
  std::string live = sql::kVerdicts;
  for (size_t at = live.find("$1"); at != std::string::npos;
       at = live.find("$1", at + param.size())) {
    live.replace(at, 2, param);
  }
  return live;
}

std::vector<GroupTally> Tallies(pqxx::transaction_base& t, int64_t sweep_id,
                                const ReadableSweep& sweep) {
  pqxx::result rows =
      sweep.kept ? t.exec_params(
                       "SELECT task, family, arch, models, opcov_sum, statuses, counts, "
                       "perf_models, speedup_log_sum, compression_n, compression_sum, mfus "
                       "FROM sweep_groups WHERE sweep_id = $1",
                       sweep_id)
                 : t.exec_params(sql::kGroups, sweep_id);
  std::vector<GroupTally> out;
  out.reserve(rows.size());
  for (const auto& row : rows) out.push_back(TallyOf(row));
  return out;
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

// The sweep's facts row (sql::kFacts' columns: models, eager_native, compile_native,
// models_with_breaks), kept or live.
pqxx::result Facts(pqxx::transaction_base& t, int64_t sweep_id, bool kept) {
  return kept ? t.exec_params("SELECT models, eager_native, compile_native, models_with_breaks "
                              "FROM sweep_facts WHERE sweep_id = $1",
                              sweep_id)
              : t.exec_params(sql::kFacts, sweep_id);
}

std::string Paged(const char* statement, int64_t offset, int limit) {
  return std::string(statement) + " OFFSET " + std::to_string(offset) + " LIMIT " +
         std::to_string(limit);
}

}  // namespace

void MaterializeSweep(pqxx::transaction_base& w, int64_t sweep_id) {
  if (Materialized(w, sweep_id)) return;
  // A sweep that just ended has no planner statistics (autovacuum comes later): every estimate
  // on its partitions is one row, and the verdicts statement nests a loop that aggregates the
  // whole results partition once per model (27 s at 5,000 models, scheduler_bench; the prune
  // and reports then waited behind it). ANALYZE samples at most 30k rows of each.
  w.exec("ANALYZE results_" + std::to_string(sweep_id) + ", model_runs_" +
         std::to_string(sweep_id));
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
  KeepSuspects(w, sweep_id);
  w.exec_params(std::string("INSERT INTO sweep_facts SELECT $1, q.*, ts_verdict_codes($1) "
                            "FROM (") + sql::kFacts + ") q",
                sweep_id);
}

void DropMaterialized(pqxx::transaction_base& w, int64_t sweep_id) {
  for (const char* table : {"sweep_facts", "sweep_groups", "sweep_verdicts", "sweep_op_demand",
                            "sweep_breaks", "sweep_suspect_facts", "sweep_suspects"}) {
    w.exec_params(std::string("DELETE FROM ") + table + " WHERE sweep_id = $1", sweep_id);
  }
}

absl::StatusOr<std::vector<pb::SweepInfo>> SweepInfos(pqxx::transaction_base& w,
                                                      const std::vector<int64_t>& ids) {
  std::map<int64_t, pb::SweepInfo> by_id;
  for (const auto& row : w.exec_params(std::string("SELECT ") + kSweepColumns +
                                           " FROM sweeps s JOIN profiles p USING (profile_id) "
                                           "WHERE s.sweep_id = ANY($1::bigint[])",
                                       IdArray(ids))) {
    auto s = SweepInfoOf(w, row);
    if (!s.ok()) return s.status();
    by_id[s->sweep_id()] = std::move(*s);
  }
  std::vector<pb::SweepInfo> out;
  for (int64_t id : ids) {
    auto it = by_id.find(id);
    if (it == by_id.end()) return absl::NotFoundError("sweep_id: no sweep " + std::to_string(id));
    out.push_back(std::move(it->second));
  }
  return out;
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
    w.commit();
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
    return Tallies(t, sweep_id, *state);
  });
}

namespace {

// A kept sweep's verdict_codes (migration 0006): model_no * 64 + per mode 0 / 1 pass / 2 other.
std::vector<int64_t> VerdictCodes(pqxx::transaction_base& t, int64_t sweep_id) {
  return ParseIdArray(
      t.exec_params("SELECT verdict_codes FROM sweep_facts WHERE sweep_id = $1", sweep_id)[0][0]);
}

// The model_nos where two kept sweeps differ: in one only, or pass in one and not the other in a
// mode both recorded.
std::vector<int64_t> DifferingModels(const std::vector<int64_t>& base,
                                     const std::vector<int64_t>& head) {
  std::vector<int64_t> out;
  size_t i = 0, j = 0;
  while (i < base.size() || j < head.size()) {
    const int64_t b = i < base.size() ? base[i] >> 6 : INT64_MAX;
    const int64_t h = j < head.size() ? head[j] >> 6 : INT64_MAX;
    if (b != h) {
      out.push_back(std::min(b, h));
      (b < h ? i : j)++;
      continue;
    }
    for (int k = 0; k < 3; ++k) {
      const int64_t x = (base[i] >> (2 * k)) & 3, y = (head[j] >> (2 * k)) & 3;
      if (x != 0 && y != 0 && x != y) {
        out.push_back(b);
        break;
      }
    }
    ++i;
    ++j;
  }
  return out;
}

}  // namespace

absl::StatusOr<SweepPairReads> Store::SweepPair(int64_t base_id, const std::string& base_field,
                                                int64_t head_id, const std::string& head_field) {
  return impl_->Run("SweepPair", [&]() -> absl::StatusOr<SweepPairReads> {
    ReadTxn t(*impl_->conn);
    auto base_state = Readable(t, base_id, base_field);
    if (!base_state.ok()) return base_state.status();
    auto head_state = Readable(t, head_id, head_field);
    if (!head_state.ok()) return head_state.status();
    SweepPairReads out;
    out.base_groups = Tallies(t, base_id, *base_state);
    out.head_groups = Tallies(t, head_id, *head_state);
    if (base_state->kept && head_state->kept) {
      // Both kept: merge their packed codes, then read the few records that differ.
      const std::vector<int64_t> nos =
          DifferingModels(VerdictCodes(t, base_id), VerdictCodes(t, head_id));
      std::map<int64_t, query::ModelPair> by_no;
      for (const auto& [id, side] : {std::pair<int64_t, int>{base_id, 0}, {head_id, 1}}) {
        for (const auto& row : t.exec_params(
                 "SELECT v.model_id, v.task, v.arch, v.family, v.opcov_ratio, v.total_ms, "
                 "v.eager, v.compile, v.train, m.model_no FROM sweep_verdicts v "
                 "JOIN models m USING (model_id) "
                 "WHERE v.sweep_id = $1 AND m.model_no = ANY($2::bigint[])",
                 id, IdArray(nos))) {
          (side == 0 ? by_no[row[9].as<int64_t>()].base : by_no[row[9].as<int64_t>()].head) =
              RecordOf(row);
        }
      }
      for (auto& [no, p] : by_no) out.differing.push_back(std::move(p));
      return out;
    }
    // A full join on model_id keeping only what differs; NULL = 'pass' is NULL, so a mode one
    // side lacks never flips.
    std::string q = "WITH b AS (" + VerdictRows(*base_state, 1) + "), h AS (" +
                    VerdictRows(*head_state, 2) + ") SELECT b.*, h.* FROM b FULL JOIN h ON "
                    "b.model_id = h.model_id WHERE b.model_id IS NULL OR h.model_id IS NULL";
    for (pb::Mode m : proto::AllModes()) {
      const std::string& c = proto::ModeName(m);
      q += " OR (b." + c + " = 'pass') <> (h." + c + " = 'pass')";
    }
    for (const auto& row : t.exec_params(q, base_id, head_id)) {
      query::ModelPair p;
      if (!row[0].is_null()) p.base = RecordOf(row, 0);
      if (!row[9].is_null()) p.head = RecordOf(row, 9);
      out.differing.push_back(std::move(p));
    }
    return out;
  });
}

absl::StatusOr<GateReads> Store::ReadForGate(int64_t sweep_id, const std::string& field,
                                             const std::vector<std::string>& must_pass,
                                             const std::vector<std::string>& forbid,
                                             size_t examples) {
  return impl_->Run("ReadForGate", [&]() -> absl::StatusOr<GateReads> {
    ReadTxn t(*impl_->conn);
    auto state = Readable(t, sweep_id, field);
    if (!state.ok()) return state.status();
    GateReads out;
    out.groups = Tallies(t, sweep_id, *state);
    const std::string rows = VerdictRows(*state, 1);
    if (!must_pass.empty()) {
      for (const auto& row : t.exec_params("SELECT * FROM (" + rows +
                                               ") v WHERE model_id = ANY($2::text[])",
                                           sweep_id, TextArray(must_pass))) {
        out.must_pass.push_back(RecordOf(row));
      }
    }
    for (const std::string& status : forbid) {
      if (query::VerdictCount(out.groups, status) == 0) continue;  // the common case: no scan
      auto& ex = out.forbid_examples[status];
      for (const auto& row : t.exec_params("SELECT * FROM (" + rows +
                                               ") v WHERE $2 IN (eager, compile, train) "
                                               "ORDER BY model_id LIMIT $3",
                                           sweep_id, status, examples)) {
        const pb::ResultRow r = RecordOf(row);
        for (pb::Mode m : proto::AllModes()) {
          auto it = r.status().find(proto::ModeName(m));
          if (it != r.status().end() && it->second == status && ex.size() < examples) {
            ex.push_back(r.model_id() + " (" + it->first + ")");
          }
        }
      }
    }
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
    const bool kept = state->kept;
    const pqxx::result facts = Facts(t, sweep_id, kept);
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
    const bool kept = state->kept;
    const pqxx::result facts = Facts(t, sweep_id, kept);
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
