// Issue 30 over real gRPC on loopback and a throwaway PostgreSQL: performance regressions in
// detection (services/store/perf_detection.cc): models whose device time grew beyond 2% against
// the baseline, one alert of kind performance per (mode, op that grew most) covering exactly
// them; the speedup line rule; aging; the gate's performance rules. Records are written here.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "services/scheduler/alerts_test_util.h"

namespace ts::scheduler {
namespace {

using namespace alerts_testing;  // NOLINT: the shared fixture
namespace pb = ::touchstone::v1;

const std::string kLn = "aten::native_layer_norm";

// Every mode passes with 100 us on the device: mm 60, layer norm 20, add 20; compile speeds up
// eager by `speedup`.
V Fast(pb::Mode mode, double speedup = 2.0) {
  V v;
  v.device_us = 100;
  v.top_ops = {{"aten::mm", 60}, {kLn, 20}, {"aten::add.Tensor", 20}};
  if (mode == pb::MODE_COMPILE) v.speedup = speedup;
  return v;
}

// Layer norm three times slower in eager on m0..m4 (+40 us), and 1% slower on m5..m9 (under the
// threshold): five eager regressions, all grown most in layer norm.
V SlowLayerNorm(int i, pb::Mode mode, int) {
  V v = Fast(mode);
  if (mode != pb::MODE_EAGER) return v;
  if (i <= 4) {
    v.device_us = 140;
    v.top_ops = {{"aten::mm", 60}, {kLn, 60}, {"aten::add.Tensor", 20}};
  } else if (i <= 9) {
    v.device_us = 101;
    v.top_ops = {{"aten::mm", 61}, {kLn, 20}, {"aten::add.Tensor", 20}};
  }
  return v;
}

TEST_F(AlertsTest, SlowOpOpensOnePerformanceAlertOnExactlyTheModelsThatGrew) {
  const Night fast = [](int, pb::Mode mode, int) { return Fast(mode); };
  const int64_t base = RunSweep("sim-2.0", 0, fast);
  const int64_t head = RunSweep("sim-2.1", base, SlowLayerNorm);
  const pb::DetectRegressionsResponse d = Detect(head);
  EXPECT_EQ(d.flips(), 0);
  ASSERT_EQ(d.perf_regressions_size(), 5);
  for (const auto& r : d.perf_regressions()) {
    EXPECT_EQ(r.mode(), pb::MODE_EAGER);
    EXPECT_EQ(r.op(), kLn);
    EXPECT_DOUBLE_EQ(r.op_growth_us(), 40);
    EXPECT_DOUBLE_EQ(r.head_us() / r.base_us(), 1.4);
  }
  const std::vector<pb::Alert> alerts = Alerts("open");
  ASSERT_EQ(alerts.size(), 1u);
  const pb::Alert& a = alerts[0];
  EXPECT_EQ(a.kind(), "performance");
  EXPECT_EQ(a.cause_kind(), "perf_op");
  EXPECT_EQ(a.op(), kLn);
  EXPECT_EQ(a.mode(), pb::MODE_EAGER);
  EXPECT_EQ(a.line(), "sim");
  std::set<std::pair<std::string, pb::Mode>> want;
  for (int i = 0; i <= 4; ++i) want.insert({"org/m" + std::to_string(i), pb::MODE_EAGER});
  EXPECT_EQ(Covered(alerts), want);
  EXPECT_NE(a.models(0).detail().find("x1.400"), std::string::npos) << a.models(0).detail();
  // Detecting again changes nothing; the same slowdown the next night keeps it open (updated);
  // three nights back at speed resolve it.
  EXPECT_EQ(Detect(head).opened_size(), 0);
  EXPECT_EQ(Alerts("open").size(), 1u);
  const int64_t again = RunSweep("sim-2.1", base, SlowLayerNorm);
  EXPECT_EQ(Detect(again).updated_size(), 1);
  int64_t prev = again;
  for (int night = 0; night < 3; ++night) {
    prev = RunSweep("sim-2.1", prev, fast);
    Detect(prev);
  }
  EXPECT_EQ(Alerts("resolved").size(), 1u);
  EXPECT_TRUE(Alerts("open").empty());
}

TEST_F(AlertsTest, AnIdenticalDeviceOpensNoPerformanceAlert) {
  const Night fast = [](int, pb::Mode mode, int) { return Fast(mode); };
  const int64_t base = RunSweep("sim-2.0", 0, fast);
  const int64_t head = RunSweep("sim-2.0", base, fast);
  const pb::DetectRegressionsResponse d = Detect(head);
  EXPECT_EQ(d.perf_regressions_size(), 0);
  EXPECT_EQ(d.speedup_lines_size(), 0);
  EXPECT_TRUE(Alerts().empty());
}

// GPT-2's compile speedup (m0..m9) slides from 2.0 to 1.8 (under 0.95 x 2.0) for two nights in a
// row: its class and its task each get a perf_line alert on the second night, not the first.
TEST_F(AlertsTest, SpeedupUnderTheBestOfTheLineTwiceInARowIsALineRegression) {
  const Night fast = [](int, pb::Mode mode, int) { return Fast(mode); };
  const Night slower = [](int i, pb::Mode mode, int) { return Fast(mode, i <= 9 ? 1.8 : 2.0); };
  int64_t prev = RunSweep("sim-2.0", 0, fast);
  prev = RunSweep("sim-2.0", prev, fast);
  Detect(prev);
  prev = RunSweep("sim-2.0", prev, slower);
  pb::DetectRegressionsResponse d = Detect(prev);
  EXPECT_EQ(d.speedup_lines_size(), 0) << "one night under is not yet a regression";
  prev = RunSweep("sim-2.0", prev, slower);
  d = Detect(prev);
  ASSERT_EQ(d.speedup_lines_size(), 2);
  std::set<std::string> lines;
  for (const auto& l : d.speedup_lines()) {
    lines.insert(l.kind() + ":" + l.group());
    EXPECT_NEAR(l.speedup(), 1.8, 1e-9);
    EXPECT_NEAR(l.best(), 2.0, 1e-9);
  }
  EXPECT_EQ(lines, (std::set<std::string>{"class:GPT2LMHeadModel", "task:text-generation"}));
  std::set<std::string> causes;
  for (const auto& a : Alerts("open")) {
    EXPECT_EQ(a.kind(), "performance");
    EXPECT_EQ(a.cause_kind(), "perf_line");
    EXPECT_EQ(a.mode(), pb::MODE_COMPILE);
    EXPECT_EQ(a.models_size(), 10);
    causes.insert(a.cause());
  }
  EXPECT_EQ(causes, lines);
}

TEST_F(AlertsTest, GateChecksSpeedupAndPerformanceRegressions) {
  const Night fast = [](int, pb::Mode mode, int) { return Fast(mode); };
  const int64_t base = RunSweep("sim-2.0", 0, fast);
  const int64_t head = RunSweep("sim-2.1", base, SlowLayerNorm);
  pb::GateRequest req;
  req.set_sweep_id(head);
  req.mutable_rules()->set_min_geomean_speedup(1.9);
  (*req.mutable_rules()->mutable_min_geomean_speedup_by_task())["fill-mask"] = 2.5;
  req.mutable_rules()->set_max_perf_regressions(4);
  pb::GateResponse resp;
  auto st = query_->Gate(Ctx("reader-token").get(), req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(resp.pass());
  std::set<std::string> failed;
  for (const auto& c : resp.failures()) failed.insert(c.rule() + " " + c.group());
  EXPECT_EQ(failed, (std::set<std::string>{"min_geomean_speedup_by_task fill-mask",
                                           "max_perf_regressions "}));
  for (const auto& c : resp.checks()) {
    if (c.rule() == "min_geomean_speedup") {
      EXPECT_NEAR(c.measured(), 2.0, 1e-9);
    }
    if (c.rule() == "max_perf_regressions") {
      EXPECT_EQ(c.measured(), 5);
    }
  }
  // Bad rules name the field.
  req.mutable_rules()->set_min_geomean_speedup(-1);
  st = query_->Gate(Ctx("reader-token").get(), req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("rules.min_geomean_speedup"), std::string::npos);
}

}  // namespace
}  // namespace ts::scheduler
