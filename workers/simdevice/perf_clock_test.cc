// The simulated clock on the device: what ops, fallbacks, transfers, compiled segments and
// performance defects charge, worked out by hand from a profile written here.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "workers/simdevice/device_clock.h"
#include "workers/simdevice/internal/device_test_util.h"
#include "workers/simdevice/runtime.h"

namespace ts::simdevice {
namespace {

using nlohmann::json;

// Round numbers (see cost_model_test.cc); bf16_in_fp32_acc matmuls run at the bf16 peak.
json HandPerformance() {
  return {{"source", "test"},
          {"matrix_engine", {{"tflops", {{"bfloat16", 400}, {"float32", 100}}}}},
          {"vector_engine", {{"tflops", {{"float32", 10}}}}},
          {"hbm", {{"gbps", 2000}}},
          {"efficiency", 0.5},
          {"launch_us", 4},
          {"host_link", {{"gbps", 50}, {"latency_us", 10}}},
          {"host", {{"gflops", 20}, {"gbps", 10}}},
          {"graph_break_us", 30}};
}

json HandProfile(json defects = json::array()) {
  json p = BaselineNoDefects();
  p["performance"] = HandPerformance();
  if (!defects.empty()) {
    for (size_t i = 0; i < defects.size(); ++i) defects[i]["id"] = "P" + std::to_string(i);
    p["defects"] = defects;
  }
  return p;
}

class PerfClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ActivateJson(HandProfile());
    at::manual_seed(3);
  }
  // Runs `fn` on the device with a fresh clock and returns what it charged.
  template <typename Fn>
  PerfCounters Measure(Fn&& fn) {
    ActiveClock().Reset();
    fn();
    return ActiveClock().Snapshot();
  }
};

double SumOps(const PerfCounters& c) {
  double us = 0;
  for (const auto& [op, t] : c.ops) us += t.us;
  return us;
}

TEST_F(PerfClockTest, MatmulCostsTwoMnkOverEfficiencyTimesPeakPlusLaunch) {
  // [256,512] x [512,128] with bf16 operands: 2MNK = 33,554,432 FLOPs at 0.5 x 400 TFLOP/s =
  // 0.16777 us; its 786,432 bytes at 2 TB/s = 0.39322 us: memory-bound at this size.
  auto a = Dev(at::randn({256, 512})), b = Dev(at::randn({512, 128}));
  PerfCounters c = Measure([&] { at::mm(a, b); });
  const double flops = 2.0 * 256 * 128 * 512;
  const double bytes = (256 * 512 + 512 * 128 + 256 * 128) * 4.0;
  EXPECT_DOUBLE_EQ(c.flops, flops);
  EXPECT_DOUBLE_EQ(c.bytes, bytes);
  EXPECT_EQ(c.launches, 1);
  EXPECT_NEAR(c.device_us, bytes / 2e6 + 4, 1e-9);
  EXPECT_DOUBLE_EQ(c.peak_flops, 400e12);
  // Compute-bound once the memory is fast: 2MNK / (eff x peak) + launch.
  json p = HandProfile();
  p["performance"]["hbm"]["gbps"] = 1e6;
  ActivateJson(p);
  c = Measure([&] { at::mm(a, b); });
  EXPECT_NEAR(c.device_us, flops / (0.5 * 400e12) * 1e6 + 4, 1e-9);
  EXPECT_NEAR(Mfu(c), flops / (c.device_us * 1e-6 * 400e12), 1e-12);
  EXPECT_GT(Mfu(c), 0);
  EXPECT_LE(Mfu(c), 1);
}

TEST_F(PerfClockTest, ElementwiseAddIsBytesOverBandwidthPlusLaunch) {
  auto x = Dev(at::randn({1000, 250})), y = Dev(at::randn({1000, 250}));
  PerfCounters c = Measure([&] { at::add(x, y); });
  EXPECT_NEAR(c.device_us, 3 * 250000 * 4.0 / 2e6 + 4, 1e-9);  // 1.5 us + launch
  EXPECT_DOUBLE_EQ(c.flops, 250000);
  ASSERT_EQ(c.ops.count("aten::add.Tensor"), 1u);
  EXPECT_EQ(c.ops["aten::add.Tensor"].calls, 1);
  EXPECT_DOUBLE_EQ(c.ops["aten::add.Tensor"].us, c.device_us);
}

