#include "services/query/drift_stats.h"

#include <algorithm>
#include <cmath>

#include "services/query/regression_stats.h"

namespace ts::query {

DriftRule RmseDriftRule() {
  DriftRule r;
  r.min_delta = 0.5;
  return r;
}

DriftRule CompileMsDriftRule() {
  DriftRule r;
  r.min_delta = 100;
  return r;
}

DriftVerdict CheckDrift(const std::vector<double>& series, const DriftRule& rule) {
  DriftVerdict best;
  const size_t n = series.size();
  if (std::any_of(series.begin(), series.end(), [](double v) { return !std::isfinite(v); })) {
    return best;
  }
  for (size_t k = 1; k <= rule.max_recent && k < n; ++k) {
    if (n - k < rule.min_history) break;
    const std::vector<double> before(series.begin(), series.end() - static_cast<std::ptrdiff_t>(k));
    const std::vector<double> recent(series.end() - static_cast<std::ptrdiff_t>(k), series.end());
    const double m = Median(before);
    std::vector<double> dev;
    for (double v : before) dev.push_back(std::abs(v - m));
    const double spread =
        std::max({1.4826 * Median(dev), rule.noise * std::abs(m), rule.min_delta / rule.min_z});
    const double low = *std::min_element(recent.begin(), recent.end());
    const double top = *std::max_element(before.begin(), before.end());
    if (spread <= 0) continue;
    const double z = (low - m) / spread;
    const bool fired = low >= rule.min_factor * m && low >= m + rule.min_delta &&
                       z >= rule.min_z && low > top;
    // The longest step that clears the floors: it says when the step began.
    if (fired) best = {true, m, Median(recent), k, z};
  }
  return best;
}

}  // namespace ts::query
