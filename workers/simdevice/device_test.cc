// Device kernels checked op by op against CPU (per-op tolerance), fallback counters, memory,
// dtypes, and every defect condition and effect kind.
#include <chrono>
#include <fstream>
#include <sstream>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "workers/simdevice/runtime.h"

namespace ts::simdevice {
namespace {

nlohmann::json BaselineNoDefects() {
  std::ifstream in(std::string(TS_SIMDEVICE_PROFILE_DIR) + "/sim-2.0.json");
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str());
  j.erase("defects");
  return j;
}

void ActivateJson(const nlohmann::json& j, uint64_t seed = 0) {
  auto r = Activate(j.dump(), seed);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

nlohmann::json WithDefect(nlohmann::json defect) {
  auto j = BaselineNoDefects();
  defect["id"] = "T1";
  j["defects"] = nlohmann::json::array({defect});
  return j;
}

at::Tensor Dev(const at::Tensor& t) { return t.to(SimDevice()); }
at::Tensor Cpu(const at::Tensor& t) { return t.to(at::kCPU); }

class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ActivateJson(BaselineNoDefects());
    ResetCounters();
    at::manual_seed(7);
  }
};

TEST_F(DeviceTest, TensorsLiveOnTheDeviceAndRoundTrip) {
  auto x = at::randn({3, 5});
  auto d = Dev(x);
  EXPECT_EQ(d.device(), SimDevice());
  EXPECT_TRUE(at::equal(Cpu(d), x));
  auto v = d.view({5, 3}).transpose(0, 1).contiguous();
  EXPECT_TRUE(at::equal(Cpu(v), x.view({5, 3}).transpose(0, 1)));
  EXPECT_TRUE(at::equal(Cpu(d.narrow(1, 1, 2)), x.narrow(1, 1, 2)));
  auto r = at::empty({0}, x.options().device(SimDevice()));
  r.resize_({4, 4});
  EXPECT_EQ(r.numel(), 16);
}

