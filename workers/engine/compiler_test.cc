#include "workers/engine/compiler.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/torch.h>

#include "workers/simdevice/runtime.h"

namespace ts::engine {
namespace {

using simdevice::ProfileInfo;

// [w1 16x8, b1 16, w2 6x16, b2 6, x 4x8]
std::vector<at::Tensor> MlpInputs() {
  torch::manual_seed(0);
  return {torch::randn({16, 8}), torch::randn({16}), torch::randn({6, 16}), torch::randn({6}),
          torch::randn({4, 8})};
}

std::vector<at::Tensor> Mlp(const std::vector<at::Tensor>& in) {
  at::Tensor h = at::linear(in[4], in[0], in[1]);
  h = at::gelu(h);
  h = at::cumsum(h, -1);
  h = at::linear(h, in[2], in[3]);
  return {at::softmax(h, -1)};
}

ProfileInfo ProfileWith(std::set<std::string> supported) {
  ProfileInfo p;
  p.name = "test";
  p.compiler.supported_ops = std::move(supported);
  p.compiler.data_dependent_ops = {"aten::nonzero", "aten::item", "aten::_local_scalar_dense"};
  p.compiler.cost_ms_per_node = 1.0;
  p.compiler.cost_ms_per_mflop = 0.0;
  return p;
}

const std::set<std::string> kMlpOps = {"aten::linear", "aten::gelu", "aten::softmax"};

std::shared_ptr<torch::jit::Graph> TraceOrDie(const TraceFn& fn,
                                              const std::vector<at::Tensor>& in) {
  auto graph = TraceToGraph(fn, in);
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return graph.ok() ? *graph : nullptr;
}

TEST(TraceToGraphTest, GraphInputsAreTheFlatListAndOutputsTheReturnedTensors) {
  auto in = MlpInputs();
  auto graph = TraceOrDie(Mlp, in);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->inputs().size(), in.size());
  EXPECT_EQ(graph->outputs().size(), 1u);
  auto two = TraceOrDie(
      [](const std::vector<at::Tensor>& x) -> std::vector<at::Tensor> {
        return {x[0] + 1, x[0] * 2};
      },
      {torch::ones({3})});
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->outputs().size(), 2u);
}

TEST(TraceToGraphTest, ThrowingFunctionIsFailedPreconditionWithItsMessage) {
  auto graph = TraceToGraph(
      [](const std::vector<at::Tensor>& x) -> std::vector<at::Tensor> {
        return {at::mm(x[0], x[0])};  // 1-d mm: shape error
      },
      {torch::ones({3})});
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(graph.status().message().find("trace failed"), std::string::npos);
}

TEST(CompileTest, UnsupportedCumsumSplitsTwoDeviceSegmentsWithOneBreak) {
  auto in = MlpInputs();
  auto graph = TraceOrDie(Mlp, in);
  ASSERT_NE(graph, nullptr);
  auto compiled = CompiledGraph::Compile(graph, ProfileWith(kMlpOps), in);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  const CompileReport& r = (*compiled)->report();
  EXPECT_EQ(r.graph_nodes, 5) << (*compiled)->DebugString();
  EXPECT_EQ(r.device_nodes, 4);
  EXPECT_EQ(r.cpu_nodes, 1);
  EXPECT_EQ(r.device_segments, 2);
  EXPECT_EQ(r.graph_breaks, 1);
  ASSERT_EQ(r.break_reasons.size(), 1u);
  EXPECT_EQ(r.break_reasons[0], "unsupported op aten::cumsum");
  EXPECT_EQ(r.unsupported_ops.at("aten::cumsum"), 1);
  // 2*4*16*8 + 2*4*6*16 flops.
  EXPECT_NEAR(r.mflops, (1024 + 768) / 1e6, 1e-12);
  EXPECT_DOUBLE_EQ(r.simulated_compile_ms, 4.0);
  // w1, b1, x in; cumsum's input out and its result in; w2, b2 in; the result out.
  EXPECT_EQ((*compiled)->TransfersToDevice(), 6);
  EXPECT_EQ((*compiled)->TransfersToCpu(), 2);
}

TEST(CompileTest, CpuOnlyPlacementMatchesEagerExactly) {
  auto in = MlpInputs();
  auto graph = TraceOrDie(Mlp, in);
  ASSERT_NE(graph, nullptr);
  CompileReport report;
  auto compiled = CompiledGraph::Compile(graph, ProfileWith({}), in, &report);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_EQ(report.device_segments, 0);
  EXPECT_EQ(report.graph_breaks, 0);
  EXPECT_EQ(report.cpu_nodes, 5);
  EXPECT_EQ((*compiled)->TransfersToDevice(), 0);
  // Fresh inputs, not the example ones: the graph must not have baked them in.
  torch::manual_seed(7);
  std::vector<at::Tensor> fresh;
  for (const at::Tensor& t : in) fresh.push_back(torch::randn_like(t));
  auto got = (*compiled)->Run(fresh);
  auto want = Mlp(fresh);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(torch::equal(got[0], want[0]));
}

