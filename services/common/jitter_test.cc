#include "services/common/jitter.h"

#include <algorithm>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace ts::common {
namespace {

TEST(JitterTest, StaysInsideTheSpreadAndActuallyVaries) {
  std::vector<double> v;
  for (int i = 0; i < 2000; ++i) v.push_back(Jittered(0.5, 0.5));
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  EXPECT_GE(*lo, 0.25);
  EXPECT_LE(*hi, 0.75);
  // Uniform over 0.25..0.75: 2000 draws cover most of it, in both halves.
  EXPECT_LT(*lo, 0.30);
  EXPECT_GT(*hi, 0.70);
  EXPECT_GT(std::set<double>(v.begin(), v.end()).size(), 1900u);
}

TEST(JitterTest, NoSpreadIsTheExactValueAndSpreadIsClamped) {
  EXPECT_EQ(Jittered(0.5, 0), 0.5);
  for (int i = 0; i < 100; ++i) {
    const double d = Jittered(1.0, 7);  // clamped to 1: 0..2 s, never negative
    EXPECT_GE(d, 0.0);
    EXPECT_LE(d, 2.0);
  }
}

TEST(JitterTest, BackoffDoublesUpToTheCapWithHalfTheStepRandom) {
  for (int attempt = 0; attempt < 40; ++attempt) {
    const double step = std::min(2.0, 0.1 * (1 << std::min(attempt, 20)));
    for (int i = 0; i < 50; ++i) {
      const double d = BackoffWithJitter(attempt, 0.1, 2.0);
      EXPECT_GE(d, step / 2) << "attempt " << attempt;
      EXPECT_LE(d, step) << "attempt " << attempt;
    }
  }
  // Two callers retrying in step draw different waits.
  std::set<double> draws;
  for (int i = 0; i < 64; ++i) draws.insert(BackoffWithJitter(3, 0.1, 2.0));
  EXPECT_GT(draws.size(), 60u);
}

}  // namespace
}  // namespace ts::common