// ggml test-backend-ops style: each native op against its CPU result, with a tolerance per op.
TEST_F(DeviceTest, NativeOpsMatchCpuWithinPerOpTolerance) {
  struct Case {
    const char* name;
    std::function<at::Tensor(const std::vector<at::Tensor>&)> fn;
    std::vector<at::Tensor> inputs;
    double rtol, atol;
    const char* counted;  // native counter expected to be hit
  };
  auto a = at::randn({4, 8}), b = at::randn({8, 6}), c = at::randn({4, 6});
  auto ba = at::randn({2, 4, 8}), bb = at::randn({2, 8, 5});
  auto ids = at::randint(0, 10, {3, 4}, at::kLong);
  auto emb = at::randn({10, 6});
  auto mask = at::rand({4, 8}) > 0.5;
  const double kBf16 = 2e-2;  // matmul inputs rounded to bf16
  std::vector<Case> cases = {
      {"mm", [](auto& v) { return at::mm(v[0], v[1]); }, {a, b}, kBf16, kBf16, "aten::mm"},
      {"addmm", [](auto& v) { return at::addmm(v[2], v[0], v[1]); }, {a, b, c}, kBf16, kBf16, "aten::addmm"},
      {"bmm", [](auto& v) { return at::bmm(v[0], v[1]); }, {ba, bb}, kBf16, kBf16, "aten::bmm"},
      {"add", [](auto& v) { return v[0] + v[1]; }, {a, a * 2}, 1e-6, 1e-6, "aten::add.Tensor"},
      {"sub", [](auto& v) { return v[0] - v[1]; }, {a, a * 3}, 1e-6, 1e-6, "aten::sub.Tensor"},
      {"mul", [](auto& v) { return v[0] * v[1]; }, {a, a}, 1e-6, 1e-6, "aten::mul.Tensor"},
      {"div", [](auto& v) { return v[0] / (v[1] * v[1] + 1); }, {a, a}, 1e-6, 1e-6, "aten::div.Tensor"},
      {"gelu", [](auto& v) { return at::gelu(v[0]); }, {a}, 1e-6, 1e-6, "aten::gelu"},
      {"gelu_tanh", [](auto& v) { return at::gelu(v[0], "tanh"); }, {a}, 1e-6, 1e-6, "aten::gelu"},
      {"silu", [](auto& v) { return at::silu(v[0]); }, {a}, 1e-6, 1e-6, "aten::silu"},
      {"relu", [](auto& v) { return at::relu(v[0]); }, {a}, 0, 0, "aten::relu"},
      {"tanh", [](auto& v) { return at::tanh(v[0]); }, {a}, 1e-6, 1e-6, "aten::tanh"},
      {"softmax", [](auto& v) { return at::softmax(v[0], -1); }, {a}, 1e-6, 1e-7, "aten::_softmax"},
      {"log_softmax", [](auto& v) { return at::log_softmax(v[0], -1); }, {a}, 1e-6, 1e-6, "aten::_log_softmax"},
      {"layer_norm", [](auto& v) { return at::layer_norm(v[0], {8}, v[1], v[2]); },
       {a, at::randn({8}), at::randn({8})}, 1e-5, 1e-5, "aten::native_layer_norm"},
      {"embedding", [](auto& v) { return at::embedding(v[1], v[0]); }, {ids, emb}, 0, 0, "aten::embedding"},
      {"index_select", [](auto& v) { return at::index_select(v[0], 0, v[1]); },
       {emb, at::tensor({3, 1, 3}, at::kLong)}, 0, 0, "aten::index_select"},
      {"sum", [](auto& v) { return v[0].sum(-1); }, {a}, 1e-6, 1e-5, "aten::sum.dim_IntList"},
      {"mean", [](auto& v) { return v[0].mean(-1, true); }, {a}, 1e-6, 1e-6, "aten::mean.dim"},
      {"cat", [](auto& v) { return at::cat({v[0], v[1]}, 0); }, {a, at::randn({2, 8})}, 0, 0, "aten::cat"},
      {"where", [](auto& v) { return at::where(v[2], v[0], v[1]); }, {a, a * -1, mask}, 0, 0, "aten::where.self"},
      {"masked_fill", [](auto& v) { return v[0].masked_fill(v[1], -1e4); }, {a, mask}, 0, 0, "aten::masked_fill.Scalar"},
  };
  for (auto& c_ : cases) {
    ResetCounters();
    std::vector<at::Tensor> dev_in;
    for (auto& t : c_.inputs) dev_in.push_back(Dev(t));
    at::Tensor expect = c_.fn(c_.inputs);
    at::Tensor got = c_.fn(dev_in);
    ASSERT_EQ(got.device(), SimDevice()) << c_.name;
    EXPECT_TRUE(at::allclose(Cpu(got), expect, c_.rtol, c_.atol))
        << c_.name << " max err " << (Cpu(got) - expect).abs().max().item<double>();
    auto counters = SnapshotCounters();
    EXPECT_GE(counters.native[c_.counted].calls, 1) << c_.name;
    EXPECT_TRUE(counters.fallback.empty()) << c_.name << " fell back: " << counters.fallback.begin()->first;
  }
}

TEST_F(DeviceTest, MatmulRoundsInputsToBf16AndAccumulatesInFp32) {
  auto a = at::randn({16, 64}), b = at::randn({64, 16});
  auto got = Cpu(at::mm(Dev(a), Dev(b)));
  auto emulated = at::mm(a.to(at::kBFloat16).to(at::kFloat), b.to(at::kBFloat16).to(at::kFloat));
  EXPECT_TRUE(at::allclose(got, emulated, 1e-6, 1e-6));
  EXPECT_FALSE(at::allclose(got, at::mm(a, b), 1e-6, 1e-6)) << "bf16 rounding had no effect";
  // An fp32-matmul profile computes exactly.
  auto j = BaselineNoDefects();
  j["numerics"]["matmul"] = "fp32";
  ActivateJson(j);
  EXPECT_TRUE(at::allclose(Cpu(at::mm(Dev(a), Dev(b))), at::mm(a, b), 1e-6, 1e-6));
}

