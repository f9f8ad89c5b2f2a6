#include "workers/zoo/nn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace ts::zoo::nn {
namespace {

double MaxRel(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

TEST(NnTest, EmulationIsOffByDefaultAndScopesNest) {
  EXPECT_FALSE(Bf16MatmulEmulationActive());
  {
    ScopedBf16MatmulEmulation outer;
    EXPECT_TRUE(Bf16MatmulEmulationActive());
    {
      ScopedBf16MatmulEmulation inner;
      EXPECT_TRUE(Bf16MatmulEmulationActive());
    }
    EXPECT_TRUE(Bf16MatmulEmulationActive());
  }
  EXPECT_FALSE(Bf16MatmulEmulationActive());
}

// Bit for bit, not within a tolerance: the device runs a biased linear as one addmm (the bias
// accumulated into the product by BLAS), and a BLAS may add it at a different point of a K-blocked
// product than a separate `+ b` (OpenBLAS's generic Prescott kernels, used on CPUs it does not
// know, do for K = 256 and 768), so an emulation that added the bias after the product passed on
// one machine and made honest training steps differ from their emulation on another.
TEST(NnTest, EmulatedLinearEqualsLinearOfBf16RoundedOperandsWithExactBias) {
  at::manual_seed(0);
  for (int64_t k : {32, 256, 768}) {
    at::Tensor x = at::randn({2, 32, k});
    at::Tensor w = at::randn({64, k});
    at::Tensor b = (at::randn({64}) * 1.001).requires_grad_(true);
    at::Tensor plain = Linear(x, w, b);
    at::Tensor emulated;
    {
      ScopedBf16MatmulEmulation emu;
      emulated = Linear(x, w, b);
    }
    at::Tensor expected = at::linear(RoundToBf16(x), RoundToBf16(w), b.detach());
    EXPECT_TRUE(at::equal(emulated, expected)) << "K=" << k;
    const double rel = MaxRel(emulated, plain);
    EXPECT_GT(rel, 1e-4) << "K=" << k;
    EXPECT_LT(rel, 2e-2) << "K=" << k;
    // The bias's gradient is the incoming gradient summed, not rounded to bf16.
    at::Tensor g = at::randn({2, 32, 64}) * 1.0001;
    emulated.backward(g);
    EXPECT_TRUE(at::equal(b.grad(), g.sum(at::IntArrayRef{0, 1}))) << "K=" << k;
  }
}

TEST(NnTest, EmulationRoundsIncomingGradientButNotOperandGradients) {
  at::manual_seed(1);
  at::Tensor x = at::randn({3, 8}).requires_grad_(true);
  at::Tensor w = at::randn({5, 8});
  at::Tensor g = at::randn({3, 5}) * 1.0001;
  {
    ScopedBf16MatmulEmulation emu;
    Linear(x, w).backward(g);
  }
  at::Tensor expected = at::matmul(RoundToBf16(g), RoundToBf16(w));
  EXPECT_TRUE(at::allclose(x.grad(), expected, 0, 1e-6));
  // Not rounded again: the fp32 product is generally not a bf16 value.
  EXPECT_FALSE(at::equal(x.grad(), RoundToBf16(x.grad())));
}

TEST(NnTest, EmulationWorksInFloat64) {
  at::Tensor a = at::randn({2, 4, 8}, at::kDouble);
  at::Tensor b = at::randn({2, 8, 4}, at::kDouble);
  ScopedBf16MatmulEmulation emu;
  at::Tensor out = Matmul(a, b);
  EXPECT_EQ(out.scalar_type(), at::kDouble);
  EXPECT_TRUE(at::allclose(out, at::matmul(RoundToBf16(a), RoundToBf16(b))));
}

TEST(NnTest, ActivationsFollowHfDefinitions) {
  at::Tensor x = at::linspace(-3, 3, 13, at::kDouble);
  EXPECT_TRUE(
      at::allclose(Activate(x, Activation::kGeluErf), 0.5 * x * (1 + at::erf(x / std::sqrt(2.0)))));
  at::Tensor tanh_ref =
      0.5 * x * (1 + at::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x.pow(3))));
  EXPECT_TRUE(at::allclose(Activate(x, Activation::kGeluTanh), tanh_ref));
  EXPECT_FALSE(
      at::allclose(Activate(x, Activation::kGeluTanh), Activate(x, Activation::kGeluErf), 0, 1e-6));
  EXPECT_TRUE(at::allclose(Activate(x, Activation::kSilu), x * at::sigmoid(x)));
  EXPECT_TRUE(at::allclose(Activate(x, Activation::kQuickGelu), x * at::sigmoid(1.702 * x)));
  EXPECT_TRUE(at::allclose(Activate(x, Activation::kRelu), x.clamp_min(0)));
}