TEST_F(PerfClockTest, FallbackOpCostsItsTransfersAndHostCompute) {
  // aten::sin has no native kernel in the baseline: its operand crosses the link to the host
  // and its result comes back, each a transfer; the host computes 4 FLOPs per element.
  auto x = Dev(at::randn({100, 100}));
  PerfCounters c = Measure([&] { at::sin(x); });
  const double bytes = 10000 * 4.0;
  const double transfer = 10 + bytes / 50e3;
  const double host = std::max(4 * 10000 / 20e3, 2 * bytes / 10e3);
  EXPECT_NEAR(c.device_us, 2 * transfer + host, 1e-9);
  EXPECT_NEAR(c.fallback_us, c.device_us, 1e-9);
  EXPECT_DOUBLE_EQ(c.transfer_bytes, 2 * bytes);
  EXPECT_EQ(c.launches, 0);
  EXPECT_EQ(c.ops.size(), 1u) << "the transfers are the fallback op's";
  EXPECT_NEAR(c.ops["aten::sin"].us, c.device_us, 1e-9);
}

TEST_F(PerfClockTest, CompiledSegmentOfFusedElementwiseOpsIsOneLaunchAndItsBoundary) {
  // Five elementwise ops in one segment: their compute (1 FLOP per element each at
  // 0.5 x 10 TFLOP/s) and, at the segment's end, one launch and the boundary traffic (x read,
  // the result written) instead of five launches and ten tensors' traffic.
  auto x = Dev(at::randn({1000, 250}));
  const double n = 250000, tensor_bytes = n * 4;
  PerfCounters c = Measure([&] {
    ScopedExecMode compiled(ExecMode::kCompiled);
    at::Tensor y = x;
    for (int i = 0; i < 5; ++i) y = at::mul(y, y);
    ActiveClock().EndSegment(2 * tensor_bytes);
  });
  const double compute = 5 * n / (0.5 * 10e12) * 1e6;  // 0.25 us
  EXPECT_NEAR(c.device_us, 4 + std::max(compute, 2 * tensor_bytes / 2e6), 1e-9);
  EXPECT_EQ(c.launches, 1);
  EXPECT_DOUBLE_EQ(c.bytes, 2 * tensor_bytes);
  EXPECT_NEAR(SumOps(c), c.device_us, 1e-9);
  // The same ops in eager: five launches, every operand and result through memory.
  PerfCounters eager = Measure([&] {
    at::Tensor y = x;
    for (int i = 0; i < 5; ++i) y = at::mul(y, y);
  });
  EXPECT_NEAR(eager.device_us, 5 * (4 + 3 * tensor_bytes / 2e6), 1e-9);
  EXPECT_LT(c.device_us, eager.device_us);
}

TEST_F(PerfClockTest, TransfersGraphBreaksHostOpsAndPausing) {
  auto x = at::randn({1000, 250});
  PerfCounters c = Measure([&] { Dev(x); });
  EXPECT_NEAR(c.device_us, 10 + 1e6 / 50e3, 1e-9);
  EXPECT_DOUBLE_EQ(c.ops["[transfer]"].us, c.device_us);
  EXPECT_DOUBLE_EQ(c.transfer_bytes, 1e6);
  c = Measure([&] {
    ScopedClockPause staging;
    Dev(x);
  });
  EXPECT_EQ(c.device_us, 0);
  c = Measure([&] { ActiveClock().GraphBreakSync(); });
  EXPECT_DOUBLE_EQ(c.ops["[sync]"].us, 30);
  auto a = at::randn({10, 20}), b = at::randn({20, 30});
  c = Measure([&] { ActiveClock().HostOp("aten::mm", {a, b}, {at::mm(a, b)}); });
  EXPECT_NEAR(c.device_us, 2.0 * 10 * 30 * 20 / 20e3, 1e-12);  // compute-bound on the host
  EXPECT_DOUBLE_EQ(c.fallback_us, c.device_us);
}

TEST_F(PerfClockTest, DeviceToDeviceCopyIsAMemoryBoundKernel) {
  auto x = Dev(at::randn({1000, 250}));
  PerfCounters c = Measure([&] { x.t().contiguous(); });
  EXPECT_NEAR(c.ops["aten::copy_"].us, 4 + 2 * 1e6 / 2e6, 1e-9);
  EXPECT_EQ(c.launches, 1);
}