TEST_F(DeviceTest, NonNativeOpsFallBackAndAreCounted) {
  auto x = at::randn({4, 8});
  auto d = Dev(x);
  auto got = at::cumsum(d, 1);  // not native on sim-2.0
  auto r = at::rsqrt(d.abs() + 1);
  EXPECT_TRUE(at::allclose(Cpu(got), at::cumsum(x, 1)));
  EXPECT_TRUE(at::allclose(Cpu(r), at::rsqrt(x.abs() + 1)));
  auto c = SnapshotCounters();
  EXPECT_EQ(c.fallback["aten::cumsum"].calls, 1);
  EXPECT_EQ(c.fallback["aten::rsqrt"].calls, 1);
  EXPECT_GE(c.fallback["aten::cumsum"].ms, 0.0);
  EXPECT_EQ(c.native.count("aten::cumsum"), 0u);
  // Plumbing (allocation, copies, views) is not counted as compute.
  EXPECT_EQ(c.native.count("aten::empty.memory_format"), 0u);
  EXPECT_EQ(c.fallback.count("aten::empty.memory_format"), 0u);
  EXPECT_EQ(c.native.count("aten::view"), 0u);
}

TEST_F(DeviceTest, KernelNotInProfileFallsBack) {
  auto j = BaselineNoDefects();
  j["native_ops"] = nlohmann::json::array({"aten::add.Tensor"});
  ActivateJson(j);
  ResetCounters();
  auto a = at::randn({4, 4});
  auto got = at::mm(Dev(a), Dev(a));
  EXPECT_TRUE(at::allclose(Cpu(got), at::mm(a, a), 1e-6, 1e-6)) << "fallback is exact fp32";
  auto c = SnapshotCounters();
  EXPECT_EQ(c.fallback["aten::mm"].calls, 1);
  EXPECT_EQ(c.native.count("aten::mm"), 0u);
}

TEST_F(DeviceTest, CompiledModeLowersEverythingToTheDevice) {
  auto d = Dev(at::randn({4, 8}));
  {
    ScopedExecMode compiled(ExecMode::kCompiled);
    EXPECT_EQ(CurrentExecMode(), ExecMode::kCompiled);
    auto y = at::cumsum(at::mm(d, d.t()), 1);
    (void)y;
  }
  EXPECT_EQ(CurrentExecMode(), ExecMode::kEager);
  auto c = SnapshotCounters();
  EXPECT_EQ(c.compiled["aten::cumsum"].calls, 1);
  EXPECT_EQ(c.compiled["aten::mm"].calls, 1);
  EXPECT_TRUE(c.fallback.empty());
}

TEST_F(DeviceTest, TracedConvolutionRunsOnTheDeviceInBothModes) {
  // at::_convolution is what a traced conv2d records; on a non-CPU device it goes through the
  // *_overrideable ops, which must reach the device's convolution.
  auto x = at::randn({1, 3, 8, 8}), w = at::randn({4, 3, 3, 3}), b = at::randn({4});
  auto run = [&](const at::Device& d) {
    return Cpu(at::_convolution(x.to(d), w.to(d), b.to(d), {1, 1}, {1, 1}, {1, 1}, false, {0, 0},
                                1, false, false, true, true));
  };
  const auto expect = run(at::kCPU);
  EXPECT_TRUE(at::allclose(run(SimDevice()), expect, 1e-5, 1e-5));
  {
    ScopedExecMode compiled(ExecMode::kCompiled);
    // Lowered: bf16-rounded operands, so compare the relative error of the whole result.
    auto got = run(SimDevice());
    EXPECT_LT(((got - expect).norm() / expect.norm()).item<double>(), 1e-2);
  }
  auto xd = x.to(SimDevice()).requires_grad_(true);
  auto y = at::_convolution(xd, w.to(SimDevice()), b.to(SimDevice()), {1, 1}, {1, 1}, {1, 1},
                            false, {0, 0}, 1, false, false, true, true);
  y.sum().backward();
  auto xc = x.clone().requires_grad_(true);
  at::conv2d(xc, w, b, 1, 1).sum().backward();
  EXPECT_TRUE(at::allclose(Cpu(xd.grad()), xc.grad(), 1e-4, 1e-4));
}

