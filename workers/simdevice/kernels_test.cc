// Every device kernel checked against ATen's CPU result with a tolerance per op (ggml
// test-backend-ops style), with its native counter asserted and no fallback; and the declared
// numerics: bf16 rounding of matmul operands, and of results per op class in eager only.
#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "workers/simdevice/internal/device_test_util.h"
#include "workers/simdevice/internal/kernel_set.h"
#include "workers/simdevice/op_numerics.h"
#include "workers/simdevice/runtime.h"

namespace ts::simdevice {
namespace {

using Tensors = std::vector<at::Tensor>;

// The baseline (bf16_in_fp32_acc matmul, fp32 elsewhere) with every kernel native.
nlohmann::json AllNativeProfile() {
  auto j = BaselineNoDefects();
  j["native_ops"] = nlohmann::json::array();
  for (const auto& k : internal::KernelSet()) {
    j["native_ops"].push_back(std::string("aten::") + k.name);
  }
  return j;
}

struct KernelCase {
  std::string op;  // the kernel under test, as counted: "aten::add_.Tensor"
  std::function<Tensors(const Tensors&)> fn;
  Tensors inputs;  // CPU tensors; the device run gets copies on the device
  std::vector<size_t> bf16_inputs;  // inputs the device rounds to bf16 (matmul numerics)
};

// An op with one result.
KernelCase One(std::string op, std::function<at::Tensor(const Tensors&)> f, Tensors inputs,
               std::vector<size_t> bf16_inputs = {}) {
  return {std::move(op), [f](const Tensors& v) { return Tensors{f(v)}; }, std::move(inputs),
          std::move(bf16_inputs)};
}

// An op with several results.
KernelCase Many(std::string op, std::function<Tensors(const Tensors&)> f, Tensors inputs,
                std::vector<size_t> bf16_inputs = {}) {
  return {std::move(op), std::move(f), std::move(inputs), std::move(bf16_inputs)};
}

// An in-place op applied to a copy of the first input; the copy is the result.
KernelCase InPlace(std::string op, std::function<void(at::Tensor&, const Tensors&)> f,
                   Tensors inputs) {
  auto run = [f](const Tensors& v) {
    at::Tensor t = v[0].clone();
    f(t, v);
    return t;
  };
  return One(std::move(op), run, std::move(inputs));
}

using UnaryFn = at::Tensor (*)(const at::Tensor&);
KernelCase Unary(std::string op, UnaryFn f, at::Tensor x) {
  return One(std::move(op), [f](const Tensors& v) { return f(v[0]); }, {std::move(x)});
}

std::vector<KernelCase> MatmulCases() {
  auto a = at::randn({4, 8}), b = at::randn({8, 6}), c = at::randn({4, 6});
  auto ba = at::randn({2, 4, 8}), bb = at::randn({2, 8, 5}), bc = at::randn({2, 4, 5});
  auto x = at::randn({1, 3, 8, 8}), w = at::randn({4, 3, 3, 3}), bias = at::randn({4});
  auto gy = at::randn({1, 4, 8, 8});
  auto conv = [](const Tensors& v) {
    return at::convolution(v[0], v[1], v[2], {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1);
  };
  auto conv_backward = [](const Tensors& v) {
    const int64_t bias_size = 4;
    auto [gx, gw, gb] = at::convolution_backward(
        v[0], v[1], v[2], at::OptionalIntArrayRef(at::IntArrayRef(&bias_size, 1)), {1, 1},
        {1, 1}, {1, 1}, false, {0, 0}, 1, {true, true, true});
    return Tensors{gx, gw, gb};
  };
  return {
      One("aten::mm", [](const Tensors& v) { return at::mm(v[0], v[1]); }, {a, b},
          {0, 1}),
      One("aten::bmm", [](const Tensors& v) { return at::bmm(v[0], v[1]); }, {ba, bb},
          {0, 1}),
      One("aten::addmm", [](const Tensors& v) { return at::addmm(v[0], v[1], v[2]); }, {c, a, b}, {1, 2}),
      One("aten::baddbmm", [](const Tensors& v) { return at::baddbmm(v[0], v[1], v[2]); },
          {bc, ba, bb}, {1, 2}),
      One("aten::convolution", conv, {x, w, bias}, {0, 1}),
      Many("aten::convolution_backward", conv_backward, {gy, x, w}, {0, 1, 2}),
  };
}

std::vector<KernelCase> BinaryCases() {
  auto a = at::randn({4, 8}), b = at::randn({4, 8});
  auto den = at::rand({4, 8}) + 0.5;
  using V = const Tensors&;
  return {
      One("aten::add.Tensor", [](V v) { return at::add(v[0], v[1]); }, {a, b}),
      InPlace("aten::add_.Tensor", [](at::Tensor& t, V v) { t.add_(v[1]); }, {a, b}),
      One("aten::sub.Tensor", [](V v) { return at::sub(v[0], v[1]); }, {a, b}),
      InPlace("aten::sub_.Tensor", [](at::Tensor& t, V v) { t.sub_(v[1]); }, {a, b}),
      One("aten::mul.Tensor", [](V v) { return at::mul(v[0], v[1]); }, {a, b}),
      InPlace("aten::mul_.Tensor", [](at::Tensor& t, V v) { t.mul_(v[1]); }, {a, b}),
      One("aten::div.Tensor", [](V v) { return at::div(v[0], v[1]); }, {a, den}),
      InPlace("aten::div_.Tensor", [](at::Tensor& t, V v) { t.div_(v[1]); }, {a, den}),
      One("aten::maximum", [](V v) { return at::maximum(v[0], v[1]); }, {a, b}),
      One("aten::minimum", [](V v) { return at::minimum(v[0], v[1]); }, {a, b}),
  };
}

std::vector<KernelCase> UnaryCases() {
  auto a = at::randn({4, 8});
  auto pos = at::rand({4, 8}) + 0.1;
  using V = const Tensors&;
  return {
      Unary("aten::neg", at::neg, a),
      Unary("aten::exp", at::exp, a),
      Unary("aten::log", at::log, pos),
      Unary("aten::sqrt", at::sqrt, pos),
      Unary("aten::rsqrt", at::rsqrt, pos),
      Unary("aten::sin", at::sin, a),
      Unary("aten::cos", at::cos, a),
      Unary("aten::erf", at::erf, a),
      Unary("aten::tanh", at::tanh, a),
      Unary("aten::sigmoid", at::sigmoid, a),
      Unary("aten::silu", at::silu, a),
      Unary("aten::relu", at::relu, a),
      One("aten::gelu", [](V v) { return at::gelu(v[0], "tanh"); }, {a}),
      One("aten::pow.Tensor_Scalar", [](V v) { return at::pow(v[0], 3); }, {a}),
      One("aten::clamp", [](V v) { return at::clamp(v[0], -0.5, 0.5); }, {a}),
  };
}

std::vector<KernelCase> BackwardPointwiseCases() {
  auto g = at::randn({4, 8}), a = at::randn({4, 8});
  using V = const Tensors&;
  return {
      One("aten::tanh_backward", [](V v) { return at::tanh_backward(v[0], v[1]); },
          {g, at::tanh(a)}),
      One("aten::sigmoid_backward", [](V v) { return at::sigmoid_backward(v[0], v[1]); },
          {g, at::sigmoid(a)}),
      One("aten::gelu_backward", [](V v) { return at::gelu_backward(v[0], v[1], "none"); },
          {g, a}),
      One("aten::silu_backward", [](V v) { return at::silu_backward(v[0], v[1]); }, {g, a}),
      One("aten::threshold_backward", [](V v) { return at::threshold_backward(v[0], v[1], 0); },
          {g, a}),
  };
}

std::vector<KernelCase> SelectionCases() {
  auto a = at::randn({4, 8}), b = at::randn({4, 8});
  auto mask = at::rand({4, 8}) > 0.5;
  auto small = at::randint(0, 3, {4, 8}).to(at::kFloat);  // exact 1.0 values for eq/ne
  auto emb = at::randn({10, 6});
  auto ids = at::randint(0, 10, {3, 4}, at::kLong);
  auto rows = at::tensor({3, 1, 3}, at::kLong);
  auto cols = at::randint(0, 8, {4, 3}, at::kLong);
  using V = const Tensors&;
  return {
      One("aten::where.self", [](V v) { return at::where(v[0], v[1], v[2]); }, {mask, a, b}),
      One("aten::masked_fill.Scalar", [](V v) { return v[0].masked_fill(v[1], -1e4); },
          {a, mask}),
      InPlace("aten::masked_fill_.Scalar", [](at::Tensor& t, V v) { t.masked_fill_(v[1], -1e4); },
              {a, mask}),
      One("aten::eq.Scalar", [](V v) { return at::eq(v[0], 1); }, {small}),
      One("aten::ne.Scalar", [](V v) { return at::ne(v[0], 1); }, {small}),
      One("aten::embedding", [](V v) { return at::embedding(v[0], v[1]); }, {emb, ids}),
      One("aten::index_select", [](V v) { return at::index_select(v[0], 0, v[1]); },
          {emb, rows}),
      One("aten::gather", [](V v) { return at::gather(v[0], 1, v[1]); }, {a, cols}),
      One("aten::cat", [](V v) { return at::cat({v[0], v[1]}, 0); }, {a, at::randn({2, 8})}),
  };
}

std::vector<KernelCase> ReductionCases() {
  auto a = at::randn({4, 8}), g = at::randn({4, 8});
  auto grad_rows = at::randn({3, 4, 6});
  auto ids = at::randint(0, 10, {3, 4}, at::kLong);
  using V = const Tensors&;
  return {
      One("aten::sum", [](V v) { return at::sum(v[0]); }, {a}),
      One("aten::sum.dim_IntList", [](V v) { return v[0].sum(1); }, {a}),
      One("aten::mean.dim", [](V v) { return v[0].mean(1, true); }, {a}),
      One("aten::amax", [](V v) { return at::amax(v[0], 1); }, {a}),
      One("aten::cumsum", [](V v) { return at::cumsum(v[0], 1); }, {a}),
      One("aten::embedding_dense_backward",
          [](V v) { return at::embedding_dense_backward(v[0], v[1], 10, -1, false); },
          {grad_rows, ids}),
      One("aten::_softmax", [](V v) { return at::_softmax(v[0], 1, false); }, {a}),
      One("aten::_softmax_backward_data",
          [](V v) { return at::_softmax_backward_data(v[0], v[1], 1, at::kFloat); },
          {g, at::softmax(a, 1)}),
      One("aten::_log_softmax", [](V v) { return at::_log_softmax(v[0], 1, false); }, {a}),
      One("aten::_log_softmax_backward_data",
          [](V v) { return at::_log_softmax_backward_data(v[0], v[1], 1, at::kFloat); },
          {g, at::log_softmax(a, 1)}),
  };
}

std::vector<KernelCase> NormAndLossCases() {
  auto a = at::randn({4, 8}), g = at::randn({4, 8});
  auto w = at::randn({8}), b = at::randn({8});
  auto [out, mean, rstd] = at::native_layer_norm(a, {8}, w, b, 1e-5);
  auto logp = at::log_softmax(at::randn({4, 5}), 1);
  auto target = at::randint(0, 5, {4}, at::kLong);
  auto [loss, total_weight] = at::nll_loss_forward(logp, target, {}, at::Reduction::Mean, -100);
  auto layer_norm = [](const Tensors& v) {
    auto [y, m, r] = at::native_layer_norm(v[0], {8}, v[1], v[2], 1e-5);
    return Tensors{y, m, r};
  };
  auto layer_norm_backward = [](const Tensors& v) {
    auto [gx, gw, gb] = at::native_layer_norm_backward(v[0], v[1], {8}, v[2], v[3], v[4], v[5],
                                                       {true, true, true});
    return Tensors{gx, gw, gb};
  };
  auto nll_forward = [](const Tensors& v) {
    auto [l, tw] = at::nll_loss_forward(v[0], v[1], {}, at::Reduction::Mean, -100);
    return Tensors{l, tw};
  };
  auto nll_backward = [](const Tensors& v) {
    return at::nll_loss_backward(v[0], v[1], v[2], {}, at::Reduction::Mean, -100, v[3]);
  };
  return {
      Many("aten::native_layer_norm", layer_norm, {a, w, b}),
      Many("aten::native_layer_norm_backward", layer_norm_backward, {g, a, mean, rstd, w, b}),
      Many("aten::nll_loss_forward", nll_forward, {logp, target}),
      One("aten::nll_loss_backward", nll_backward, {at::ones({}), logp, target, total_weight}),
  };
}

std::vector<KernelCase> AllCases() {
  std::vector<KernelCase> all;
  for (auto cases : {MatmulCases(), BinaryCases(), UnaryCases(), BackwardPointwiseCases(),
                     SelectionCases(), ReductionCases(), NormAndLossCases()}) {
    for (auto& c : cases) all.push_back(std::move(c));
  }
  return all;
}

// Checks one result against its CPU reference: same shape and dtype, values within the kernel
// table's tolerance (the one the engine's op-by-op replay uses).
void ExpectMatches(const at::Tensor& got, const at::Tensor& want, const KernelCase& c, size_t i) {
  const std::string where = c.op + " result " + std::to_string(i);
  ASSERT_EQ(got.device(), SimDevice()) << where;
  ASSERT_EQ(got.sizes(), want.sizes()) << where;
  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << where;
  const at::Tensor host = Cpu(got);
  if (!at::isFloatingType(want.scalar_type())) {
    EXPECT_TRUE(at::equal(host, want)) << where;
    return;
  }
  const double tol = KernelTolerance(c.op);
  EXPECT_TRUE(at::allclose(host, want, tol, tol))
      << where << " max err " << (host - want).abs().max().item<double>();
}

class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ActivateJson(AllNativeProfile());
    ResetCounters();
    at::manual_seed(7);
  }
};

TEST_F(KernelTest, EveryKernelMatchesCpuWithinPerOpTolerance) {
  for (const KernelCase& c : AllCases()) {
    Tensors dev_in, ref_in;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      dev_in.push_back(Dev(c.inputs[i]));
      const bool rounded = std::count(c.bf16_inputs.begin(), c.bf16_inputs.end(), i) > 0;
      ref_in.push_back(rounded ? RoundBf16(c.inputs[i]) : c.inputs[i]);
    }
    const Tensors want = c.fn(ref_in);
    ResetCounters();
    const Tensors got = c.fn(dev_in);
    ASSERT_EQ(got.size(), want.size()) << c.op;
    for (size_t i = 0; i < got.size(); ++i) ExpectMatches(got[i], want[i], c, i);
    Counters counters = SnapshotCounters();
    EXPECT_EQ(counters.native[c.op].calls, 1) << c.op;
    EXPECT_TRUE(counters.fallback.empty())
        << c.op << " fell back: " << counters.fallback.begin()->first;
    EXPECT_TRUE(counters.compiled.empty()) << c.op;
  }
}

