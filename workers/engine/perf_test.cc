// Device time end to end: a compiled segment fuses its ops (one launch, its boundary traffic), a
// graph break costs a sync, its transfers and the host's work, and a mode's perf record exists
// only where the mode passed. The profiles and defects are written here; the engine never reads
// defects.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "workers/engine/compiler.h"
#include "workers/engine/engine.h"
#include "workers/engine/engine_test_util.h"
#include "workers/simdevice/device_clock.h"
#include "workers/simdevice/runtime.h"

namespace ts::engine {
namespace {

using nlohmann::json;

simdevice::ProfileInfo CompilerProfile(std::set<std::string> supported) {
  simdevice::ProfileInfo p = simdevice::ActiveProfile();
  p.compiler.supported_ops = std::move(supported);
  p.compiler.data_dependent_ops = {"aten::nonzero"};
  return p;
}

// Compiles `fn` for `supported` and runs it once on the device with a fresh clock.
simdevice::PerfCounters RunCompiled(const TraceFn& fn, const std::vector<at::Tensor>& in,
                                    std::set<std::string> supported,
                                    std::vector<at::Tensor>* out = nullptr) {
  auto graph = TraceToGraph(fn, in);
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  auto compiled = CompiledGraph::Compile(*graph, CompilerProfile(std::move(supported)), in);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  simdevice::DeviceClock& clock = simdevice::ActiveClock();
  clock.Reset();
  auto result = (*compiled)->Run(in);
  if (out != nullptr) *out = result;
  return clock.Snapshot();
}

double Bytes(const at::Tensor& t) { return static_cast<double>(t.numel()) * t.element_size(); }

TEST(DeviceTimeTest, CompiledSegmentOfFusedElementwiseOpsCostsOneLaunchAndItsBoundary) {
  Use(Baseline());
  const simdevice::PerformanceSpec spec = simdevice::ActiveProfile().performance;
  // Six elementwise ops on a [256, 1024] input, in one segment: the input is read and the
  // result written, nothing in between; the inputs' staging and the output's read-back are not
  // part of the step.
  auto x = torch::randn({256, 1024});
  auto six = [](const std::vector<at::Tensor>& v) -> std::vector<at::Tensor> {
    at::Tensor h = v[0] * 2;
    h = h + 1;
    h = at::relu(h);
    h = -h;
    h = h * h;
    return {h - 3};
  };
  simdevice::PerfCounters c =
      RunCompiled(six, {x}, {"aten::mul", "aten::add", "aten::relu", "aten::neg", "aten::sub"});
  const double boundary = 2 * Bytes(x);
  const double compute =
      6 * x.numel() / (spec.efficiency * spec.vector_tflops.at("float32") * 1e12) * 1e6;
  EXPECT_EQ(c.launches, 1);
  EXPECT_DOUBLE_EQ(c.bytes, boundary);
  EXPECT_NEAR(c.device_us, spec.launch_us + std::max(compute, boundary / (spec.hbm_gbps * 1e3)),
              1e-9);
  EXPECT_EQ(c.transfer_bytes, 0) << "staging is not the step's";
  // The same function eagerly on the device: six launches, every operand and result.
  simdevice::DeviceClock& clock = simdevice::ActiveClock();
  auto xd = x.to(simdevice::SimDevice());
  clock.Reset();
  six({xd});
  const simdevice::PerfCounters eager = clock.Snapshot();
  EXPECT_EQ(eager.launches, 6);
  EXPECT_GT(eager.device_us, 6 * spec.launch_us);
  EXPECT_LT(c.device_us, eager.device_us);
}

// [w1 16x8, b1 16, w2 6x16, b2 6, x 4x8]: linear, gelu | cumsum (unsupported) | linear, softmax.
std::vector<at::Tensor> Mlp(const std::vector<at::Tensor>& in) {
  at::Tensor h = at::gelu(at::linear(in[4], in[0], in[1]));
  h = at::cumsum(h, -1);
  return {at::softmax(at::linear(h, in[2], in[3]), -1)};
}

TEST(DeviceTimeTest, GraphBreakCostsASyncItsTransfersAndTheHostsWork) {
  Use(Baseline());
  const simdevice::PerformanceSpec spec = simdevice::ActiveProfile().performance;
  torch::manual_seed(0);
  std::vector<at::Tensor> in = {torch::randn({16, 8}), torch::randn({16}), torch::randn({6, 16}),
                                torch::randn({6}), torch::randn({4, 8})};
  std::vector<at::Tensor> out;
  simdevice::PerfCounters c =
      RunCompiled(Mlp, in, {"aten::linear", "aten::gelu", "aten::softmax"}, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), Mlp(in)[0].sizes());
  EXPECT_EQ(c.launches, 2) << "one per device segment";
  ASSERT_EQ(c.ops.count("[sync]"), 1u);
  EXPECT_EQ(c.ops["[sync]"].calls, 1);
  EXPECT_DOUBLE_EQ(c.ops["[sync]"].us, spec.graph_break_us);
  // The break moves gelu's [4,16] result to the host and cumsum's back: two transfers.
  const double h_bytes = 4 * 16 * 4;
  EXPECT_DOUBLE_EQ(c.transfer_bytes, 2 * h_bytes);
  EXPECT_NEAR(c.ops["[transfer]"].us,
              2 * (spec.host_link_latency_us + h_bytes / (spec.host_link_gbps * 1e3)), 1e-9);
  ASSERT_EQ(c.ops.count("aten::cumsum"), 1u) << "the CPU segment's node is host work";
  EXPECT_NEAR(c.fallback_us, c.ops["aten::cumsum"].us, 1e-12);
  // Segment 1 reads x, w1, b1 and writes h; segment 2 reads cumsum's result, w2, b2 and writes
  // the softmax.
  const double seg1 = Bytes(in[4]) + Bytes(in[0]) + Bytes(in[1]) + h_bytes;
  const double seg2 = h_bytes + Bytes(in[2]) + Bytes(in[3]) + 4 * 6 * 4;
  EXPECT_DOUBLE_EQ(c.bytes, seg1 + seg2);
  double sum = 0;
  for (const auto& [op, t] : c.ops) sum += t.us;
  EXPECT_NEAR(sum, c.device_us, 1e-9);
}

// A model whose eager mode fails has no eager perf, and so no compile speedup; the modes that
// pass have theirs.
TEST(DeviceTimeTest, OnlyPassingModesHavePerfAndSpeedupNeedsBoth) {
  Use(WithDefect("aten::gelu", {{"kind", "error"}}, {{"mode", "eager"}}));
  ModelResult r = RunModel(Config("snowflake-arctic-embed-m.json"), RunOptions());
  ASSERT_EQ(Mode(r, "eager").status, Verdict::kDeviceError) << Describe(r);
  EXPECT_FALSE(Mode(r, "eager").perf.has_value());
  ASSERT_EQ(Mode(r, "compile").status, Verdict::kPass) << Describe(r);
  ASSERT_TRUE(Mode(r, "compile").perf.has_value());
  EXPECT_FALSE(Mode(r, "compile").perf->speedup.has_value());
  EXPECT_TRUE(ToJson(r)["modes"]["eager"]["perf"].is_null());
  EXPECT_TRUE(ToJson(r)["modes"]["compile"]["perf"]["speedup"].is_null());
  Use(Baseline());
  r = RunModel(Config("snowflake-arctic-embed-m.json"), RunOptions());
  const auto& c = Mode(r, "compile");
  ASSERT_TRUE(c.perf && c.perf->speedup && c.perf->compression) << Describe(r);
  EXPECT_DOUBLE_EQ(*c.perf->speedup, Mode(r, "eager").perf->device_us / c.perf->device_us);
  EXPECT_DOUBLE_EQ(
      *c.perf->compression,
      static_cast<double>(Mode(r, "eager").perf->peak_device_bytes) / c.perf->peak_device_bytes);
  EXPECT_TRUE(Mode(r, "train").perf.has_value());
}

// A slow kernel: the op's time grows by its factor in the modes it runs in, the verdicts and the
// numbers stay, and the op that grew most is the slow one.
TEST(DeviceTimeTest, SlowKernelGrowsItsOpsTimeAndChangesNoVerdict) {
  Use(Baseline());
  const json config = Config("snowflake-arctic-embed-m.json");
  ModelResult base = RunModel(config, RunOptions());
  Use(WithDefect("aten::native_layer_norm", {{"kind", "slow"}, {"value", 4}}));
  ModelResult slow = RunModel(config, RunOptions());
  for (const char* m : {"eager", "compile", "train"}) {
    EXPECT_EQ(Mode(slow, m).status, Mode(base, m).status) << m;
    ASSERT_TRUE(Mode(slow, m).perf && Mode(base, m).perf) << m;
  }
  EXPECT_EQ(Mode(slow, "train").loss_device, Mode(base, "train").loss_device);
  auto op_us = [](const ModePerf& p, const std::string& op) {
    for (const auto& t : p.top_ops) {
      if (t.op == op) return t.us;
    }
    return 0.0;
  };
  const ModePerf& e0 = *Mode(base, "eager").perf;
  const ModePerf& e1 = *Mode(slow, "eager").perf;
  ASSERT_GT(op_us(e0, "aten::native_layer_norm"), 0);
  EXPECT_NEAR(op_us(e1, "aten::native_layer_norm"), 4 * op_us(e0, "aten::native_layer_norm"), 1e-6);
  EXPECT_NEAR(e1.device_us - e0.device_us, 3 * op_us(e0, "aten::native_layer_norm"), 1e-6);
  EXPECT_EQ(e1.flops, e0.flops);
}

}  // namespace
}  // namespace ts::engine
