// Store::SuspectOps: ops ranked by the primary models they break (query.proto, SuspectOps),
// answered live from the sweep's results (their `suspects` jsonb, migration 0008) for running
// and done sweeps alike: one sweep's primary results are a partition's rows, and only the
// audited modes carry suspects (services/store/README.md has the cost).
#include "proto/names.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

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
constexpr const char* kSuspectOps = R"(
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
  ORDER BY failed DESC, named DESC, op
  OFFSET $3 LIMIT $4)";

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

}  // namespace

absl::StatusOr<pb::SuspectOpsResponse> Store::SuspectOps(int64_t sweep_id, pb::Mode mode,
                                                         int64_t offset, int limit) {
  return impl_->Run("SuspectOps", [&]() -> absl::StatusOr<pb::SuspectOpsResponse> {
    ReadTxn t(*impl_->conn);
    // The planner takes each suspects array for 100 elements (2 in practice), and on a large
    // sweep the estimate calls in JIT compilation: ~30% of the ranking's time at 100k models.
    t.exec("SET LOCAL jit = off");
    auto state = Readable(t, sweep_id, "sweep_id");
    if (!state.ok()) return state.status();
    const std::string name = mode == pb::MODE_UNSPECIFIED ? "" : proto::ModeName(mode);
    pb::SuspectOpsResponse out;
    out.set_sweep_id(sweep_id);
    out.set_mode(mode);
    const pqxx::result facts = t.exec_params(kSuspectFacts, sweep_id, name);
    out.set_models_failed(facts[0][0].as<int64_t>());
    out.set_models_attributed(facts[0][1].as<int64_t>());
    out.set_models_audited(facts[0][2].as<int64_t>());
    for (const auto& row : t.exec_params(kSuspectOps, sweep_id, name, offset, limit)) {
      *out.add_ops() = SuspectRowOf(row);
    }
    return out;
  });
}

}  // namespace ts::store