TEST_F(PerfClockTest, SlowDefectMultipliesTheOpsModelledTimeUnderItsConditions) {
  auto x = Dev(at::randn({4, 64}));
  auto base = Measure([&] { at::gelu(x); });
  ActivateJson(HandProfile({{{"op", "aten::gelu"},
                             {"when", {{"min_numel", 100}}},
                             {"effect", {{"kind", "slow"}, {"value", 4}}}}}));
  auto slow = Measure([&] { at::gelu(x); });
  EXPECT_NEAR(slow.device_us, 4 * base.device_us, 1e-9);
  auto small = Dev(at::randn({4, 8}));
  auto small_base = Measure([&] { at::silu(small); });
  EXPECT_NEAR(Measure([&] { at::gelu(small); }).device_us, small_base.device_us, 1e-9)
      << "below min_numel the defect does not apply";
  // Numbers are unchanged: a performance defect changes only the clock.
  EXPECT_TRUE(at::equal(Cpu(at::gelu(x)), at::gelu(Cpu(x))));
  // mode: eager only.
  ActivateJson(HandProfile(
      {{{"op", "aten::gelu"}, {"mode", "eager"}, {"effect", {{"kind", "slow"}, {"value", 4}}}}}));
  auto compiled = [&] {
    ScopedExecMode mode(ExecMode::kCompiled);
    at::gelu(x);
  };
  const double compiled_slow = Measure(compiled).device_us;
  ActivateJson(HandProfile());
  EXPECT_DOUBLE_EQ(Measure(compiled).device_us, compiled_slow);
}

TEST_F(PerfClockTest, VectorEngineDefectRunsAMatmulAtTheVectorPeak) {
  json p = HandProfile({{{"op", "aten::mm"}, {"effect", {{"kind", "vector_engine"}}}}});
  p["performance"]["hbm"]["gbps"] = 1e6;
  ActivateJson(p);
  auto a = Dev(at::randn({64, 64})), b = Dev(at::randn({64, 64}));
  PerfCounters c = Measure([&] { at::mm(a, b); });
  const double flops = 2.0 * 64 * 64 * 64;
  EXPECT_NEAR(c.device_us, flops / (0.5 * 10e12) * 1e6 + 4, 1e-9);
}

// A flaky performance defect draws from its own RNG: a flaky accuracy defect on the same op
// fires on exactly the same calls with or without it.
TEST_F(PerfClockTest, FlakyPerformanceDefectsLeaveAccuracyDrawsAlone) {
  const json flaky_scale = {{"op", "aten::relu"},
                            {"when", {{"probability", 0.5}}},
                            {"effect", {{"kind", "scale"}, {"value", 2.0}}}};
  const json flaky_slow = {{"op", "aten::relu"},
                           {"when", {{"probability", 0.5}}},
                           {"effect", {{"kind", "slow"}, {"value", 3.0}}}};
  auto x = at::rand({16}) + 1;
  auto draws = [&](const json& defects) {
    ActivateJson(HandProfile(defects), /*seed=*/11);
    std::vector<bool> scaled;
    for (int i = 0; i < 40; ++i) scaled.push_back(!at::equal(Cpu(at::relu(Dev(x))), x));
    return scaled;
  };
  const auto alone = draws(json::array({flaky_scale}));
  EXPECT_EQ(draws(json::array({flaky_scale, flaky_slow})), alone);
  int fired = 0;
  for (bool b : alone) fired += b ? 1 : 0;
  EXPECT_GT(fired, 5);
  EXPECT_LT(fired, 35);
}

TEST_F(PerfClockTest, PerKernelEfficiencyAndLaunchOverrides) {
  json p = HandProfile();
  p["performance"]["kernels"] = {{"aten::add", {{"launch_us", 1}}}};
  ActivateJson(p);
  auto x = Dev(at::randn({10}));
  EXPECT_NEAR(Measure([&] { at::add(x, x); }).device_us, 1 + 120 / 2e6, 1e-9);
  EXPECT_NEAR(Measure([&] { at::mul(x, x); }).device_us, 4 + 120 / 2e6, 1e-9);
}

TEST_F(PerfClockTest, SameOpsGiveIdenticalFiguresRunToRun) {
  auto x = Dev(at::randn({32, 64})), w = Dev(at::randn({64, 64}));
  auto run = [&] {
    return Measure([&] {
      auto h = at::gelu(at::mm(x, w));
      at::softmax(at::add(h, h), -1).sum();
      at::sin(h);
    });
  };
  PerfCounters a = run(), b = run();
  EXPECT_EQ(a.device_us, b.device_us);
  EXPECT_EQ(a.flops, b.flops);
  EXPECT_EQ(a.ops.size(), b.ops.size());
  EXPECT_NEAR(SumOps(a), a.device_us, 1e-9);
}

}  // namespace
}  // namespace ts::simdevice