TEST_F(DeviceTest, AutogradThroughDeviceMatchesCpu) {
  auto w = at::randn({8, 8});
  auto x = at::randn({4, 8});
  auto run = [&](const at::Device& dev) {
    auto wd = w.to(dev).detach().requires_grad_(true);
    auto y = at::softmax(at::gelu(at::linear(x.to(dev), wd)), -1);
    auto loss = (y * y).sum();
    loss.backward();
    return std::make_pair(Cpu(loss.detach()), Cpu(wd.grad()));
  };
  auto [l_cpu, g_cpu] = run(at::kCPU);
  auto [l_dev, g_dev] = run(SimDevice());
  EXPECT_TRUE(at::allclose(l_dev, l_cpu, 2e-2, 2e-2));
  EXPECT_TRUE(at::allclose(g_dev, g_cpu, 5e-2, 5e-2));
  auto c = SnapshotCounters();
  EXPECT_GE(c.native["aten::gelu_backward"].calls, 1);
  EXPECT_GE(c.native["aten::_softmax_backward_data"].calls, 1);
}

TEST_F(DeviceTest, AllocationBeyondCapacityIsDeviceOom) {
  auto j = BaselineNoDefects();
  j["memory_bytes"] = 1 << 20;
  ActivateJson(j);
  auto small = at::empty({1024}, at::TensorOptions().device(SimDevice()));  // 4 KiB
  try {
    auto big = at::empty({1 << 19}, at::TensorOptions().device(SimDevice()));  // 2 MiB
    FAIL() << "expected OOM";
  } catch (const c10::Error& e) {
    EXPECT_EQ(ClassifyFault(e.what()), FaultKind::kOom) << e.what();
  }
  // The failed allocation left nothing behind; the device still works.
  auto again = at::ones({1024}, at::TensorOptions().device(SimDevice()));
  EXPECT_EQ(Cpu(again).sum().item<float>(), 1024.f);
  EXPECT_LE(SnapshotCounters().peak_bytes, 1 << 20);
}

TEST_F(DeviceTest, UnsupportedDtypeIsDeviceError) {
  try {
    auto d = at::ones({4}, at::kDouble).to(SimDevice());
    FAIL() << "float64 reached the device";
  } catch (const c10::Error& e) {
    EXPECT_EQ(ClassifyFault(e.what()), FaultKind::kUnsupportedDtype) << e.what();
    EXPECT_NE(std::string(e.what()).find("float64"), std::string::npos);
  }
  auto f = Dev(at::ones({4}));
  EXPECT_THROW(f.to(at::kDouble), c10::Error);
  EXPECT_EQ(ClassifyFault("shape mismatch"), FaultKind::kNone);
}

TEST_F(DeviceTest, ProfileNamingAnOpWithoutKernelIsRejected) {
  auto j = BaselineNoDefects();
  j["native_ops"].push_back("aten::fft_fft");
  auto r = Activate(j.dump());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("aten::fft_fft"), std::string::npos);
  // The previous profile stays active.
  EXPECT_EQ(ActiveProfile().name, "sim");
}

// ---- defects: every effect kind and every condition.

double RelErr(const at::Tensor& got, const at::Tensor& want) {
  return ((got - want).norm() / want.norm()).item<double>();
}

TEST_F(DeviceTest, ScaleDefectOnSoftmaxIsVisibleAndScoped) {
  ActivateJson(WithDefect({{"op", "aten::_softmax"}, {"effect", {{"kind", "scale"}, {"value", 1.02}}}}));
  auto x = at::randn({4, 16});
  auto got = Cpu(at::softmax(Dev(x), -1));
  EXPECT_NEAR(RelErr(got, at::softmax(x, -1)), 0.02, 1e-4);
  // Ops other than the named one are untouched.
  EXPECT_TRUE(at::allclose(Cpu(at::gelu(Dev(x))), at::gelu(x)));
}

