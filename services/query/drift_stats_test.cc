// The drift test's rule on hand-made series: each expected value below is worked out in the
// comment from drift_stats.h's definition (median, 1.4826 x MAD, the floors).
#include "services/query/drift_stats.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ts::query {
namespace {

TEST(DriftStatsTest, StableSeriesDoesNotFire) {
  EXPECT_FALSE(CheckDrift({1.0, 1.1, 0.9, 1.0, 1.05}, RmseDriftRule()).fired);
  EXPECT_FALSE(CheckDrift({0, 0, 0, 0, 0}, RmseDriftRule()).fired);
}

TEST(DriftStatsTest, ErrorDoubledTonightFires) {
  // before = {1, 1.1, 0.9, 1}: median 1; |dev| = {0, .1, .1, 0}: MAD .05, 1.4826 x .05 = .074;
  // spread = max(.074, .1 x 1, .5 / 4 = .125) = .125; z = (2.3 - 1) / .125 = 10.4.
  const DriftVerdict v = CheckDrift({1.0, 1.1, 0.9, 1.0, 2.3}, RmseDriftRule());
  ASSERT_TRUE(v.fired);
  EXPECT_DOUBLE_EQ(v.before, 1.0);
  EXPECT_DOUBLE_EQ(v.after, 2.3);
  EXPECT_EQ(v.recent, 1u);
  EXPECT_NEAR(v.z, 10.4, 1e-9);
}

TEST(DriftStatsTest, MagnitudeFloorsHoldBackSmallSteps) {
  // x1.9 is under the factor 2, however far outside the spread.
  EXPECT_FALSE(CheckDrift({1, 1, 1, 1, 1.9}, RmseDriftRule()).fired);
  // From bit-exact (0): 0.4 is under the absolute floor 0.5; 0.6 is over it.
  EXPECT_FALSE(CheckDrift({0, 0, 0, 0, 0.4}, RmseDriftRule()).fired);
  const DriftVerdict v = CheckDrift({0, 0, 0, 0, 0.6}, RmseDriftRule());
  ASSERT_TRUE(v.fired);
  EXPECT_NEAR(v.z, 0.6 / 0.125, 1e-9);  // spread = the floor's 0.5 / 4
  // Compile time: 20 -> 45 ms doubles but is under 100 ms more; 200 -> 450 ms is over both.
  EXPECT_FALSE(CheckDrift({20, 22, 19, 21, 45}, CompileMsDriftRule()).fired);
  EXPECT_TRUE(CheckDrift({200, 210, 190, 205, 450}, CompileMsDriftRule()).fired);
}

TEST(DriftStatsTest, NoisyHistoryDoesNotFire) {
  // before = {1, 2, .5, 1.5, 1}: median 1, |dev| = {0, 1, .5, .5, 0}: MAD .5, spread .74;
  // 2.2 is x2.2 and above every point, but z = 1.2 / .74 = 1.6 < 4.
  EXPECT_FALSE(CheckDrift({1, 2, 0.5, 1.5, 1, 2.2}, RmseDriftRule()).fired);
}

TEST(DriftStatsTest, SpikeInTheMiddleDoesNotFire) {
  EXPECT_FALSE(CheckDrift({1, 1, 3, 1, 1}, RmseDriftRule()).fired);
  // Tonight back at a level seen before: not a step (3 is not above the earlier 3).
  EXPECT_FALSE(CheckDrift({1, 1, 3, 1, 1, 3}, RmseDriftRule()).fired);
}

TEST(DriftStatsTest, StepNamesItsFirstSweep) {
  // Stepped two sweeps ago: the longest split that clears the floors is k = 2, after = {2.5,
  // 2.6} (median 2.55), before = {1, 1, 1, 1}.
  const DriftVerdict v = CheckDrift({1, 1, 1, 1, 2.5, 2.6}, RmseDriftRule());
  ASSERT_TRUE(v.fired);
  EXPECT_EQ(v.recent, 2u);
  EXPECT_DOUBLE_EQ(v.before, 1.0);
  EXPECT_DOUBLE_EQ(v.after, 2.55);
  // A slide 1 -> 1.5 -> 2.1 -> 2.8: 1.5 is not yet double, so the step is the last two.
  EXPECT_EQ(CheckDrift({1, 1, 1, 1, 1.5, 2.1, 2.8}, RmseDriftRule()).recent, 2u);
  // Stepped 4 sweeps ago: past max_recent (3), it is the new level, no longer news.
  EXPECT_FALSE(CheckDrift({1, 1, 1, 1, 2.5, 2.5, 2.5, 2.5}, RmseDriftRule()).fired);
}

TEST(DriftStatsTest, TooLittleHistoryOrNonFiniteNeverFires) {
  EXPECT_FALSE(CheckDrift({1, 1, 5}, RmseDriftRule()).fired);  // 2 points of history < 3
  EXPECT_TRUE(CheckDrift({1, 1, 1, 5}, RmseDriftRule()).fired);
  EXPECT_FALSE(CheckDrift({1, NAN, 1, 1, 5}, RmseDriftRule()).fired);
  EXPECT_FALSE(CheckDrift({}, RmseDriftRule()).fired);
}

}  // namespace
}  // namespace ts::query
