#include "services/common/jitter.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace ts::common {
namespace {

double Uniform(double lo, double hi) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  if (!(hi > lo)) return lo;
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

}  // namespace

double Jittered(double seconds, double spread) {
  spread = std::clamp(spread, 0.0, 1.0);
  return Uniform(seconds * (1 - spread), seconds * (1 + spread));
}

double BackoffWithJitter(int attempt, double base, double cap) {
  const double step = std::min(cap, base * std::pow(2.0, std::clamp(attempt, 0, 30)));
  return Uniform(step / 2, step);
}

}  // namespace ts::common