// linear -> gt -> nonzero -> index_select -> sum, then a static tail using the sum.
std::vector<at::Tensor> MaskedSum(const std::vector<at::Tensor>& in) {
  at::Tensor a = at::linear(in[0], in[1]);
  at::Tensor flat = a.flatten();
  at::Tensor idx = at::nonzero(flat > 0).squeeze(1);
  at::Tensor s = flat.index_select(0, idx).sum();
  return {at::linear(a, in[2]) * s};
}

TEST(CompileTest, NonzeroBreaksAndItsShapeDependentConsumersStayOnCpu) {
  torch::manual_seed(1);
  std::vector<at::Tensor> in = {torch::randn({4, 8}), torch::randn({8, 8}), torch::randn({3, 8})};
  auto graph = TraceOrDie(MaskedSum, in);
  ASSERT_NE(graph, nullptr);
  ProfileInfo profile =
      ProfileWith({"aten::linear", "aten::flatten", "aten::gt", "aten::squeeze",
                   "aten::index_select", "aten::sum", "aten::mul", "aten::nonzero"});
  auto compiled = CompiledGraph::Compile(graph, profile, in);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  const CompileReport& r = (*compiled)->report();
  const std::string dbg = (*compiled)->DebugString();
  EXPECT_EQ(r.graph_breaks, 1) << dbg;
  ASSERT_EQ(r.break_reasons.size(), 1u);
  EXPECT_EQ(r.break_reasons[0], "data-dependent op aten::nonzero");
  // nonzero, squeeze, index_select, sum on CPU; sum's 0-dim result lets the tail go back.
  EXPECT_EQ(r.cpu_nodes, 4) << dbg;
  EXPECT_EQ(r.device_segments, 2) << dbg;
  EXPECT_NE(dbg.find("[cpu]    %"), std::string::npos);
  EXPECT_TRUE(r.unsupported_ops.empty());
  auto cpu_only = CompiledGraph::Compile(graph, ProfileWith({}), in);
  ASSERT_TRUE(cpu_only.ok()) << cpu_only.status().ToString();
  EXPECT_TRUE(torch::equal((*cpu_only)->Run(in)[0], MaskedSum(in)[0]));
}

TEST(CompileTest, DynamicShapeReasonNamesTheDataDependentOrigin) {
  // Graph order: relu [dev] | nonzero [cpu] | relu, mul [dev] | to, sum(0) [cpu: dynamic] | relu.
  auto fn = [](const std::vector<at::Tensor>& in) -> std::vector<at::Tensor> {
    at::Tensor a = at::relu(in[0]);
    at::Tensor idx = at::nonzero(a);
    at::Tensor b = at::relu(a) * 2;
    at::Tensor c = idx.to(at::kFloat).sum(0);
    return {c, at::relu(b)};
  };
  torch::manual_seed(2);
  std::vector<at::Tensor> in = {torch::randn({5, 3})};
  auto graph = TraceOrDie(fn, in);
  ASSERT_NE(graph, nullptr);
  auto compiled = CompiledGraph::Compile(
      graph, ProfileWith({"aten::relu", "aten::mul", "aten::to", "aten::sum"}), in);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  const CompileReport& r = (*compiled)->report();
  EXPECT_EQ(r.device_nodes, 4) << (*compiled)->DebugString();
  EXPECT_EQ(r.cpu_nodes, 3);
  ASSERT_EQ(r.graph_breaks, 2);
  EXPECT_EQ(r.break_reasons[0], "data-dependent op aten::nonzero");
  EXPECT_EQ(r.break_reasons[1], "dynamic shape from aten::nonzero");
  EXPECT_EQ(r.unsupported_ops.at("aten::nonzero"), 1);
}

// Lists and tuples in the graph: cat takes a Tensor[], chunk returns one (ListUnpack), view an
// int[]. The jit runs these as interpreter instructions, so the compiler must run them itself.
std::vector<at::Tensor> CatChunk(const std::vector<at::Tensor>& in) {
  at::Tensor s = at::softmax(at::matmul(in[0], in[0].transpose(-1, -2)), -1);
  at::Tensor x = at::cat({at::matmul(s, in[0]), in[0]}, -1);
  auto parts = x.chunk(2, -1);
  return {parts[0] + parts[1], x.view({-1})};
}

const std::set<std::string> kCatChunkOps = {"aten::matmul", "aten::transpose", "aten::softmax",
                                            "aten::cat",    "aten::chunk",     "aten::add",
                                            "aten::view"};