TEST(NnTest, RmsNormMatchesFormula) {
  at::Tensor x = at::randn({2, 3, 8}, at::kDouble);
  at::Tensor w = at::randn({8}, at::kDouble);
  at::Tensor ref = w * x / at::sqrt(x.pow(2).mean(-1, true) + 1e-5);
  EXPECT_TRUE(at::allclose(RmsNorm(x, w, 1e-5), ref));
}

at::Tensor Positions(int64_t n) { return at::arange(n, at::kLong); }

TEST(NnTest, DefaultRotaryIsCosOfPositionTimesInverseFrequency) {
  RopeConfig rope;
  rope.theta = 10000.0;
  auto [cos, sin] = RotaryCosSin(rope, 8, Positions(5), at::kDouble);
  ASSERT_EQ(cos.sizes(), (std::vector<int64_t>{5, 8}));
  EXPECT_EQ(cos.scalar_type(), at::kDouble);
  for (int64_t p : {1, 4}) {
    for (int64_t i = 0; i < 4; ++i) {
      const double f = std::pow(10000.0, -2.0 * static_cast<double>(i) / 8.0);
      EXPECT_NEAR(cos[p][i].item<double>(), std::cos(p * f), 1e-12);
      EXPECT_NEAR(cos[p][i + 4].item<double>(), std::cos(p * f), 1e-12);
      EXPECT_NEAR(sin[p][i].item<double>(), std::sin(p * f), 1e-12);
    }
  }
}

TEST(NnTest, LinearRotaryDividesFrequenciesByFactor) {
  RopeConfig base, linear;
  linear.kind = RopeKind::kLinear;
  linear.factor = 4.0;
  // Position 4p under factor 4 is position p unscaled.
  auto [c1, s1] = RotaryCosSin(base, 8, at::arange(0, 8, at::kLong), at::kDouble);
  auto [c2, s2] = RotaryCosSin(linear, 8, at::arange(0, 32, 4, at::kLong), at::kDouble);
  EXPECT_TRUE(at::allclose(c1, c2));
  EXPECT_TRUE(at::allclose(s1, s2));
}

TEST(NnTest, DynamicNtkChangesFrequenciesOnlyPastMaxPositions) {
  RopeConfig base, dyn;
  dyn.kind = RopeKind::kDynamic;
  dyn.factor = 4.0;
  dyn.max_position_embeddings = 16;
  auto short_base = RotaryCosSin(base, 8, Positions(16), at::kDouble);
  auto short_dyn = RotaryCosSin(dyn, 8, Positions(16), at::kDouble);
  EXPECT_TRUE(at::allclose(short_base.first, short_dyn.first));
  auto long_base = RotaryCosSin(base, 8, Positions(32), at::kDouble);
  auto long_dyn = RotaryCosSin(dyn, 8, Positions(32), at::kDouble);
  EXPECT_FALSE(at::allclose(long_base.first, long_dyn.first));
  // base' = base * (4 * 32 / 16 - 3)^(8/6) = base * 5^(4/3); check the lowest frequency.
  const double f = std::pow(10000.0 * std::pow(5.0, 8.0 / 6.0), -6.0 / 8.0);
  EXPECT_NEAR(long_dyn.first[31][3].item<double>(), std::cos(31 * f), 1e-10);
}

TEST(NnTest, Llama3RotaryKeepsHighAndScalesLowFrequencies) {
  RopeConfig rope;
  rope.kind = RopeKind::kLlama3;
  rope.theta = 500000.0;
  rope.factor = 8.0;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  rope.original_max_position_embeddings = 64;  // high wavelen 16, low 64
  RopeConfig base;
  base.theta = 500000.0;
  const int64_t dim = 16;
  auto [cl, sl] = RotaryCosSin(rope, dim, at::ones({1}, at::kLong), at::kDouble);
  auto [cb, sb] = RotaryCosSin(base, dim, at::ones({1}, at::kLong), at::kDouble);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double f = std::pow(500000.0, -2.0 * static_cast<double>(i) / dim);
    const double wavelen = 2 * std::numbers::pi / f;
    double expected = f;
    if (wavelen > 64) {
      expected = f / 8.0;
    } else if (wavelen >= 16) {
      const double smooth = (64 / wavelen - 1.0) / 3.0;
      expected = (1 - smooth) * f / 8.0 + smooth * f;
    }
    EXPECT_NEAR(std::acos(cl[0][i].item<double>()), expected, 1e-9) << i;
  }
  EXPECT_NEAR(cl[0][0].item<double>(), cb[0][0].item<double>(), 1e-12);  // highest freq kept
}