TEST_F(DeviceTest, OffsetZeroTailAndNanEffects) {
  auto x = at::randn({4, 16});
  ActivateJson(WithDefect({{"op", "aten::gelu"}, {"effect", {{"kind", "offset"}, {"value", 0.5}}}}));
  EXPECT_TRUE(at::allclose(Cpu(at::gelu(Dev(x))), at::gelu(x) + 0.5));
  ActivateJson(WithDefect({{"op", "aten::gelu"}, {"effect", {{"kind", "zero_tail"}, {"value", 5}}}}));
  auto z = Cpu(at::gelu(Dev(x))).view({-1});
  EXPECT_TRUE(at::equal(z.narrow(0, 59, 5), at::zeros({5})));
  EXPECT_TRUE(at::allclose(z.narrow(0, 0, 59), at::gelu(x).view({-1}).narrow(0, 0, 59)));
  ActivateJson(WithDefect({{"op", "aten::gelu"}, {"effect", {{"kind", "nan"}}}}));
  EXPECT_TRUE(Cpu(at::gelu(Dev(x))).isnan().any().item<bool>());
}

TEST_F(DeviceTest, ErrorEffectRaisesDeviceError) {
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

TEST_F(DeviceTest, SleepEffectHangsTheKernel) {
  ActivateJson(WithDefect({{"op", "aten::relu"}, {"effect", {{"kind", "sleep_ms"}, {"value", 150}}}}));
  auto t0 = std::chrono::steady_clock::now();
  at::relu(Dev(at::randn({4})));
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
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

TEST_F(DeviceTest, WhenConditionsSelectShapesAndDtypes) {
  auto hit = [](const at::Tensor& x) {
    auto got = Cpu(at::softmax(Dev(x), -1));
    return !at::allclose(got, at::softmax(x, -1), 1e-6, 1e-7);
  };
  auto with_when = [](nlohmann::json when) {
    return WithDefect({{"op", "aten::_softmax"}, {"when", when}, {"effect", {{"kind", "scale"}, {"value", 1.5}}}});
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

TEST_F(DeviceTest, ModeSelectsEagerOrCompiled) {
  auto x = at::randn({2, 8});
  auto differs = [&](ExecMode mode) {
    ScopedExecMode scope(mode);
    return !at::allclose(Cpu(at::gelu(Dev(x))), at::gelu(x));
  };
  ActivateJson(WithDefect({{"op", "aten::gelu"}, {"mode", "eager"}, {"effect", {{"kind", "offset"}, {"value", 1}}}}));
  EXPECT_TRUE(differs(ExecMode::kEager));
  EXPECT_FALSE(differs(ExecMode::kCompiled));
  ActivateJson(WithDefect({{"op", "aten::gelu"}, {"mode", "compiled"}, {"effect", {{"kind", "offset"}, {"value", 1}}}}));
  EXPECT_FALSE(differs(ExecMode::kEager));
  EXPECT_TRUE(differs(ExecMode::kCompiled));
  // A mode given inside `when` works too.
  ActivateJson(WithDefect({{"op", "aten::gelu"}, {"when", {{"mode", "compiled"}}}, {"effect", {{"kind", "offset"}, {"value", 1}}}}));
  EXPECT_FALSE(differs(ExecMode::kEager));
  // A defect on an op with no eager kernel applies inside compiled segments.
  ActivateJson(WithDefect({{"op", "aten::cumsum"}, {"effect", {{"kind", "offset"}, {"value", 1}}}}));
  {
    ScopedExecMode scope(ExecMode::kCompiled);
    EXPECT_FALSE(at::allclose(Cpu(at::cumsum(Dev(x), 1)), at::cumsum(x, 1)));
  }
  EXPECT_TRUE(at::allclose(Cpu(at::cumsum(Dev(x), 1)), at::cumsum(x, 1))) << "fallback runs on CPU";
}

TEST_F(DeviceTest, OverloadlessDefectOpMatchesEveryOverload) {
  ActivateJson(WithDefect({{"op", "aten::add"}, {"effect", {{"kind", "offset"}, {"value", 1}}}}));
  auto a = at::randn({3});
  EXPECT_TRUE(at::allclose(Cpu(Dev(a) + Dev(a)), a + a + 1));
}

TEST_F(DeviceTest, FlakyDefectsFollowProbabilityAndSeed) {
  auto j = WithDefect({{"op", "aten::relu"}, {"when", {{"probability", 0.3}}}, {"effect", {{"kind", "offset"}, {"value", 1}}}});
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
