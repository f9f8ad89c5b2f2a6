#include "services/query/regression_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ts::query {
namespace {

// P[X >= b], X ~ Binomial(n, 1/2), from Pascal's triangle in long double: a reference that
// shares nothing with the code under test (no lgamma, no symmetry, no early stop).
double PascalTail(int n, int b) {
  std::vector<long double> row{1};
  for (int i = 1; i <= n; ++i) {
    std::vector<long double> next(i + 1, 1);
    for (int k = 1; k < i; ++k) next[k] = row[k - 1] + row[k];
    row.swap(next);
  }
  long double sum = 0;
  for (int k = b; k <= n; ++k) sum += row[k];
  return static_cast<double>(sum / std::pow(2.0L, n));
}

TEST(McNemarTest, SmallCountsAreTheExactBinomialTail) {
  EXPECT_EQ(McNemarOneSidedP(1, 0), 0.5);            // one flip: a coin
  EXPECT_EQ(McNemarOneSidedP(1, 1), 0.75);           // P[X >= 1], n = 2: 3/4
  EXPECT_EQ(McNemarOneSidedP(3, 1), 5.0 / 16);       // (C(4,3) + C(4,4)) / 16
  EXPECT_EQ(McNemarOneSidedP(8, 2), 56.0 / 1024);    // (45 + 10 + 1) / 2^10
  EXPECT_EQ(McNemarOneSidedP(2, 8), 1013.0 / 1024);  // 1 - (1 + 10) / 2^10
  EXPECT_EQ(McNemarOneSidedP(10, 0), 1.0 / 1024);    // every pair flipped: 2^-10
  EXPECT_EQ(McNemarOneSidedP(50, 0), std::ldexp(1.0, -50));
}

TEST(McNemarTest, NoFlipIsNoEvidence) {
  EXPECT_EQ(McNemarOneSidedP(0, 0), 1.0);
  EXPECT_EQ(McNemarOneSidedP(0, 7), 1.0);
}

TEST(McNemarTest, LargeCountsMatchPascalsTriangle) {
  const std::pair<int, int> cases[] = {{60, 0},    {55, 45},   {45, 55}, {30, 70},
                                       {500, 400}, {400, 500}, {26, 25}, {700, 10}};
  for (const auto& [b, c] : cases) {
    const double want = PascalTail(b + c, b);
    EXPECT_NEAR(McNemarOneSidedP(b, c), want, want * 1e-11) << b << " " << c;
  }
  EXPECT_NEAR(McNemarOneSidedP(60, 0), std::ldexp(1.0, -60), std::ldexp(1.0, -60) * 1e-12);
}

TEST(McNemarTest, HugeCohortsStayInRange) {
  const double p = McNemarOneSidedP(52000, 48000);
  EXPECT_GT(p, 0);
  EXPECT_LT(p, 1e-30);  // 4,000 more flips than fixes out of 100,000: ~12.6 sigma
  const double q = McNemarOneSidedP(49000, 51000);
  EXPECT_GT(q, 0.99);
  EXPECT_LE(q, 1);
}

TEST(BonferroniTest, TheBoundIsAlphaOverTheTests) {
  const double p = McNemarOneSidedP(20, 0);        // 2^-20 = 9.54e-7
  EXPECT_TRUE(BonferroniSignificant(p, 1000));     // < 1e-6
  EXPECT_FALSE(BonferroniSignificant(p, 2000));    // not < 5e-7
  EXPECT_FALSE(BonferroniSignificant(0.0005, 2));  // equal to the bound: not below it
  EXPECT_TRUE(BonferroniSignificant(0.0004, 2));
  EXPECT_TRUE(BonferroniSignificant(0.0009, 0));  // no tests counted: one
}

TEST(InfrastructureTest, CrashLostTimeoutAndSkippedNeverCount) {
  for (const char* s : {"crash", "lost", "timeout", "skipped"}) {
    EXPECT_TRUE(IsInfrastructureStatus(s)) << s;
    EXPECT_FALSE(CountsInCohort("pass", s)) << s;
    EXPECT_FALSE(CountsInCohort(s, "fail_accuracy")) << s;
  }
  for (const char* s : {"fail_accuracy", "oom", "device_error", "compile_fail", "compile_timeout",
                        "load_fail", "pass"}) {
    EXPECT_FALSE(IsInfrastructureStatus(s)) << s;
    EXPECT_TRUE(CountsInCohort("pass", s)) << s;
  }
  EXPECT_FALSE(CountsInCohort("", "pass"));  // not recorded in one sweep
}

TEST(SeverityTest, BreadthAndTheGroupTests) {
  EXPECT_STREQ(AlertSeverity(1, 1, false), "warning");
  EXPECT_STREQ(AlertSeverity(4, 1, false), "warning");
  EXPECT_STREQ(AlertSeverity(5, 1, false), "major");
  EXPECT_STREQ(AlertSeverity(2, 2, false), "major");
  EXPECT_STREQ(AlertSeverity(1, 1, true), "critical");
}

TEST(MedianTest, OddAndEvenCounts) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

// Seven steady nights at 90%, then 2 points lower each night for 4 nights.
TEST(DropRuleTest, ASlideOfTwoPointsANightIsCaughtWithinFourNights) {
  std::vector<double> history(7, 90.0);
  std::vector<bool> fired;
  for (double tonight : {88.0, 86.0, 84.0, 82.0}) {
    const DropVerdict v = CheckDrop(history, tonight, 100);
    EXPECT_EQ(v.median, 90.0);
    EXPECT_EQ(v.drop, 90.0 - tonight);
    fired.push_back(v.fired);
    history.push_back(tonight);
  }
  EXPECT_EQ(fired, (std::vector<bool>{false, false, true, true}));  // caught on night 3
}

TEST(DropRuleTest, OneNoisyNightIsNotCaughtThatNightNorAfter) {
  std::vector<double> history(7, 90.0);
  DropVerdict v = CheckDrop(history, 80.0, 100);  // 10 points down, alone
  EXPECT_EQ(v.drop, 10.0);
  EXPECT_FALSE(v.fired);
  history.push_back(80.0);
  for (double tonight : {90.0, 89.0, 90.5}) {  // back to its usual rate
    v = CheckDrop(history, tonight, 100);
    EXPECT_EQ(v.median, 90.0);  // the noisy night does not move the median of 7
    EXPECT_FALSE(v.fired) << tonight;
    history.push_back(tonight);
  }
}

TEST(DropRuleTest, SmallGroupsAndShortHistoriesNeverFire) {
  std::vector<double> history(7, 90.0);
  history.push_back(86.0);
  EXPECT_TRUE(CheckDrop(history, 84.0, 40).fired);
  EXPECT_FALSE(CheckDrop(history, 84.0, 39).fired);        // one model is over 2.5 points
  EXPECT_FALSE(CheckDrop({90.0, 86.0}, 80.0, 100).fired);  // two prior sweeps only
  EXPECT_TRUE(CheckDrop({90.0, 90.0, 86.0}, 80.0, 100).fired);
  EXPECT_FALSE(CheckDrop({}, 10.0, 100).fired);
}

}  // namespace
}  // namespace ts::query
