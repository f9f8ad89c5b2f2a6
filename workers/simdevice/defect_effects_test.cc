// Seeded defects: every effect kind, every condition, modes, overload matching and flaky draws
// with their seed. Defects apply on the device only, never in the CPU fallback.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "workers/simdevice/internal/device_test_util.h"
#include "workers/simdevice/runtime.h"

namespace ts::simdevice {
namespace {

using DefectTest = BaselineProfileTest;

double RelErr(const at::Tensor& got, const at::Tensor& want) {
  return ((got - want).norm() / want.norm()).item<double>();
}

TEST_F(DefectTest, ScaleDefectOnSoftmaxIsVisibleAndScoped) {
  ActivateJson(
      WithDefect({{"op", "aten::_softmax"}, {"effect", {{"kind", "scale"}, {"value", 1.02}}}}));
  auto x = at::randn({4, 16});
  auto got = Cpu(at::softmax(Dev(x), -1));
  EXPECT_NEAR(RelErr(got, at::softmax(x, -1)), 0.02, 1e-4);
  // Ops other than the named one are untouched.
  EXPECT_TRUE(at::allclose(Cpu(at::gelu(Dev(x))), at::gelu(x)));
}

TEST_F(DefectTest, OffsetZeroTailAndNanEffects) {
  auto x = at::randn({4, 16});
  ActivateJson(
      WithDefect({{"op", "aten::gelu"}, {"effect", {{"kind", "offset"}, {"value", 0.5}}}}));
  EXPECT_TRUE(at::allclose(Cpu(at::gelu(Dev(x))), at::gelu(x) + 0.5));
  ActivateJson(
      WithDefect({{"op", "aten::gelu"}, {"effect", {{"kind", "zero_tail"}, {"value", 5}}}}));
  auto z = Cpu(at::gelu(Dev(x))).view({-1});
  EXPECT_TRUE(at::equal(z.narrow(0, 59, 5), at::zeros({5})));
  EXPECT_TRUE(at::allclose(z.narrow(0, 0, 59), at::gelu(x).view({-1}).narrow(0, 0, 59)));
  ActivateJson(WithDefect({{"op", "aten::gelu"}, {"effect", {{"kind", "nan"}}}}));
  auto n = Cpu(at::gelu(Dev(x))).view({-1});
  EXPECT_TRUE(std::isnan(n[0].item<float>())) << "the first element is NaN";
  EXPECT_TRUE(at::equal(n.narrow(0, 1, 63), at::gelu(x).view({-1}).narrow(0, 1, 63)));
}

// A strided result is damaged in its logical (row-major) order and written back in place.
TEST_F(DefectTest, ZeroTailOnAStridedResultZeroesTheLogicalTail) {
  ActivateJson(
      WithDefect({{"op", "aten::gelu"}, {"effect", {{"kind", "zero_tail"}, {"value", 3}}}}));
  auto x = at::randn({8, 4});
  auto got = at::gelu(Dev(x).t());  // the CPU kernel keeps the transposed layout
  ASSERT_FALSE(got.is_contiguous());
  auto flat = Cpu(got).contiguous().view({-1});
  auto want = at::gelu(x.t()).contiguous().view({-1});
  EXPECT_TRUE(at::equal(flat.narrow(0, 29, 3), at::zeros({3})));
  EXPECT_TRUE(at::equal(flat.narrow(0, 0, 29), want.narrow(0, 0, 29)));
}

TEST_F(DefectTest, ErrorEffectRaisesDeviceError) {
  ActivateJson(WithDefect({{"op", "aten::mm"}, {"effect", {{"kind", "error"}}}}));
  auto a = Dev(at::randn({4, 4}));
  try {
    at::mm(a, a);
    FAIL() << "expected a device error";
  } catch (const c10::Error& e) {
    EXPECT_EQ(ClassifyFault(e.what()), FaultKind::kDeviceError);
    EXPECT_NE(std::string(e.what()).find("aten::mm"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("T1"), std::string::npos) << "defect id leaked";
  }
}

TEST_F(DefectTest, SleepEffectHangsTheKernel) {
  ActivateJson(
      WithDefect({{"op", "aten::relu"}, {"effect", {{"kind", "sleep_ms"}, {"value", 150}}}}));
  auto t0 = std::chrono::steady_clock::now();
  at::relu(Dev(at::randn({4})));
  auto ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 150);
}

TEST(DeviceDeathTest, AbortEffectKillsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto j = BaselineNoDefects();
        j["defects"] = nlohmann::json::array(
            {{{"id", "A"}, {"op", "aten::tanh"}, {"effect", {{"kind", "abort"}}}}});
        (void)Activate(j.dump());
        at::tanh(at::randn({4}).to(SimDevice()));
      },
      "fatal device fault in aten::tanh");
}

