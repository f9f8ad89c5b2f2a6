#include "services/query/perf_regression.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace ts::query {

OpGrowth OpGrownMost(const google::protobuf::RepeatedPtrField<pb::OpTime>& base,
                     const google::protobuf::RepeatedPtrField<pb::OpTime>& head) {
  std::map<std::string, double> before;
  double floor = 0;  // what an op base does not list took at most
  for (const pb::OpTime& t : base) {
    before[t.op()] = t.us();
    floor = before.size() == 1 ? t.us() : std::min(floor, t.us());
  }
  OpGrowth best;
  bool any = false;
  for (const pb::OpTime& t : head) {
    auto it = before.find(t.op());
    const double growth = t.us() - (it != before.end() ? it->second : floor);
    if (!any || growth > best.growth_us || (growth == best.growth_us && t.op() < best.op)) {
      best = {t.op(), growth};
      any = true;
    }
  }
  return best;
}

std::optional<OpGrowth> PerfRegressed(const pb::Perf& base, const pb::Perf& head,
                                      double threshold) {
  const double b = base.device_us(), h = head.device_us();
  if (!(std::isfinite(b) && std::isfinite(h) && b > 0 && h > 0)) return std::nullopt;
  if (!(h > b * (1 + threshold))) return std::nullopt;
  return OpGrownMost(base.top_ops(), head.top_ops());
}

namespace {

// The best measured geomean among the `window` sweeps before index `at`; NaN when none.
double BestBefore(const std::vector<double>& g, size_t at, int window) {
  double best = NAN;
  for (size_t k = at >= static_cast<size_t>(window) ? at - window : 0; k < at; ++k) {
    if (std::isfinite(g[k]) && !(g[k] <= best)) best = g[k];
  }
  return best;
}

}  // namespace

SpeedupLineVerdict CheckSpeedupLine(const std::vector<double>& g, double ratio, int window) {
  SpeedupLineVerdict v;
  if (g.size() < 2) return v;
  const size_t now = g.size() - 1, prev = g.size() - 2;
  v.best = BestBefore(g, now, window);
  v.previous_best = BestBefore(g, prev, window);
  const auto under = [&](double x, double best) {
    return std::isfinite(x) && std::isfinite(best) && x < ratio * best;
  };
  v.fired = under(g[now], v.best) && under(g[prev], v.previous_best);
  return v;
}

}  // namespace ts::query