TEST(NnTest, YarnScalesCosAndSinByAttentionFactor) {
  RopeConfig yarn;
  yarn.kind = RopeKind::kYarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 32;
  yarn.attention_factor = 1.25;
  auto [cos, sin] = RotaryCosSin(yarn, 16, Positions(4), at::kDouble);
  EXPECT_NEAR(cos[0][0].item<double>(), 1.25, 1e-12);
  at::Tensor norm = (cos.pow(2) + sin.pow(2)).sqrt();
  EXPECT_TRUE(at::allclose(norm, at::full_like(norm, 1.25)));
}

TEST(NnTest, BlockedKeysCombineCausalWindowAndPadding) {
  at::Tensor mask = at::ones({2, 6}, at::kLong);
  mask[1][5] = 0;
  at::Tensor blocked = BlockedKeys(mask, 6, true, 3, at::kCPU);
  ASSERT_EQ(blocked.sizes(), (std::vector<int64_t>{2, 1, 6, 6}));
  EXPECT_FALSE(blocked[0][0][4][2].item<bool>());  // distance 2 < 3
  EXPECT_TRUE(blocked[0][0][4][1].item<bool>());   // distance 3: outside window
  EXPECT_TRUE(blocked[0][0][2][3].item<bool>());   // future
  EXPECT_FALSE(blocked[0][0][5][5].item<bool>());
  EXPECT_TRUE(blocked[1][0][5][5].item<bool>());  // padded key
  EXPECT_FALSE(BlockedKeys(at::Tensor(), 6, false, std::nullopt, at::kCPU).defined());
}

TEST(NnTest, GqaAttentionEqualsAttentionWithRepeatedKvHeads) {
  at::Tensor q = at::randn({2, 4, 5, 8});
  at::Tensor k = at::randn({2, 2, 5, 8});
  at::Tensor v = at::randn({2, 2, 5, 8});
  at::Tensor blocked = BlockedKeys(at::Tensor(), 5, true, std::nullopt, at::kCPU);
  at::Tensor gqa = Attention(q, k, v, blocked, 0.3);
  at::Tensor mha = Attention(q, RepeatKv(k, 2), RepeatKv(v, 2), blocked, 0.3);
  EXPECT_TRUE(at::allclose(gqa, mha));
  // Head 1 uses kv head 0, head 2 uses kv head 1.
  at::Tensor h2 = Attention(q.narrow(1, 2, 1), k.narrow(1, 1, 1), v.narrow(1, 1, 1), blocked, 0.3);
  EXPECT_TRUE(at::allclose(gqa.narrow(1, 2, 1), h2));
  // First query sees only the first key.
  EXPECT_TRUE(at::allclose(gqa[0][0][0], v[0][0][0]));
}

TEST(NnTest, FullyMaskedRowIsFiniteInFloat64) {
  at::Tensor q = at::randn({1, 1, 3, 4}, at::kDouble);
  at::Tensor blocked = at::ones({1, 1, 3, 3}, at::kBool);
  at::Tensor out = Attention(q, q, q, blocked, 0.5);
  EXPECT_TRUE(at::isfinite(out).all().item<bool>());
}

TEST(NnTest, PatchEmbedTokensArePerPatchProjections) {
  at::Tensor px = at::randn({1, 3, 16, 16});
  at::Tensor w = at::randn({6, 3, 8, 8});
  at::Tensor b = at::randn({6});
  at::Tensor t = PatchEmbed(px, w, b, 8);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{1, 4, 6}));
  // Token 1 is the top-right patch.
  at::Tensor patch = px.narrow(2, 0, 8).narrow(3, 8, 8).reshape({-1});
  at::Tensor ref = at::matmul(w.reshape({6, -1}), patch) + b;
  EXPECT_TRUE(at::allclose(t[0][1], ref, 1e-4, 1e-4));
}

}  // namespace
}  // namespace ts::zoo::nn
