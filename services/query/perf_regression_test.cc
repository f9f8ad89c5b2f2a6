// Performance regressions: the threshold, the op that grew most, and the speedup line rule, by
// hand.
#include "services/query/perf_regression.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ts::query {
namespace {

pb::Perf PerfOf(double us, std::vector<std::pair<std::string, double>> ops) {
  pb::Perf p;
  p.set_device_us(us);
  for (const auto& [op, t] : ops) {
    pb::OpTime* o = p.add_top_ops();
    o->set_op(op);
    o->set_us(t);
  }
  return p;
}

TEST(PerfRegressionTest, GrowthBeyondTheThresholdIsARegression) {
  const pb::Perf base = PerfOf(100, {{"aten::mm", 60}, {"aten::add.Tensor", 40}});
  EXPECT_FALSE(PerfRegressed(base, PerfOf(102, {}), 0.02)) << "exactly 2% is not beyond";
  EXPECT_FALSE(PerfRegressed(base, PerfOf(90, {}), 0.02));
  auto r = PerfRegressed(base, PerfOf(102.5, {{"aten::mm", 62.5}, {"aten::add.Tensor", 40}}), 0.02);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->op, "aten::mm");
  EXPECT_DOUBLE_EQ(r->growth_us, 2.5);
  EXPECT_TRUE(PerfRegressed(base, PerfOf(110, {}), 0.05).has_value());
  EXPECT_FALSE(PerfRegressed(base, PerfOf(110, {}), 0.10).has_value());
  EXPECT_FALSE(PerfRegressed(PerfOf(0, {}), PerfOf(10, {}), 0.02)) << "no baseline time";
  EXPECT_FALSE(PerfRegressed(base, PerfOf(NAN, {}), 0.02));
}

TEST(PerfRegressionTest, TheOpThatGrewMostIsNamedEvenWhenNewToTheTopList) {
  // layer_norm was below base's list (at most its smallest, 10 us) and now takes 40 us: it grew
  // by at least 30 us, more than mm's 5.
  const pb::Perf base =
      PerfOf(100, {{"aten::mm", 50}, {"aten::add.Tensor", 20}, {"aten::gelu", 10}});
  const pb::Perf head = PerfOf(150, {{"aten::mm", 55},
                                     {"aten::native_layer_norm", 40},
                                     {"aten::add.Tensor", 20},
                                     {"aten::gelu", 10}});
  OpGrowth g = OpGrownMost(base.top_ops(), head.top_ops());
  EXPECT_EQ(g.op, "aten::native_layer_norm");
  EXPECT_DOUBLE_EQ(g.growth_us, 30);
  // Equal growth: by name.
  g = OpGrownMost(PerfOf(1, {{"b", 1}, {"a", 1}}).top_ops(),
                  PerfOf(1, {{"b", 2}, {"a", 2}}).top_ops());
  EXPECT_EQ(g.op, "a");
  EXPECT_EQ(OpGrownMost(base.top_ops(), PerfOf(1, {}).top_ops()).op, "");
}

TEST(PerfRegressionTest, SpeedupLineFiresAfterTwoSweepsUnderTheBestOfTheSixBefore) {
  // Best of the window 2.0; 1.85 < 1.9 twice in a row fires.
  EXPECT_TRUE(CheckSpeedupLine({1.9, 2.0, 1.95, 1.85, 1.85}).fired);
  SpeedupLineVerdict v = CheckSpeedupLine({1.9, 2.0, 1.95, 1.85, 1.85});
  EXPECT_DOUBLE_EQ(v.best, 2.0);
  EXPECT_DOUBLE_EQ(v.previous_best, 2.0);
  // Once is not enough; 1.91 is within 0.95 x 2.0.
  EXPECT_FALSE(CheckSpeedupLine({2.0, 2.0, 2.0, 1.8}).fired);
  EXPECT_FALSE(CheckSpeedupLine({2.0, 1.91, 1.8}).fired);
  // The window is the 6 sweeps before: a best 7 sweeps back no longer counts.
  EXPECT_FALSE(CheckSpeedupLine({3.0, 1.9, 1.9, 1.9, 1.9, 1.9, 1.9, 1.85, 1.85}).fired);
  EXPECT_TRUE(CheckSpeedupLine({3.0, 1.9, 1.9, 1.9, 1.9, 1.9, 2.0, 1.85, 1.85}).fired);
  // Unmeasured sweeps are skipped; no history, no alert.
  EXPECT_TRUE(CheckSpeedupLine({2.0, NAN, 1.8, 1.8}).fired);
  EXPECT_FALSE(CheckSpeedupLine({1.0, 0.5}).fired) << "the sweep before has no history";
  EXPECT_FALSE(CheckSpeedupLine({2.0, 1.8, NAN}).fired);
  EXPECT_FALSE(CheckSpeedupLine({}).fired);
}

}  // namespace
}  // namespace ts::query
