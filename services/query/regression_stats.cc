#include "services/query/regression_stats.h"

#include <algorithm>
#include <cmath>

namespace ts::query {

namespace {

// Up to this many pairs the binomial coefficients and their sum are exact in 64 bits (and
// C(50, 25) < 2^53 keeps each one exact as a double too), so small tests are exact.
constexpr int64_t kExactPairs = 50;

// P[X >= k0] for X ~ Binomial(n, 1/2) with 2 * k0 > n: the terms fall from the first one, so
// summing them relative to it neither overflows nor loses the tail.
double UpperTail(int64_t n, int64_t k0) {
  if (k0 > n) return 0;
  const double log_first =
      std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k0) + 1) -
      std::lgamma(static_cast<double>(n - k0) + 1) - static_cast<double>(n) * std::log(2.0);
  double term = 1, sum = 1;
  for (int64_t k = k0; k < n; ++k) {
    term *= static_cast<double>(n - k) / static_cast<double>(k + 1);
    sum += term;
    if (term < 1e-20 * sum) break;
  }
  return std::exp(log_first) * sum;
}

double ExactUpperTail(int64_t n, int64_t b) {
  uint64_t coef = 1, sum = 0;  // C(n, k) for k = 0..n
  for (int64_t k = 0; k <= n; ++k) {
    if (k >= b) sum += coef;
    coef = coef * static_cast<uint64_t>(n - k) / static_cast<uint64_t>(k + 1);
  }
  return std::ldexp(static_cast<double>(sum), -static_cast<int>(n));
}

}  // namespace

const std::vector<std::string>& InfrastructureStatuses() {
  static const std::vector<std::string> kStatuses = {"crash", "lost", "timeout", "skipped"};
  return kStatuses;
}

bool IsInfrastructureStatus(std::string_view status) {
  const auto& all = InfrastructureStatuses();
  return std::find(all.begin(), all.end(), status) != all.end();
}

bool CountsInCohort(std::string_view base_status, std::string_view head_status) {
  return !base_status.empty() && !head_status.empty() && !IsInfrastructureStatus(base_status) &&
         !IsInfrastructureStatus(head_status);
}

double McNemarOneSidedP(int64_t b, int64_t c) {
  if (b <= 0 || c < 0) return 1;
  const int64_t n = b + c;
  if (n <= kExactPairs) return ExactUpperTail(n, b);
  if (2 * b > n) return UpperTail(n, b);
  // P[X >= b] = 1 - P[X <= b - 1] = 1 - P[X >= n - b + 1] by symmetry, a falling tail again.
  return std::clamp(1 - UpperTail(n, n - b + 1), 0.0, 1.0);
}

bool BonferroniSignificant(double p, int64_t tests, double alpha) {
  return p < alpha / static_cast<double>(std::max<int64_t>(1, tests));
}

const char* AlertSeverity(int64_t models, int64_t classes, bool group_test_fired) {
  if (group_test_fired) return "critical";
  if (models >= 5 || classes >= 2) return "major";
  return "warning";
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

DropVerdict CheckDrop(const std::vector<double>& history, double tonight, int64_t models,
                      const DropRule& rule) {
  DropVerdict out;
  const size_t used = std::min(history.size(), rule.window);
  if (used == 0) return out;
  const std::vector<double> window(history.end() - static_cast<std::ptrdiff_t>(used),
                                   history.end());
  out.median = Median(window);
  out.drop = out.median - tonight;
  const double before = out.median - history.back();
  out.fired = used >= rule.min_history && models >= rule.min_models && out.drop >= rule.floor_pts &&
              before >= rule.confirm_pts;
  return out;
}

}  // namespace ts::query