TEST_F(KernelTest, EveryKernelOfTheSetHasACase) {
  std::set<std::string> tested;
  for (const KernelCase& c : AllCases()) tested.insert(c.op);
  for (const auto& k : internal::KernelSet()) {
    EXPECT_EQ(tested.count(std::string("aten::") + k.name), 1u) << k.name << " is untested";
  }
  EXPECT_EQ(tested.size(), internal::KernelSet().size());
}

TEST_F(KernelTest, MatmulRoundsInputsToBf16AndAccumulatesInFp32) {
  auto a = at::randn({16, 64}), b = at::randn({64, 16});
  auto got = Cpu(at::mm(Dev(a), Dev(b)));
  auto emulated = at::mm(RoundBf16(a), RoundBf16(b));
  EXPECT_TRUE(at::allclose(got, emulated, 1e-6, 1e-6));
  EXPECT_FALSE(at::allclose(got, at::mm(a, b), 1e-6, 1e-6)) << "bf16 rounding had no effect";
  EXPECT_FALSE(at::equal(got, RoundBf16(got))) << "the result must stay fp32";
  // An fp32-matmul profile computes exactly.
  auto j = AllNativeProfile();
  j["numerics"]["matmul"] = "fp32";
  ActivateJson(j);
  EXPECT_TRUE(at::allclose(Cpu(at::mm(Dev(a), Dev(b))), at::mm(a, b), 1e-6, 1e-6));
}