TEST(CompileTest, ListAndTupleNodesRunOnCpuAndStayGlue) {
  torch::manual_seed(3);
  std::vector<at::Tensor> in = {torch::randn({2, 5, 4})};
  auto graph = TraceOrDie(CatChunk, in);
  ASSERT_NE(graph, nullptr);
  auto partitioned = CompiledGraph::Compile(graph, ProfileWith(kCatChunkOps), in);
  ASSERT_TRUE(partitioned.ok()) << partitioned.status().ToString();
  EXPECT_EQ((*partitioned)->report().graph_nodes, 8) << (*partitioned)->DebugString();
  EXPECT_EQ((*partitioned)->report().device_segments, 1);
  // 2 * (2*5*5*4) for each batched matmul.
  EXPECT_NEAR((*partitioned)->report().mflops, 800 / 1e6, 1e-12);
  auto compiled = CompiledGraph::Compile(graph, ProfileWith({}), in);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  auto got = (*compiled)->Run(in);
  auto want = CatChunk(in);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(torch::equal(got[0], want[0]));
  EXPECT_TRUE(torch::equal(got[1], want[1]));
}

TEST(CompileTest, OverBudgetIsDeadlineExceededWithTheReportFilled) {
  auto in = MlpInputs();
  auto graph = TraceOrDie(Mlp, in);
  ASSERT_NE(graph, nullptr);
  ProfileInfo profile = ProfileWith(kMlpOps);
  profile.compiler.cost_ms_per_node = 1e6;
  profile.compiler.budget_ms = 100;
  CompileReport report;
  auto compiled = CompiledGraph::Compile(graph, profile, in, &report);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(report.device_nodes, 4);
  EXPECT_DOUBLE_EQ(report.simulated_compile_ms, 4e6);
  EXPECT_EQ(report.graph_breaks, 1);
  EXPECT_GT(report.wall_compile_ms, 0);
}

TEST(CompileTest, MflopCostCountsTowardsTheBudget) {
  auto in = MlpInputs();
  auto graph = TraceOrDie(Mlp, in);
  ASSERT_NE(graph, nullptr);
  ProfileInfo profile = ProfileWith(kMlpOps);
  profile.compiler.cost_ms_per_node = 0;
  profile.compiler.cost_ms_per_mflop = 1e5;  // 0.001792 MFLOP -> 179.2 ms
  profile.compiler.budget_ms = 179;
  CompileReport report;
  auto compiled = CompiledGraph::Compile(graph, profile, in, &report);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::kDeadlineExceeded);
  profile.compiler.budget_ms = 180;
  EXPECT_TRUE(CompiledGraph::Compile(graph, profile, in).ok());
}

TEST(CompileTest, SegmentOverMaxNodesIsResourceExhausted) {
  auto in = MlpInputs();
  auto graph = TraceOrDie(Mlp, in);
  ASSERT_NE(graph, nullptr);
  std::set<std::string> all = kMlpOps;
  all.insert("aten::cumsum");
  ProfileInfo profile = ProfileWith(all);
  profile.compiler.max_nodes = 2;
  CompileReport report;
  auto compiled = CompiledGraph::Compile(graph, profile, in, &report);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(report.device_segments, 1);
  EXPECT_EQ(report.device_nodes, 5);
  // The split graph's segments (2 nodes each) fit.
  EXPECT_TRUE(CompiledGraph::Compile(graph, ProfileWith(kMlpOps), in).ok());
}

TEST(CompileTest, WrongNumberOfExampleInputsIsInvalidArgument) {
  auto in = MlpInputs();
  auto graph = TraceOrDie(Mlp, in);
  ASSERT_NE(graph, nullptr);
  in.pop_back();
  auto compiled = CompiledGraph::Compile(graph, ProfileWith(kMlpOps), in);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::kInvalidArgument);
}

// ---- On the simulated device ----

int64_t Calls(const std::map<std::string, simdevice::OpStats>& m, const std::string& prefix) {
  int64_t n = 0;
  for (const auto& [op, stats] : m) {
    if (op.rfind(prefix, 0) == 0) n += stats.calls;
  }
  return n;
}

