// Store::SuspectOps: ops ranked by the primary models they break (query.proto, SuspectOps),
// from the sweep's results (their `suspects` jsonb, migration 0008): live for a running sweep,
// kept for a done one (KeepSuspects, with its other answers), by the same statements.
#include <array>

#include "proto/names.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

// The modes an answer is kept for: '' is every mode.
constexpr std::array<const char*, 4> kKeptModes = {"", "eager", "compile", "train"};

// The counts over the primary results of sweep $1 in mode $2 ('': every mode, a model counted
// once): models with a fail_accuracy mode, those of them with a suspect there, models with an
// audited mode.
constexpr const char* kSuspectFacts = R"(
  SELECT count(DISTINCT model_id) FILTER (WHERE status = 'fail_accuracy'),
         count(DISTINCT model_id) FILTER (
           WHERE status = 'fail_accuracy' AND coalesce(jsonb_array_length(suspects), 0) > 0),
         count(DISTINCT model_id) FILTER (WHERE audited)
  FROM results
  WHERE sweep_id = $1 AND run = 1 AND ($2 = '' OR mode = $2))";

// Per op: models whose failing mode (fail_accuracy) names it first, models naming it at all,
// models naming it in a passing mode (the audit's warnings), its worst ratio, and up to five
// models, those failing a mode that names it first. A model counts once per op whatever the
// number of its modes that name it. Ranked by failed, then named (descending), then op.
constexpr const char* kSuspectRanking = R"(
  WITH s AS (
    SELECT r.model_id, r.status, e.ord, e.x->>'op' AS op, (e.x->>'ratio')::float8 AS ratio
    FROM results r, jsonb_array_elements(r.suspects) WITH ORDINALITY AS e(x, ord)
    WHERE r.sweep_id = $1 AND r.run = 1 AND ($2 = '' OR r.mode = $2)
      AND r.suspects IS NOT NULL),
  m AS (
    SELECT op, model_id, bool_or(status = 'fail_accuracy' AND ord = 1) AS failed,
           bool_or(status = 'fail_accuracy') AS failing, bool_or(status = 'pass') AS warned,
           max(ratio) AS ratio
    FROM s GROUP BY op, model_id)
  SELECT op, count(*) FILTER (WHERE failed) AS failed, count(*) AS named,
         count(*) FILTER (WHERE warned), max(ratio),
         (array_agg(model_id ORDER BY failing DESC, model_id))[1:5]
  FROM m GROUP BY op
  ORDER BY failed DESC, named DESC, op)";

pb::SuspectOpsRow SuspectRowOf(const pqxx::row& row) {
  pb::SuspectOpsRow o;
  o.set_op(row[0].c_str());
  o.set_models_failed(row[1].as<int64_t>());
  o.set_models_named(row[2].as<int64_t>());
  o.set_models_warned(row[3].as<int64_t>());
  o.set_max_ratio(row[4].as<double>());
  for (auto& m : ParseTextArray(row[5])) o.add_example_models(std::move(m));
  return o;
}

// The kept facts row of (sweep, mode), or the live counts when the sweep has none kept (running,
// or done and kept before migration 0008); `kept` says which.
pqxx::result SuspectFacts(pqxx::transaction_base& t, int64_t sweep_id, const std::string& mode,
                          bool* kept) {
  pqxx::result r = t.exec_params(
      "SELECT models_failed, models_attributed, models_audited FROM sweep_suspect_facts "
      "WHERE sweep_id = $1 AND mode = $2",
      sweep_id, mode);
  *kept = !r.empty();
  if (*kept) return r;
  // The planner takes each suspects array for 100 elements (2 in practice), and on a large
  // sweep the estimate calls in JIT compilation: ~30% of the ranking's time at 100k models.
  t.exec("SET LOCAL jit = off");
  return t.exec_params(kSuspectFacts, sweep_id, mode);
}

}  // namespace

void KeepSuspects(pqxx::transaction_base& w, int64_t sweep_id) {
  for (const char* mode : kKeptModes) {
    w.exec_params(std::string("INSERT INTO sweep_suspect_facts SELECT $1, $2, q.* FROM (") +
                      kSuspectFacts + ") q",
                  sweep_id, mode);
    w.exec_params(std::string("INSERT INTO sweep_suspects SELECT $1, $2, row_number() OVER (), "
                              "q.* FROM (") +
                      kSuspectRanking + ") q",
                  sweep_id, mode);
  }
}

absl::StatusOr<pb::SuspectOpsResponse> Store::SuspectOps(int64_t sweep_id, pb::Mode mode,
                                                         int64_t offset, int limit) {
  return impl_->Run("SuspectOps", [&]() -> absl::StatusOr<pb::SuspectOpsResponse> {
    ReadTxn t(*impl_->conn);
    auto state = Readable(t, sweep_id, "sweep_id");
    if (!state.ok()) return state.status();
    const std::string name = mode == pb::MODE_UNSPECIFIED ? "" : proto::ModeName(mode);
    pb::SuspectOpsResponse out;
    out.set_sweep_id(sweep_id);
    out.set_mode(mode);
    bool kept = false;
    const pqxx::result facts = SuspectFacts(t, sweep_id, name, &kept);
    out.set_models_failed(facts[0][0].as<int64_t>());
    out.set_models_attributed(facts[0][1].as<int64_t>());
    out.set_models_audited(facts[0][2].as<int64_t>());
    const pqxx::result rows =
        kept ? t.exec_params(
                   "SELECT op, models_failed, models_named, models_warned, max_ratio, "
                   "example_models FROM sweep_suspects WHERE sweep_id = $1 AND "
                   "mode = $2 AND rank > $3 ORDER BY rank LIMIT $4",
                   sweep_id, name, offset, limit)
             : t.exec_params(std::string(kSuspectRanking) + " OFFSET $3 LIMIT $4", sweep_id, name,
                             offset, limit);
    for (const auto& row : rows) *out.add_ops() = SuspectRowOf(row);
    return out;
  });
}

}  // namespace ts::store
