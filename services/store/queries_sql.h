// The statements behind the read queries (queries.cc). Each answer a done sweep keeps
// (MaterializeSweep) is taken by the same statement that answers a running sweep live, so the
// two cannot disagree. $1 is the sweep; the op-demand statement's $2 is the mode.
//
// Private to services/store.
#pragma once

namespace ts::store::sql {

// Per (task, family, arch) of the catalog: models, opcov_ratio sum, "mode=status" counts, and
// the perf of the models whose compile passed with a speedup (migration 0016: how many, the sum
// of ln(speedup), the compressions' count and sum, the compiled MFUs sorted). Each term of a sum is
// rounded to the grid of 2^-30 (query::OnSumGrid, summary_builder.h: the same rounding) and the
// sum taken in integers, so it is exact: no figure depends on the order the results arrived or
// were scanned in, and a model's terms taken out in C++ leave exactly the others' sum. The groups
// come in a fixed order.
inline constexpr const char* kGroups = R"(
  WITH g AS (
    SELECT m.task, m.family, m.arch, count(*) AS models,
           sum(round(mr.opcov_ratio * 1073741824)::bigint)::float8 / 1073741824 AS opcov_sum
    FROM model_runs mr JOIN models m USING (model_id)
    WHERE mr.sweep_id = $1 AND mr.run = 1
    GROUP BY m.task, m.family, m.arch),
  s AS (
    SELECT m.task, m.family, m.arch, r.mode || '=' || r.status AS k, count(*) AS n
    FROM results r JOIN models m USING (model_id)
    WHERE r.sweep_id = $1 AND r.run = 1
    GROUP BY m.task, m.family, m.arch, r.mode, r.status),
  p AS (
    SELECT m.task, m.family, m.arch, count(*) AS perf_models,
           sum(round(ln(r.perf_speedup) * 1073741824)::bigint)::float8 / 1073741824
             AS speedup_log_sum,
           count(r.perf_compression) AS compression_n,
           coalesce(sum(round(r.perf_compression * 1073741824)::bigint)::float8 / 1073741824, 0)
             AS compression_sum,
           coalesce(array_agg(r.perf_mfu ORDER BY r.perf_mfu)
                      FILTER (WHERE r.perf_mfu IS NOT NULL), '{}') AS mfus
    FROM results r JOIN models m USING (model_id)
    WHERE r.sweep_id = $1 AND r.run = 1 AND r.mode = 'compile' AND r.perf_speedup IS NOT NULL
    GROUP BY m.task, m.family, m.arch)
  SELECT g.task, g.family, g.arch, g.models, g.opcov_sum,
         coalesce(array_agg(s.k ORDER BY s.k) FILTER (WHERE s.k IS NOT NULL), '{}'),
         coalesce(array_agg(s.n ORDER BY s.k) FILTER (WHERE s.k IS NOT NULL), '{}'),
         coalesce(p.perf_models, 0), coalesce(p.speedup_log_sum, 0),
         coalesce(p.compression_n, 0), coalesce(p.compression_sum, 0),
         coalesce(p.mfus, '{}')
  FROM g LEFT JOIN s USING (task, family, arch) LEFT JOIN p USING (task, family, arch)
  GROUP BY g.task, g.family, g.arch, g.models, g.opcov_sum, p.perf_models, p.speedup_log_sum,
           p.compression_n, p.compression_sum, p.mfus
  ORDER BY g.task, g.family, g.arch)";

// One compact row per primary model: its catalog identity, opcov, total_ms, and its eager,
// compile and train statuses (NULL: not recorded).
inline constexpr const char* kVerdicts = R"(
  SELECT mr.model_id, m.task, m.arch, m.family, mr.opcov_ratio, mr.total_ms,
         st.eager, st.compile, st.train
  FROM model_runs mr JOIN models m USING (model_id)
  LEFT JOIN (SELECT model_id, max(status) FILTER (WHERE mode = 'eager') AS eager,
                    max(status) FILTER (WHERE mode = 'compile') AS compile,
                    max(status) FILTER (WHERE mode = 'train') AS train
             FROM results WHERE sweep_id = $1 AND run = 1 GROUP BY model_id) st USING (model_id)
  WHERE mr.sweep_id = $1 AND mr.run = 1)";