TEST_F(DefectTest, WhenConditionsSelectShapesAndDtypes) {
  auto hit = [](const at::Tensor& x) {
    auto got = Cpu(at::softmax(Dev(x), -1));
    return !at::allclose(got, at::softmax(x, -1), 1e-6, 1e-7);
  };
  auto with_when = [](nlohmann::json when) {
    return WithDefect({{"op", "aten::_softmax"},
                       {"when", when},
                       {"effect", {{"kind", "scale"}, {"value", 1.5}}}});
  };
  ActivateJson(with_when({{"min_last_dim", 32}}));
  EXPECT_FALSE(hit(at::randn({2, 16})));
  EXPECT_TRUE(hit(at::randn({2, 32})));
  ActivateJson(with_when({{"max_last_dim", 8}}));
  EXPECT_TRUE(hit(at::randn({2, 8})));
  EXPECT_FALSE(hit(at::randn({2, 9})));
  ActivateJson(with_when({{"min_numel", 100}}));
  EXPECT_FALSE(hit(at::randn({2, 16})));
  EXPECT_TRUE(hit(at::randn({8, 16})));
  ActivateJson(with_when({{"max_numel", 10}}));
  EXPECT_TRUE(hit(at::randn({2, 5})));
  EXPECT_FALSE(hit(at::randn({2, 6})));
  ActivateJson(with_when({{"rank", 3}}));
  EXPECT_FALSE(hit(at::randn({2, 6})));
  EXPECT_TRUE(hit(at::randn({2, 2, 6})));
  ActivateJson(with_when({{"dtype", "bfloat16"}}));
  EXPECT_FALSE(hit(at::randn({2, 6})));
  ActivateJson(with_when({{"dtype", "float32"}}));
  EXPECT_TRUE(hit(at::randn({2, 6})));
}

TEST_F(DefectTest, ModeSelectsEagerOrCompiled) {
  auto x = at::randn({2, 8});
  auto differs = [&](ExecMode mode) {
    ScopedExecMode scope(mode);
    return !at::allclose(Cpu(at::gelu(Dev(x))), at::gelu(x));
  };
  ActivateJson(WithDefect(
      {{"op", "aten::gelu"}, {"mode", "eager"}, {"effect", {{"kind", "offset"}, {"value", 1}}}}));
  EXPECT_TRUE(differs(ExecMode::kEager));
  EXPECT_FALSE(differs(ExecMode::kCompiled));
  ActivateJson(WithDefect({{"op", "aten::gelu"},
                           {"mode", "compiled"},
                           {"effect", {{"kind", "offset"}, {"value", 1}}}}));
  EXPECT_FALSE(differs(ExecMode::kEager));
  EXPECT_TRUE(differs(ExecMode::kCompiled));
  // A mode given inside `when` works too.
  ActivateJson(WithDefect({{"op", "aten::gelu"},
                           {"when", {{"mode", "compiled"}}},
                           {"effect", {{"kind", "offset"}, {"value", 1}}}}));
  EXPECT_FALSE(differs(ExecMode::kEager));
  // A defect on an op with no eager kernel applies inside compiled segments.
  ActivateJson(
      WithDefect({{"op", "aten::cumsum"}, {"effect", {{"kind", "offset"}, {"value", 1}}}}));
  {
    ScopedExecMode scope(ExecMode::kCompiled);
    EXPECT_FALSE(at::allclose(Cpu(at::cumsum(Dev(x), 1)), at::cumsum(x, 1)));
  }
  EXPECT_TRUE(at::allclose(Cpu(at::cumsum(Dev(x), 1)), at::cumsum(x, 1))) << "fallback runs on CPU";
}

TEST_F(DefectTest, OverloadlessDefectOpMatchesEveryOverload) {
  ActivateJson(WithDefect({{"op", "aten::add"}, {"effect", {{"kind", "offset"}, {"value", 1}}}}));
  auto a = at::randn({3});
  EXPECT_TRUE(at::allclose(Cpu(Dev(a) + Dev(a)), a + a + 1));
}

TEST_F(DefectTest, FlakyDefectsFollowProbabilityAndSeed) {
  auto j = WithDefect({{"op", "aten::relu"},
                       {"when", {{"probability", 0.3}}},
                       {"effect", {{"kind", "offset"}, {"value", 1}}}});
  auto x = at::randn({8});
  auto draws = [&](uint64_t seed) {
    ActivateJson(j, seed);
    std::vector<bool> hits;
    for (int i = 0; i < 400; ++i) hits.push_back(!at::allclose(Cpu(at::relu(Dev(x))), at::relu(x)));
    return hits;
  };
  auto a = draws(1), b = draws(1), c = draws(2);
  EXPECT_EQ(a, b) << "same seed, same draws";
  EXPECT_NE(a, c);
  const double rate = std::count(a.begin(), a.end(), true) / 400.0;
  EXPECT_GT(rate, 0.2);
  EXPECT_LT(rate, 0.4);
}

}  // namespace
}  // namespace ts::simdevice