TEST(CompiledDeviceTest, DeviceSegmentsMatchEagerAndAreLoweredNotFallenBack) {
  auto in = MlpInputs();
  auto graph = TraceOrDie(Mlp, in);
  ASSERT_NE(graph, nullptr);
  auto compiled = CompiledGraph::Compile(graph, ProfileWith(kMlpOps), in);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  simdevice::ResetCounters();
  auto got = (*compiled)->Run(in);
  simdevice::Counters counters = simdevice::SnapshotCounters();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].device().is_cpu());
  EXPECT_TRUE(torch::allclose(got[0], Mlp(in)[0], /*rtol=*/2e-2, /*atol=*/2e-2));
  EXPECT_TRUE(counters.fallback.empty()) << counters.fallback.begin()->first;
  EXPECT_GT(Calls(counters.compiled, "aten::gelu"), 0);
  EXPECT_GT(Calls(counters.compiled, "aten::_softmax"), 0);
  EXPECT_GT(Calls(counters.compiled, "aten::addmm") + Calls(counters.compiled, "aten::mm") +
                Calls(counters.compiled, "aten::linear"),
            0);
  EXPECT_EQ(Calls(counters.compiled, "aten::cumsum"), 0);  // CPU segment never reached it
}

TEST(CompiledDeviceTest, ListsCrossIntoTheDeviceSegment) {
  torch::manual_seed(3);
  std::vector<at::Tensor> in = {torch::randn({2, 5, 4})};
  auto graph = TraceOrDie(CatChunk, in);
  ASSERT_NE(graph, nullptr);
  std::set<std::string> ops = kCatChunkOps;
  ops.erase("aten::softmax");  // a break between the two matmuls
  auto compiled = CompiledGraph::Compile(graph, ProfileWith(ops), in);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_EQ((*compiled)->report().graph_breaks, 1) << (*compiled)->DebugString();
  simdevice::ResetCounters();
  auto got = (*compiled)->Run(in);
  simdevice::Counters counters = simdevice::SnapshotCounters();
  auto want = CatChunk(in);
  EXPECT_TRUE(torch::allclose(got[0], want[0], /*rtol=*/2e-2, /*atol=*/2e-2));
  EXPECT_TRUE(torch::allclose(got[1], want[1], /*rtol=*/2e-2, /*atol=*/2e-2));
  EXPECT_GT(Calls(counters.compiled, "aten::cat"), 0);
  EXPECT_EQ(Calls(counters.compiled, "aten::_softmax"), 0);
  EXPECT_TRUE(counters.fallback.empty());
}

TEST(CompiledDeviceTest, DataDependentBreakRunsAcrossDeviceAndCpuSegments) {
  torch::manual_seed(1);
  std::vector<at::Tensor> in = {torch::randn({4, 8}), torch::randn({8, 8}), torch::randn({3, 8})};
  auto graph = TraceOrDie(MaskedSum, in);
  ASSERT_NE(graph, nullptr);
  ProfileInfo profile = ProfileWith({"aten::linear", "aten::flatten", "aten::gt", "aten::squeeze",
                                     "aten::index_select", "aten::sum", "aten::mul"});
  auto compiled = CompiledGraph::Compile(graph, profile, in);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  ASSERT_EQ((*compiled)->report().device_segments, 2);
  simdevice::ResetCounters();
  auto got = (*compiled)->Run(in);
  simdevice::Counters counters = simdevice::SnapshotCounters();
  EXPECT_TRUE(torch::allclose(got[0], MaskedSum(in)[0], /*rtol=*/2e-2, /*atol=*/2e-2));
  EXPECT_EQ(Calls(counters.compiled, "aten::nonzero"), 0);
  EXPECT_TRUE(counters.fallback.empty());
}

TEST(CompiledDeviceTest, DeviceConstantOfTracedFactoryIsRewrittenToTheDevice) {
  auto fn = [](const std::vector<at::Tensor>& in) -> std::vector<at::Tensor> {
    at::Tensor r = at::arange(in[0].size(0), in[0].options());
    return {in[0] * 2 + r + at::zeros({6})};  // zeros: device= omitted (None) in the trace
  };
  std::vector<at::Tensor> in = {torch::randn({6})};
  auto graph = TraceOrDie(fn, in);
  ASSERT_NE(graph, nullptr);
  auto compiled = CompiledGraph::Compile(
      graph, ProfileWith({"aten::arange", "aten::mul", "aten::add", "aten::zeros"}), in);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_EQ((*compiled)->report().cpu_nodes, 0) << (*compiled)->DebugString();
  EXPECT_EQ((*compiled)->report().device_segments, 1);
  simdevice::ResetCounters();
  auto got = (*compiled)->Run(in);
  simdevice::Counters counters = simdevice::SnapshotCounters();
  EXPECT_TRUE(torch::allclose(got[0], fn(in)[0]));
  EXPECT_GT(Calls(counters.compiled, "aten::arange"), 0);
  EXPECT_GT(Calls(counters.compiled, "aten::zero_"), 0);
  EXPECT_EQ((*compiled)->TransfersToDevice(), 1);  // only the input; the factories start there
  EXPECT_TRUE(counters.fallback.empty());
}

}  // namespace
}  // namespace ts::engine
