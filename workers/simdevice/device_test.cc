// The runtime and the fallback: tensors on the device, plumbing not counted, the counted CPU
// fallback (eager) and lowering (compiled), traced convolution, autograd, memory accounting and
// OOM, unsupported dtypes, and profile activation. Kernels vs CPU are in kernels_test.cc,
// defects in defect_effects_test.cc.
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "workers/simdevice/internal/device_test_util.h"
#include "workers/simdevice/runtime.h"
#include "workers/simdevice/op_numerics.h"

namespace ts::simdevice {
namespace {

using DeviceTest = BaselineProfileTest;

// "aten::cumsum aten::rsqrt" for failure messages.
std::string Names(const std::map<std::string, OpStats>& table) {
  std::string out;
  for (const auto& [name, stats] : table) out += name + " ";
  return out;
}

void ExpectNoComputeCounted() {
  const Counters c = SnapshotCounters();
  EXPECT_TRUE(c.native.empty()) << c.native.begin()->first;
  EXPECT_TRUE(c.fallback.empty()) << c.fallback.begin()->first;
  EXPECT_TRUE(c.compiled.empty()) << c.compiled.begin()->first;
}

TEST_F(DeviceTest, TensorsLiveOnTheDeviceAndRoundTrip) {
  auto x = at::randn({3, 5});
  auto d = Dev(x);
  EXPECT_EQ(d.device(), SimDevice());
  EXPECT_TRUE(at::equal(Cpu(d), x));
  auto v = d.view({5, 3}).transpose(0, 1).contiguous();
  EXPECT_EQ(v.device(), SimDevice());
  EXPECT_TRUE(at::equal(Cpu(v), x.view({5, 3}).transpose(0, 1)));
  EXPECT_TRUE(at::equal(Cpu(d.narrow(1, 1, 2)), x.narrow(1, 1, 2)));
  auto r = at::empty({0}, x.options().device(SimDevice()));
  r.resize_({4, 4});
  EXPECT_EQ(r.numel(), 16);
  // Allocation, copies, views and resize are plumbing: not counted as compute.
  ExpectNoComputeCounted();
}

// cumsum and rsqrt have kernels that sim-2.0 does not list (KernelEntry's fallback path); floor
// has none, so ATen's structured composite calls floor.out, which the catch-all fallback takes.
TEST_F(DeviceTest, NonNativeOpsFallBackAndAreCounted) {
  auto x = at::randn({4, 8});
  auto pos = x.abs() + 1;
  auto got = at::cumsum(Dev(x), 1);
  auto r = at::rsqrt(Dev(pos));
  auto f = at::floor(Dev(x));
  for (const auto& t : {got, r, f}) EXPECT_EQ(t.device(), SimDevice());
  EXPECT_TRUE(at::equal(Cpu(got), at::cumsum(x, 1)));
  EXPECT_TRUE(at::equal(Cpu(r), at::rsqrt(pos)));
  EXPECT_TRUE(at::equal(Cpu(f), at::floor(x)));
  auto c = SnapshotCounters();
  EXPECT_EQ(c.fallback.size(), 3u) << Names(c.fallback);
  for (const char* op : {"aten::cumsum", "aten::rsqrt", "aten::floor.out"}) {
    EXPECT_EQ(c.fallback[op].calls, 1) << op;
    EXPECT_GT(c.fallback[op].ms, 0.0) << op;
  }
  EXPECT_TRUE(c.native.empty()) << c.native.begin()->first;
  EXPECT_TRUE(c.compiled.empty());
}

TEST_F(DeviceTest, KernelNotInProfileFallsBack) {
  auto j = BaselineNoDefects();
  j["native_ops"] = nlohmann::json::array({"aten::add.Tensor"});
  ActivateJson(j);
  ResetCounters();
  auto a = at::randn({4, 4});
  auto got = at::mm(Dev(a), Dev(a));
  EXPECT_EQ(got.device(), SimDevice());
  EXPECT_TRUE(at::equal(Cpu(got), at::mm(a, a))) << "the fallback is exact fp32";
  auto c = SnapshotCounters();
  EXPECT_EQ(c.fallback["aten::mm"].calls, 1);
  EXPECT_EQ(c.fallback.size(), 1u);
  EXPECT_TRUE(c.native.empty());
}

// Inside a compiled segment every op is device execution: a listed kernel (mm), a kernel the
// profile does not list (cumsum) and an op with no kernel (floor.out) are all counted as compiled.
TEST_F(DeviceTest, CompiledModeLowersEverythingToTheDevice) {
  auto x = at::randn({4, 8});
  auto d = Dev(x);
  at::Tensor y;
  {
    ScopedExecMode compiled(ExecMode::kCompiled);
    EXPECT_EQ(CurrentExecMode(), ExecMode::kCompiled);
    y = at::floor(at::cumsum(at::mm(d, d.t()), 1));
  }
  EXPECT_EQ(CurrentExecMode(), ExecMode::kEager);
  auto xr = RoundBf16(x);
  EXPECT_TRUE(at::allclose(Cpu(y), at::floor(at::cumsum(at::mm(xr, xr.t()), 1)), 1e-5, 1e-5));
  auto c = SnapshotCounters();
  EXPECT_EQ(c.compiled.size(), 3u) << Names(c.compiled);
  for (const char* op : {"aten::mm", "aten::cumsum", "aten::floor.out"}) {
    EXPECT_EQ(c.compiled[op].calls, 1) << op;
  }
  EXPECT_TRUE(c.fallback.empty()) << c.fallback.begin()->first;
  EXPECT_TRUE(c.native.empty()) << c.native.begin()->first;
}

TEST_F(DeviceTest, TracedConvolutionRunsOnTheDeviceInBothModes) {
  // at::_convolution is what a traced conv2d records; on a non-CPU device it goes through the
  // *_overrideable ops, which must reach the device's convolution (a fallback on sim-2.0).
  auto x = at::randn({1, 3, 8, 8}), w = at::randn({4, 3, 3, 3}), b = at::randn({4});
  auto run = [&](const at::Device& d) {
    return Cpu(at::_convolution(x.to(d), w.to(d), b.to(d), {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1,
                                false, false, true, true));
  };
  const auto expect = run(at::kCPU);
  EXPECT_TRUE(at::allclose(run(SimDevice()), expect, 1e-5, 1e-5));
  EXPECT_EQ(SnapshotCounters().fallback["aten::convolution"].calls, 1);
  {
    ScopedExecMode compiled(ExecMode::kCompiled);
    // Lowered: bf16-rounded operands, so compare the relative error of the whole result.
    auto got = run(SimDevice());
    EXPECT_LT(((got - expect).norm() / expect.norm()).item<double>(), 1e-2);
    EXPECT_GT(((got - expect).norm() / expect.norm()).item<double>(), 0) << "not rounded";
  }
  EXPECT_EQ(SnapshotCounters().compiled["aten::convolution"].calls, 1);
  auto xd = x.to(SimDevice()).requires_grad_(true);
  auto y = at::_convolution(xd, w.to(SimDevice()), b.to(SimDevice()), {1, 1}, {1, 1}, {1, 1}, false,
                            {0, 0}, 1, false, false, true, true);
  y.sum().backward();
  auto xc = x.clone().requires_grad_(true);
  at::conv2d(xc, w, b, 1, 1).sum().backward();
  EXPECT_TRUE(at::allclose(Cpu(xd.grad()), xc.grad(), 1e-4, 1e-4));
  EXPECT_EQ(SnapshotCounters().fallback["aten::convolution_backward"].calls, 1);
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
  EXPECT_EQ(c.native["aten::gelu_backward"].calls, 1);
  EXPECT_EQ(c.native["aten::_softmax_backward_data"].calls, 1);
}

TEST_F(DeviceTest, MemoryAccountingTracksCurrentAndPeakBytes) {
  const int64_t base = SnapshotCounters().current_bytes;
  EXPECT_EQ(SnapshotCounters().peak_bytes, base) << "ResetCounters sets peak to current";
  {
    auto a = at::empty({1024}, at::TensorOptions().device(SimDevice()));  // 4 KiB
    EXPECT_EQ(SnapshotCounters().current_bytes, base + 4096);
    {
      auto b = at::empty({2048}, at::TensorOptions().device(SimDevice()));  // 8 KiB
      EXPECT_EQ(SnapshotCounters().current_bytes, base + 4096 + 8192);
    }
    EXPECT_EQ(SnapshotCounters().current_bytes, base + 4096);
    EXPECT_EQ(SnapshotCounters().peak_bytes, base + 4096 + 8192);
    ResetCounters();
    EXPECT_EQ(SnapshotCounters().peak_bytes, base + 4096);
  }
  EXPECT_EQ(SnapshotCounters().current_bytes, base);
}

// A computed result becomes device memory without a copy (kernels.cc ToDevice): it is charged
// like an allocation, freed with the tensor, independent of its operands, and refused beyond
// capacity like any allocation.
TEST_F(DeviceTest, ComputedResultsAreChargedAndOwnTheirMemory) {
  const int64_t base = SnapshotCounters().current_bytes;
  const at::Tensor x = at::randn({256});
  auto a = Dev(x);  // 1 KiB
  ASSERT_EQ(SnapshotCounters().current_bytes, base + 1024);
  {
    auto g = at::gelu(a);  // native: computed on the host, adopted
    EXPECT_EQ(SnapshotCounters().current_bytes, base + 2048);
    EXPECT_EQ(SnapshotCounters().peak_bytes, base + 2048);
    EXPECT_EQ(g.device(), SimDevice());
    a.mul_(2);  // the result does not share the operand's memory
    EXPECT_TRUE(at::equal(Cpu(g), at::gelu(x)));
    g.add_(1);  // nor the operand the result's
    EXPECT_TRUE(at::equal(Cpu(a), x * 2));
    g.resize_({512});  // a resize reallocates through the device allocator
    EXPECT_EQ(SnapshotCounters().current_bytes, base + 1024 + 2048);
  }
  EXPECT_EQ(SnapshotCounters().current_bytes, base + 1024);

  auto j = BaselineNoDefects();
  j["memory_bytes"] = 1 << 20;
  ActivateJson(j);
  const int64_t before = SnapshotCounters().current_bytes;
  auto big = Dev(at::randn({150 * 1024}));  // 600 KiB of the 1 MiB
  try {
    auto g = at::gelu(big);  // another 600 KiB
    FAIL() << "expected OOM";
  } catch (const c10::Error& e) {
    EXPECT_EQ(ClassifyFault(e.what()), FaultKind::kOom) << e.what();
  }
  EXPECT_EQ(SnapshotCounters().current_bytes, before + 600 * 1024);
}

// The fallback drops exactly one libtorch warning: a 0-dim out= tensor resized, which 1.13's
// mse_loss.out emits on every call (fallback.cc). Any other warning still reaches the handler.
TEST_F(DeviceTest, FallbackDropsOnlyTheZeroDimOutResizeWarning) {
  struct Capture : c10::WarningHandler {
    std::vector<std::string> seen;
    void process(const c10::SourceLocation&, const std::string& msg, bool) override {
      seen.push_back(msg);
    }
  } capture;
  c10::Warning::WarningHandlerGuard guard(&capture);
  const at::Tensor x = at::randn({2, 3, 4}), t = at::randn({2, 3, 4});
  // The warning is real: CPU mse_loss.out into a 0-dim out emits it.
  at::Tensor out0 = at::zeros({});
  at::mse_loss_out(out0, x, t);
  ASSERT_EQ(capture.seen.size(), 1u);
  EXPECT_NE(capture.seen[0].find("had shape []"), std::string::npos) << capture.seen[0];
  capture.seen.clear();

  auto loss = at::mse_loss(Dev(x), Dev(t));  // mse_loss's composite: mse_loss.out, fallback
  EXPECT_TRUE(at::allclose(Cpu(loss), at::mse_loss(x, t)));
  EXPECT_EQ(SnapshotCounters().fallback.count("aten::mse_loss.out"), 1u)
      << Names(SnapshotCounters().fallback);
  EXPECT_TRUE(capture.seen.empty()) << capture.seen[0];

  auto out3 = Dev(at::zeros({3}));  // add.out falls back; its out is resized from [3]
  at::add_out(out3, Dev(x.select(0, 0).select(0, 0)), Dev(t.select(0, 0).select(0, 0)));
  EXPECT_TRUE(at::equal(Cpu(out3), x[0][0] + t[0][0]));
  ASSERT_EQ(capture.seen.size(), 1u);
  EXPECT_NE(capture.seen[0].find("had shape [3]"), std::string::npos) << capture.seen[0];
}

TEST_F(DeviceTest, AllocationBeyondCapacityIsDeviceOom) {
  auto j = BaselineNoDefects();
  j["memory_bytes"] = 1 << 20;
  ActivateJson(j);
  auto small = at::empty({1024}, at::TensorOptions().device(SimDevice()));  // 4 KiB
  const int64_t before = SnapshotCounters().current_bytes;
  try {
    auto big = at::empty({1 << 19}, at::TensorOptions().device(SimDevice()));  // 2 MiB
    FAIL() << "expected OOM";
  } catch (const c10::Error& e) {
    EXPECT_EQ(ClassifyFault(e.what()), FaultKind::kOom) << e.what();
  }
  // The failed allocation left nothing behind; the device still works.
  EXPECT_EQ(SnapshotCounters().current_bytes, before);
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
  try {
    f.to(at::kDouble);
    FAIL() << "float64 was allocated on the device";
  } catch (const c10::Error& e) {
    EXPECT_EQ(ClassifyFault(e.what()), FaultKind::kUnsupportedDtype) << e.what();
  }
  EXPECT_EQ(ClassifyFault("shape mismatch"), FaultKind::kNone);
}

TEST_F(DeviceTest, ProfileNamingAnOpWithoutKernelIsRejected) {
  auto j = BaselineNoDefects();
  j["name"] = "sim-rejected";
  j["native_ops"].push_back("aten::fft_fft");
  auto r = Activate(j.dump());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("aten::fft_fft"), std::string::npos);
  // The previous profile stays active.
  EXPECT_EQ(ActiveProfile().name, "sim");
  // A kernel named without its overload is accepted.
  j = BaselineNoDefects();
  j["native_ops"].push_back("aten::pow");
  EXPECT_TRUE(Activate(j.dump()).ok());
}

// The op checker sees native and compiled device ops (never the fallback) with copies of their
// arguments from before the op ran, and may overwrite what the device returned.
TEST_F(DeviceTest, OpCheckerSeesDeviceOpsAndMaySubstituteResults) {
  auto x = at::randn({4, 8});
  std::vector<std::string> seen;
  at::Tensor seen_input;
  {
    ScopedOpChecker checker([&](DeviceOpCall& call) {
      seen.push_back(call.name + (call.mode == ExecMode::kCompiled ? "/compiled" : ""));
      if (call.name != "aten::add_.Tensor") return;
      seen_input = call.inputs[0].toTensor();
      ASSERT_EQ(call.results.size(), 1u);
      call.results[0].fill_(7);  // the device now returns 7s
    });
    auto d = Dev(x);
    auto g = at::gelu(d);              // native
    auto c = at::cumsum(d, 1);         // sim-2.0: fallback, not the device's arithmetic
    d.add_(at::ones_like(d));          // native, in place: the checker rewrites it
    EXPECT_TRUE(at::equal(Cpu(d), at::full({4, 8}, 7.0)));
    {
      ScopedExecMode compiled(ExecMode::kCompiled);
      auto c2 = at::cumsum(g, 1);      // lowered by the compiler: seen
    }
    EXPECT_TRUE(at::equal(Cpu(g), at::gelu(x)));
  }
  ASSERT_TRUE(seen_input.defined());
  EXPECT_EQ(seen_input.device(), at::Device(at::kCPU));
  EXPECT_TRUE(at::equal(seen_input, x)) << "inputs are copies from before the in-place op";
  EXPECT_EQ(seen, (std::vector<std::string>{"aten::gelu", "aten::add_.Tensor",
                                            "aten::cumsum/compiled"}));
  // Uninstalled: nothing is called.
  seen.clear();
  at::gelu(Dev(x));
  EXPECT_TRUE(seen.empty());
}

TEST_F(DeviceTest, DeclaredNumericsFollowTheKernelTable) {
  Numerics n;
  n.matmul = MatmulNumerics::kBf16;
  n.elementwise = Precision::kBf16;
  auto mm = DeclaredNumericsOf(n, "aten::mm", ExecMode::kEager);
  EXPECT_EQ(mm.rounded_args, (std::vector<std::string>{"self", "mat2"}));
  EXPECT_TRUE(mm.round_result);
  EXPECT_FALSE(DeclaredNumericsOf(n, "aten::mm", ExecMode::kCompiled).round_result);
  EXPECT_TRUE(DeclaredNumericsOf(n, "aten::gelu", ExecMode::kEager).round_result);
  EXPECT_FALSE(DeclaredNumericsOf(n, "aten::sum", ExecMode::kEager).round_result);
  EXPECT_TRUE(DeclaredNumericsOf(Numerics(), "aten::mm", ExecMode::kEager).rounded_args.empty());
  // No kernel: computed exactly, at the reduction tolerance.
  auto other = DeclaredNumericsOf(n, "aten::triu", ExecMode::kEager);
  EXPECT_TRUE(other.rounded_args.empty());
  EXPECT_FALSE(other.round_result);
  EXPECT_EQ(KernelTolerance("aten::relu"), 0.0);
  EXPECT_EQ(KernelTolerance("aten::gelu"), 1e-6);
  EXPECT_EQ(KernelTolerance("aten::triu"), 1e-5);
}

}  // namespace
}  // namespace ts::simdevice