// bf16 result numerics round each eager float result of the op's class, and are fused away in
// compiled segments.
TEST_F(KernelTest, ResultRoundingFollowsOpClassInEagerOnly) {
  auto a = at::randn({8, 32}), b = at::randn({32, 8});
  auto run = [&](const std::string& matmul, const std::string& reductions,
                 const std::string& elementwise, ExecMode mode) {
    auto j = AllNativeProfile();
    j["numerics"] = {{"matmul", matmul}, {"reductions", reductions}, {"elementwise", elementwise}};
    ActivateJson(j);
    ScopedExecMode scope(mode);
    return Tensors{Cpu(at::mm(Dev(a), Dev(b))), Cpu(Dev(a).sum(1)), Cpu(at::gelu(Dev(a))),
                   Cpu(at::eq(Dev(a), 0))};
  };
  // Results 0..3: a matmul, a reduction, an elementwise op, and a non-float elementwise op.
  const Tensors exact = {at::mm(RoundBf16(a), RoundBf16(b)), a.sum(1), at::gelu(a), at::eq(a, 0)};
  auto expect = [&](const Tensors& got, const std::vector<bool>& rounded) {
    for (size_t i = 0; i < got.size(); ++i) {
      const at::Tensor want = rounded[i] ? RoundBf16(exact[i]) : exact[i];
      EXPECT_TRUE(at::equal(got[i], want))
          << "result " << i << (rounded[i] ? " not" : "") << " rounded as expected";
    }
  };
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_FALSE(at::equal(exact[i], RoundBf16(exact[i]))) << "rounding invisible in result " << i;
  }
  // One class at a time: only that class's float results are rounded.
  expect(run("bf16", "fp32", "fp32", ExecMode::kEager), {true, false, false, false});
  expect(run("bf16_in_fp32_acc", "bf16", "fp32", ExecMode::kEager), {false, true, false, false});
  expect(run("bf16_in_fp32_acc", "fp32", "bf16", ExecMode::kEager), {false, false, true, false});
  // Compiled: results are not rounded after the op (matmul operands still are).
  expect(run("bf16", "bf16", "bf16", ExecMode::kCompiled), {false, false, false, false});
}

}  // namespace
}  // namespace ts::simdevice