// What blocks each primary model in mode $2: its fallback ops (eager and compile) and, in
// compile, the ops its break reasons name (a reason naming none blocks under a NULL op: it
// counts against "blocks alone" but is not ranked). Ranked by models blocked, then blocked
// alone, then op.
inline constexpr const char* kOpDemand = R"(
  WITH fb AS (
    SELECT mr.model_id, u.op, u.calls, u.ms
    FROM model_runs mr, unnest(mr.ops, mr.op_calls, mr.op_ms, mr.op_native)
                        AS u(op, calls, ms, native)
    WHERE mr.sweep_id = $1 AND mr.run = 1 AND NOT u.native),
  br AS (
    SELECT r.model_id, substring(x FROM 'aten::[A-Za-z0-9_.]+') AS op
    FROM results r, unnest(r.break_reasons) AS x
    WHERE $2::text = 'compile' AND r.sweep_id = $1 AND r.run = 1 AND r.mode = 'compile'),
  blk AS (
    SELECT model_id, op, sum(calls) AS calls, sum(ms) AS ms, bool_or(f) AS f, bool_or(b) AS b
    FROM (SELECT model_id, op, calls, ms, true AS f, false AS b FROM fb
          UNION ALL
          SELECT model_id, op, 0, 0, false, true FROM br) u
    GROUP BY model_id, op),
  n AS (SELECT model_id, count(*) AS blockers FROM blk GROUP BY model_id)
  SELECT blk.op, count(*) AS blocked, count(*) FILTER (WHERE blk.f),
         count(*) FILTER (WHERE blk.b), count(*) FILTER (WHERE n.blockers = 1) AS alone,
         coalesce(sum(blk.calls) FILTER (WHERE blk.f), 0)::bigint,
         coalesce(sum(blk.ms) FILTER (WHERE blk.f), 0)::float8,
         (array_agg(blk.model_id ORDER BY n.blockers = 1 DESC, blk.model_id))[1:5]
  FROM blk JOIN n USING (model_id)
  WHERE blk.op IS NOT NULL
  GROUP BY blk.op
  ORDER BY blocked DESC, alone DESC, blk.op)";

// Models, models no op blocks in eager / in compile, models with graph breaks.
inline constexpr const char* kFacts = R"(
  WITH fbm AS (SELECT model_id FROM model_runs
               WHERE sweep_id = $1 AND run = 1 AND false = ANY(op_native)),
  brm AS (SELECT model_id FROM results
          WHERE sweep_id = $1 AND run = 1 AND mode = 'compile'
            AND coalesce(cardinality(break_reasons), 0) > 0),
  total AS (SELECT count(*) AS n FROM model_runs WHERE sweep_id = $1 AND run = 1)
  SELECT total.n, total.n - (SELECT count(*) FROM fbm),
         total.n - (SELECT count(*) FROM (SELECT model_id FROM fbm UNION
                                          SELECT model_id FROM brm) u),
         (SELECT count(*) FROM brm)
  FROM total)";

// Break reasons ranked by models, then occurrences, then reason.
inline constexpr const char* kBreaks = R"(
  WITH b AS (
    SELECT r.model_id, x AS reason
    FROM results r, unnest(r.break_reasons) AS x
    WHERE r.sweep_id = $1 AND r.run = 1 AND r.mode = 'compile')
  SELECT reason, coalesce(substring(reason FROM 'aten::[A-Za-z0-9_.]+'), ''),
         count(DISTINCT model_id) AS models, count(*) AS breaks,
         (array_agg(DISTINCT model_id ORDER BY model_id))[1:5]
  FROM b GROUP BY reason
  ORDER BY models DESC, breaks DESC, reason)";

}  // namespace ts::store::sql
