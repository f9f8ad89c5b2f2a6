#include "services/store/drift.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "services/query/drift_stats.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

constexpr size_t kWindow = 8;  // sweeps read, head included

std::vector<double> Doubles(const pqxx::field& f) {
  std::vector<double> out;
  for (const auto& s : ParseTextArray(f)) out.push_back(s == "NaN" ? NAN : std::stod(s));
  return out;
}

std::string Detail(const char* metric, const query::DriftVerdict& v, int64_t first_sweep) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %.3g -> %.3g (x%.1f) from sweep %lld", metric, v.before,
                v.after, v.before > 0 ? v.after / v.before : INFINITY,
                static_cast<long long>(first_sweep));
  return buf;
}

}  // namespace

std::vector<DriftRow> FindDrift(pqxx::transaction_base& w, const std::vector<int64_t>& window,
                                const std::vector<std::string>& modes,
                                const std::set<std::pair<std::string, std::string>>& quarantined) {
  std::vector<DriftRow> out;
  const query::DriftRule rmse_rule = query::RmseDriftRule();
  const query::DriftRule ms_rule = query::CompileMsDriftRule();
  if (window.size() < rmse_rule.min_history + 1) return out;  // no history worth testing
  const std::vector<int64_t> ids(
      window.end() - static_cast<std::ptrdiff_t>(std::min(window.size(), kWindow)), window.end());
  const int64_t head = ids.back();
  // Compile times are scaled by each sweep's median compile time against the window's median
  // (a slower host or a busier night is not drift). The candidates: the head's passing
  // verdicts whose value tonight is at least twice the smallest and the floor above it (both
  // necessary for the test to fire), each with its series over the window's passing verdicts.
  pqxx::result rows = w.exec_params(R"(
    WITH med AS (
      SELECT sweep_id, percentile_cont(0.5) WITHIN GROUP (ORDER BY compile_ms) AS m
      FROM results WHERE sweep_id = ANY($1::bigint[]) AND run = 1 AND mode = 'compile'
        AND status = 'pass' AND compile_ms > 0 GROUP BY sweep_id),
    g AS (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY m) AS gm FROM med),
    x AS (
      SELECT r.model_id, r.mode, r.sweep_id, r.rmse_ratio AS rmse,
             CASE WHEN r.compile_ms > 0 AND med.m > 0 THEN r.compile_ms * g.gm / med.m END AS cms
      FROM results r LEFT JOIN med USING (sweep_id) CROSS JOIN g
      WHERE r.sweep_id = ANY($1::bigint[]) AND r.run = 1 AND r.status = 'pass'
        AND r.mode = ANY($3::text[])),
    h AS (SELECT * FROM x WHERE sweep_id = $2)
    SELECT h.model_id, h.mode, m.arch, m.task,
           array_agg(p.sweep_id::text ORDER BY p.sweep_id),
           array_agg(coalesce(p.rmse::text, 'NaN') ORDER BY p.sweep_id),
           array_agg(coalesce(p.cms::text, 'NaN') ORDER BY p.sweep_id)
    FROM h JOIN x p ON p.model_id = h.model_id AND p.mode = h.mode
    JOIN models m ON m.model_id = h.model_id
    GROUP BY h.model_id, h.mode, m.arch, m.task, h.rmse, h.cms
    HAVING count(*) > $4
       AND ((h.rmse >= $5 * min(p.rmse) AND h.rmse >= min(p.rmse) + $6)
         OR (h.cms >= $7 * min(p.cms) AND h.cms >= min(p.cms) + $8))
    ORDER BY h.model_id, h.mode)",
                                    IdArray(ids), head, TextArray(modes),
                                    static_cast<int64_t>(rmse_rule.min_history),
                                    rmse_rule.min_factor, rmse_rule.min_delta, ms_rule.min_factor,
                                    ms_rule.min_delta);
  for (const auto& r : rows) {
    const std::string model = r[0].c_str(), mode = r[1].c_str();
    if (quarantined.count({model, mode})) continue;
    std::vector<int64_t> sweeps;
    for (const auto& s : ParseTextArray(r[4])) sweeps.push_back(std::stoll(s));
    const std::vector<double> rmse = Doubles(r[5]), cms = Doubles(r[6]);
    auto test = [&](const char* metric, const std::vector<double>& all,
                    const query::DriftRule& rule) {
      // The metric's own series: the sweeps that measured it.
      std::vector<double> series;
      std::vector<int64_t> at;
      for (size_t k = 0; k < all.size() && k < sweeps.size(); ++k) {
        if (std::isnan(all[k])) continue;
        series.push_back(all[k]);
        at.push_back(sweeps[k]);
      }
      if (at.empty() || at.back() != head) return;
      const query::DriftVerdict v = query::CheckDrift(series, rule);
      if (!v.fired) return;
      const int64_t first = at[at.size() - v.recent];
      out.push_back({model, mode, metric, r[2].c_str(), r[3].c_str(), v.before, v.after, first,
                     Detail(metric, v, first)});
    };
    test("rmse_ratio", rmse, rmse_rule);
    test("compile_ms", cms, ms_rule);
  }
  return out;
}

}  // namespace ts::store
