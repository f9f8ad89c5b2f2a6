// The cost model's formulas, checked against figures worked out by hand from the profile's
// numbers (README.md, "Cost model").
#include "workers/simdevice/internal/cost_model.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace ts::simdevice::internal {
namespace {

// Round numbers, so that the expected figures below can be checked with pencil and paper.
PerformanceSpec HandSpec() {
  PerformanceSpec s;
  s.matrix_tflops = {{"bfloat16", 400}, {"float32", 100}};
  s.vector_tflops = {{"float32", 10}};
  s.hbm_gbps = 2000;
  s.efficiency = 0.5;
  s.launch_us = 4;
  s.host_link_gbps = 50;
  s.host_link_latency_us = 10;
  s.host_gflops = 20;
  s.host_gbps = 10;
  s.graph_break_us = 30;
  return s;
}

TEST(CostModelTest, PeaksByEngineAndDtypeWithTheLowestForUnlistedDtypes) {
  CostModel m(HandSpec(), MatmulNumerics::kBf16InFp32Acc);
  EXPECT_DOUBLE_EQ(m.Peak(Engine::kMatrix, at::kBFloat16), 400e12);
  EXPECT_DOUBLE_EQ(m.Peak(Engine::kMatrix, at::kFloat), 100e12);
  EXPECT_DOUBLE_EQ(m.Peak(Engine::kMatrix, at::kHalf), 100e12) << "unlisted: the lowest";
  EXPECT_DOUBLE_EQ(m.Peak(Engine::kVector, at::kLong), 10e12);
  EXPECT_DOUBLE_EQ(m.peak_flops(), 400e12) << "MFU is relative to the highest peak";
  // bf16 matmul numerics round fp32 operands to bf16: the matrix engine runs at its bf16 peak.
  EXPECT_EQ(m.MatrixDtype(at::kFloat), at::kBFloat16);
  EXPECT_EQ(CostModel(HandSpec(), MatmulNumerics::kFp32).MatrixDtype(at::kFloat), at::kFloat);
}

TEST(CostModelTest, ComputeBoundMatmulIsTwoMnkOverEfficiencyTimesPeak) {
  CostModel m(HandSpec(), MatmulNumerics::kBf16InFp32Acc);
  // [M,K] x [K,N] with M = N = K = 4096: 2MNK = 137,438,953,472 FLOPs at 0.5 x 400 TFLOP/s is
  // 687.19 us; its 3 x 64 MiB of fp32 operands at 2 TB/s take 100.66 us: compute-bound.
  const double flops = 2.0 * 4096 * 4096 * 4096;
  const double bytes = 3.0 * 4096 * 4096 * 4;
  EXPECT_NEAR(m.RooflineUs(flops, m.Peak(Engine::kMatrix, at::kBFloat16), 0.5, bytes), 687.194767,
              1e-5);
}

TEST(CostModelTest, ElementwiseAddIsBytesOverBandwidth) {
  CostModel m(HandSpec(), MatmulNumerics::kFp32);
  // a + b over 1M fp32 elements: 12 MB read and written at 2 TB/s = 6 us; its 1M FLOPs at
  // 0.5 x 10 TFLOP/s are 0.2 us: memory-bound.
  EXPECT_DOUBLE_EQ(m.RooflineUs(1e6, m.Peak(Engine::kVector, at::kFloat), 0.5, 12e6), 6.0);
}

TEST(CostModelTest, TransfersHostComputeAndSegments) {
  CostModel m(HandSpec(), MatmulNumerics::kFp32);
  EXPECT_DOUBLE_EQ(m.TransferUs(5e6), 10 + 100);  // latency + 5 MB at 50 GB/s
  EXPECT_DOUBLE_EQ(m.HostUs(2e6, 1e5), 100);      // 2 MFLOP at 20 GFLOP/s
  EXPECT_DOUBLE_EQ(m.HostUs(2e3, 1e6), 100);      // 1 MB at 10 GB/s
  // A segment: one launch plus the larger of its ops' compute and its boundary traffic.
  EXPECT_DOUBLE_EQ(m.SegmentUs(1.0, 8e6), 4 + 4);
  EXPECT_DOUBLE_EQ(m.SegmentUs(9.0, 8e6), 4 + 9);
  EXPECT_DOUBLE_EQ(m.SegmentOverheadUs(9.0, 8e6), 4);
  EXPECT_DOUBLE_EQ(m.SegmentOverheadUs(1.0, 8e6), 4 + 3);
}

TEST(CostModelTest, CostClassesByOpFamily) {
  EXPECT_EQ(CostClassOf("aten::mm").engine, Engine::kMatrix);
  EXPECT_EQ(CostClassOf("aten::addmm").k_arg, 1);
  EXPECT_EQ(CostClassOf("aten::convolution").work, Work::kConv);
  EXPECT_TRUE(CostClassOf("aten::conv_transpose2d.input").transposed);
  EXPECT_EQ(CostClassOf("aten::add.Tensor").engine, Engine::kVector);
  EXPECT_EQ(CostClassOf("aten::add.Tensor").flops_per_elem, 1);
  EXPECT_EQ(CostClassOf("aten::_softmax").flops_per_elem, 5);
  EXPECT_EQ(CostClassOf("aten::native_layer_norm").flops_per_elem, 8);
  EXPECT_EQ(CostClassOf("aten::embedding").work, Work::kGather);
  EXPECT_EQ(CostClassOf("aten::cat").flops_per_elem, 0);
  EXPECT_EQ(CostClassOf("myns::custom").engine, Engine::kVector);  // unknown: vector, 1 FLOP
}

// Runs ShapesBefore on `args`, then ShapesAfter on `rets`, and returns the op's work.
OpWork WorkFromStacks(const std::string& op, torch::jit::Stack args, torch::jit::Stack rets,
                      OpShapes* shapes_out = nullptr) {
  const OpCostClass c = CostClassOf(op);
  OpShapes s;
  ShapesBefore(c, args, args.size(), &s);
  ShapesAfter(c, rets, rets.size(), &s);
  if (shapes_out != nullptr) *shapes_out = s;
  return WorkOf(c, s);
}

TEST(CostModelTest, WorkFromShapes) {
  auto a = at::zeros({8, 16}), b = at::zeros({16, 32}), out = at::zeros({8, 32});
  OpWork mm = WorkFromStacks("aten::mm", {a, b}, {out});
  EXPECT_DOUBLE_EQ(mm.flops, 2.0 * 8 * 32 * 16);
  EXPECT_DOUBLE_EQ(mm.bytes, (8 * 16 + 16 * 32 + 8 * 32) * 4.0);
  // addmm(bias, mat1, mat2): K is mat1's last dim.
  OpWork addmm = WorkFromStacks("aten::addmm", {at::zeros({32}), a, b, 1, 1}, {out});
  EXPECT_DOUBLE_EQ(addmm.flops, 2.0 * 8 * 32 * 16);
  // bmm [4,8,16] x [4,16,32].
  OpWork bmm = WorkFromStacks("aten::bmm", {at::zeros({4, 8, 16}), at::zeros({4, 16, 32})},
                              {at::zeros({4, 8, 32})});
  EXPECT_DOUBLE_EQ(bmm.flops, 2.0 * 4 * 8 * 32 * 16);
  // A 3x3 convolution, 3 -> 8 channels, on [1,3,10,10] -> [1,8,8,8]: each output 27 MACs.
  torch::jit::Stack conv_args = {at::zeros({1, 3, 10, 10}),
                                 at::zeros({8, 3, 3, 3}),
                                 c10::IValue(),
                                 std::vector<int64_t>{1, 1},
                                 std::vector<int64_t>{0, 0},
                                 std::vector<int64_t>{1, 1},
                                 false,
                                 std::vector<int64_t>{0, 0},
                                 1};
  OpWork conv = WorkFromStacks("aten::convolution", conv_args, {at::zeros({1, 8, 8, 8})});
  EXPECT_DOUBLE_EQ(conv.flops, 2.0 * 512 * 27);
  // Its backward, both gradients: twice the forward; grad_input only: once.
  torch::jit::Stack bw_args = {at::zeros({1, 8, 8, 8}), at::zeros({1, 3, 10, 10}),
                               at::zeros({8, 3, 3, 3})};
  for (int i = 0; i < 4; ++i) bw_args.emplace_back(std::vector<int64_t>{1, 1});
  bw_args.emplace_back(false);
  EXPECT_DOUBLE_EQ(
      WorkFromStacks("aten::convolution_backward", bw_args,
                     {at::zeros({1, 3, 10, 10}), at::zeros({8, 3, 3, 3}), at::Tensor()})
          .flops,
      2 * 2.0 * 512 * 27);
  EXPECT_DOUBLE_EQ(WorkFromStacks("aten::convolution_backward", bw_args,
                                  {at::zeros({1, 3, 10, 10}), at::Tensor(), at::Tensor()})
                       .flops,
                   2.0 * 512 * 27);
  // Elementwise: FLOPs per element of the largest tensor; bytes of every operand and result.
  auto x = at::zeros({4, 100});
  OpWork add = WorkFromStacks("aten::add.Tensor", {x, x, 1}, {x});
  EXPECT_DOUBLE_EQ(add.flops, 400);
  EXPECT_DOUBLE_EQ(add.bytes, 3 * 1600);
  EXPECT_DOUBLE_EQ(WorkFromStacks("aten::gelu", {x, "none"}, {x}).flops, 8 * 400);
  // cat reads a list: both tensors count.
  OpWork cat =
      WorkFromStacks("aten::cat", {std::vector<at::Tensor>{x, x}, 0}, {at::zeros({8, 100})});
  EXPECT_DOUBLE_EQ(cat.bytes, 4 * 1600);
  EXPECT_DOUBLE_EQ(cat.flops, 0);
  // A gather reads only the rows it returns, not its whole table.
  auto table = at::zeros({1000, 64});
  auto idx = at::zeros({2, 5}, at::kLong);
  OpWork emb =
      WorkFromStacks("aten::embedding", {table, idx, -1, false, false}, {at::zeros({2, 5, 64})});
  EXPECT_DOUBLE_EQ(emb.bytes, 10 * 8 + 2 * (10 * 64 * 4));
}

}  // namespace
}  // namespace ts::simdevice::internal
