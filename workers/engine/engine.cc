#include "workers/engine/engine.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <exception>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "workers/engine/compare.h"
#include "workers/engine/compiler.h"
#include "workers/simdevice/runtime.h"
#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"

namespace ts::engine {
namespace {

using Clock = std::chrono::steady_clock;
using TensorList = std::vector<at::Tensor>;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The verdict text of a device fault: its first line, without the simulator's routing tag.
std::string FaultMessage(const std::string& what) {
  std::string msg = what.substr(0, what.find('\n'));
  if (msg.rfind("[simdevice:", 0) == 0) {
    auto close = msg.find("] ");
    if (close != std::string::npos) msg = msg.substr(close + 2);
  }
  return msg;
}

Verdict FaultStatus(const std::string& what) {
  switch (simdevice::ClassifyFault(what)) {
    case simdevice::FaultKind::kOom: return Verdict::kOom;
    case simdevice::FaultKind::kUnsupportedDtype: return Verdict::kUnsupportedDtype;
    case simdevice::FaultKind::kDeviceError:
    case simdevice::FaultKind::kNone: break;  // e.g. an op the backend cannot run at all
  }
  return Verdict::kDeviceError;
}

// Runs `fn`, turning exceptions into (status, error) on `mode`. Returns true if fn completed.
template <typename Fn>
bool Guarded(ModeResult& mode, Verdict on_plain_error, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    mode.status = simdevice::ClassifyFault(what) == simdevice::FaultKind::kNone &&
                          on_plain_error != Verdict::kDeviceError
                      ? on_plain_error
                      : FaultStatus(what);
    mode.error = FaultMessage(what);
  } catch (const std::exception& e) {
    mode.status = on_plain_error;
    mode.error = FaultMessage(e.what());
  }
  return false;
}

}  // namespace

zoo::TensorMap ToDevice(const zoo::TensorMap& m, const c10::Device& d, at::ScalarType float_type) {
  zoo::TensorMap out;
  for (const auto& [k, v] : m) {
    at::Tensor t = at::isFloatingType(v.scalar_type()) ? v.to(d, float_type) : v.to(d);
    out.emplace(k, t);
  }
  return out;
}

namespace {

TensorList ToCpu(const TensorList& ts) {
  TensorList out;
  for (const auto& t : ts) out.push_back(t.defined() ? t.detach().to(at::kCPU) : t);
  return out;
}

bool AllFinite(const TensorList& ts) {
  for (const auto& t : ts) {
    if (t.defined() && at::isFloatingType(t.scalar_type()) && !at::isfinite(t).all().item<bool>())
      return false;
  }
  return true;
}

bool BitwiseEqual(const TensorList& a, const TensorList& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return false;
  }
  return true;
}

void Accumulate(std::map<std::string, OpUse>& into, const std::map<std::string, simdevice::OpStats>& from) {
  for (const auto& [op, st] : from) {
    into[op].calls += st.calls;
    into[op].ms += st.ms;
  }
}

}  // namespace

std::vector<double> TrainLosses(const zoo::Model& model, const zoo::WeightMap& init,
                                const zoo::Batch& batch, const c10::Device& device, int steps,
                                double lr) {
  zoo::WeightMap w;
  for (const auto& [k, v] : init) {
    // copy=true: on the CPU, to() would alias `init` and the updates would corrupt it.
    w.emplace(k, v.to(device, v.scalar_type(), /*non_blocking=*/false, /*copy=*/true)
                     .detach()
                     .requires_grad_(true));
  }
  zoo::Batch b{ToDevice(batch.inputs, device), ToDevice(batch.labels, device)};
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    at::Tensor loss = model.Loss(w, b);
    losses.push_back(loss.detach().to(at::kCPU).item<double>());
    loss.backward();
    torch::NoGradGuard no_grad;
    for (auto& [k, p] : w) {
      if (!p.grad().defined()) continue;
      p.add_(p.grad(), -lr);
      p.mutable_grad().reset();
    }
  }
  return losses;
}

FlatForward Flatten(const zoo::Model& model, const zoo::WeightMap& weights,
                    const zoo::TensorMap& inputs) {
  FlatForward f;
  std::vector<std::string> weight_names, input_names;
  for (const auto& [k, v] : weights) {
    weight_names.push_back(k);
    f.flat.push_back(v);
  }
  for (const auto& [k, v] : inputs) {
    input_names.push_back(k);
    f.flat.push_back(v);
  }
  f.fn = [&model, weight_names, input_names](const TensorList& xs) {
    zoo::WeightMap w;
    zoo::TensorMap in;
    for (size_t i = 0; i < weight_names.size(); ++i) w.emplace(weight_names[i], xs[i]);
    for (size_t i = 0; i < input_names.size(); ++i) {
      in.emplace(input_names[i], xs[weight_names.size() + i]);
    }
    return model.Forward(w, in);
  };
  return f;
}

const std::set<std::string>& KnownModes() {
  static const std::set<std::string> kModes = {"eager", "compile", "train"};
  return kModes;
}

void ConfigureThreads(int n) {
  at::set_num_threads(n);
  // libtorch calls the system BLAS; OpenBLAS (scripts/setup installs it) keeps its own pool.
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(n);
  }
}

std::string ConfigHash(const nlohmann::json& config) {
  const std::string s = config.dump();
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

ModelResult RunModel(const nlohmann::json& config, const RunOptions& opts) {
  const auto t_total = Clock::now();
  ModelResult r;
  r.config_hash = ConfigHash(config);
  for (const auto& m : KnownModes()) r.modes[m] = ModeResult();
  auto stage = [&](const char* name) {
    if (opts.on_stage) opts.on_stage(name);
  };
  auto end_all = [&](Verdict s, const std::string& error) {
    for (auto& [name, m] : r.modes) {
      if (!opts.modes.count(name)) continue;
      m.status = s;
      m.error = error;
    }
  };
  const simdevice::ProfileInfo profile = simdevice::ActiveProfile();
  const bool bf16_numerics = profile.numerics.matmul != simdevice::MatmulNumerics::kFp32;
  // The declared numerics apply where the device runs an op natively; a fallback op is exact.
  zoo::Bf16MatmulOps emulated_ops;
  emulated_ops.linear = simdevice::OpListMatches(profile.native_ops, "aten::mm") ||
                        simdevice::OpListMatches(profile.native_ops, "aten::addmm");
  emulated_ops.batched = simdevice::OpListMatches(profile.native_ops, "aten::bmm");
  emulated_ops.conv = simdevice::OpListMatches(profile.native_ops, "aten::convolution");
  Tolerance tol;
  tol.multiplier = bf16_numerics ? 3.0 : 2.0;
  const c10::Device device = simdevice::SimDevice();

  // 1. Build.
  stage("build");
  auto t0 = Clock::now();
  zoo::BuildOptions bo;
  bo.arch = opts.arch;
  bo.task = opts.task;
  auto built = zoo::BuildModel(config, bo);
  if (!built.ok()) {
    r.arch = opts.arch.empty() && config.is_object() && config.contains("architectures") &&
                     config["architectures"].is_array() && !config["architectures"].empty() &&
                     config["architectures"][0].is_string()
                 ? config["architectures"][0].get<std::string>()
                 : opts.arch;
    r.task = opts.task;
    end_all(Verdict::kLoadFail, built.status().message());
    r.timings_ms["build"] = MsSince(t0);
    r.timings_ms["total"] = MsSince(t_total);
    return r;
  }
  const zoo::Model& model = **built;
  r.arch = model.spec().arch;
  r.task = model.spec().task;
  r.family = model.spec().family;
  r.tiny_config = model.spec().tiny_config;
  if (opts.on_built) {
    opts.on_built({{"arch", r.arch}, {"task", r.task}, {"family", r.family},
                   {"config_hash", r.config_hash}});
  }
  zoo::WeightMap weights;
  zoo::Batch batch;
  {
    ModeResult load;
    if (!Guarded(load, Verdict::kLoadFail, [&] {
          weights = model.InitWeights(opts.seed);
          batch = model.MakeBatch(opts.seed, opts.batch_size);
        })) {
      end_all(Verdict::kLoadFail, load.error);
      r.timings_ms["total"] = MsSince(t_total);
      return r;
    }
  }
  r.timings_ms["build"] = MsSince(t0);

  // 2. References: CPU fp32 twice, fp64 golden, CPU at the declared numerics.
  stage("reference");
  t0 = Clock::now();
  TensorList ref, ref2, golden, declared;
  {
    torch::NoGradGuard no_grad;
    ModeResult refmode;
    const bool ok = Guarded(refmode, Verdict::kRefFail, [&] {
      ref = model.Forward(weights, batch.inputs);
      ref2 = model.Forward(weights, batch.inputs);
      auto w64 = ToDevice(weights, at::kCPU, at::kDouble);
      auto in64 = ToDevice(batch.inputs, at::kCPU, at::kDouble);
      golden = model.Forward(w64, in64);
      if (bf16_numerics) {
        zoo::ScopedBf16MatmulEmulation emulate(emulated_ops);
        declared = model.Forward(weights, batch.inputs);
      } else {
        declared = ref;
      }
    });
    if (!ok) {
      end_all(Verdict::kRefFail, "reference: " + refmode.error);
      r.timings_ms["reference"] = MsSince(t0);
      r.timings_ms["total"] = MsSince(t_total);
      return r;
    }
    if (!AllFinite(ref) || !AllFinite(golden)) {
      end_all(Verdict::kRefFail, "reference: CPU outputs are not finite");
      r.timings_ms["total"] = MsSince(t_total);
      return r;
    }
    if (!BitwiseEqual(ref, ref2)) {
      end_all(Verdict::kRefNondeterministic, "reference: two CPU fp32 runs differ");
      r.timings_ms["total"] = MsSince(t_total);
      return r;
    }
  }
  r.timings_ms["reference"] = MsSince(t0);
  simdevice::Reseed(opts.seed);

  std::map<std::string, OpUse> native, fallback;
  auto collect = [&](bool coverage) {
    auto c = simdevice::SnapshotCounters();
    r.peak_device_bytes = std::max(r.peak_device_bytes, c.peak_bytes);
    if (coverage) {
      Accumulate(native, c.native);
      Accumulate(fallback, c.fallback);
    }
  };
  auto judge = [&](ModeResult& m, const TensorList& out) {
    m.accuracy = CompareOutputs(out, ref, golden, declared, tol);
    if (AccuracyPasses(*m.accuracy, tol)) {
      m.status = Verdict::kPass;
    } else {
      m.status = Verdict::kFailAccuracy;
      m.error = DescribeFailure(*m.accuracy, tol);
    }
  };

  // 3. Eager on the device.
  if (opts.modes.count("eager")) {
    stage("eager");
    t0 = Clock::now();
    simdevice::ResetCounters();
    ModeResult& m = r.modes["eager"];
    TensorList out;
    if (Guarded(m, Verdict::kDeviceError, [&] {
          torch::NoGradGuard no_grad;
          auto wd = ToDevice(weights, device);
          auto in = ToDevice(batch.inputs, device);
          out = ToCpu(model.Forward(wd, in));
        })) {
      judge(m, out);
    }
    collect(true);
    m.ms = MsSince(t0);
    r.timings_ms["eager"] = m.ms;
  }

  // 4. Compiled on the device.
  if (opts.modes.count("compile")) {
    stage("compile");
    t0 = Clock::now();
    simdevice::ResetCounters();
    ModeResult& m = r.modes["compile"];
    auto [flat, fn] = Flatten(model, weights, batch.inputs);
    auto graph = TraceToGraph(fn, flat);
    if (!graph.ok()) {
      m.status = Verdict::kCompileFail;
      m.error = "trace: " + graph.status().message();
    } else {
      CompileReport report;
      auto compiled = CompiledGraph::Compile(*graph, profile, flat, &report);
      m.graph_breaks = report.graph_breaks;
      m.break_reasons = report.break_reasons;
      m.device_segments = report.device_segments;
      m.graph_nodes = report.graph_nodes;
      m.compile_ms = report.simulated_compile_ms;
      m.compile_wall_ms = report.wall_compile_ms;
      if (!compiled.ok()) {
        m.status = compiled.status().code() == StatusCode::kDeadlineExceeded
                       ? Verdict::kCompileTimeout
                       : Verdict::kCompileFail;
        m.error = compiled.status().message();
      } else {
        TensorList out;
        const auto t_run = Clock::now();
        if (Guarded(m, Verdict::kDeviceError, [&] {
              torch::NoGradGuard no_grad;
              out = (*compiled)->Run(flat);
            })) {
          m.first_run_ms = MsSince(t_run);
          judge(m, out);
        }
      }
    }
    collect(false);
    m.ms = MsSince(t0);
    r.timings_ms["compile"] = m.ms;
  }

  // 5. K-step training: reference (fp32 CPU), the reference at declared numerics, the device.
  if (opts.modes.count("train")) {
    stage("train");
    t0 = Clock::now();
    ModeResult& m = r.modes["train"];
    bool ref_ok = Guarded(m, Verdict::kRefFail, [&] {
      auto t_sub = Clock::now();
      m.loss_reference = TrainLosses(model, weights, batch, at::kCPU, opts.train_steps, opts.learning_rate);
      r.timings_ms["train_reference"] = MsSince(t_sub);
      if (bf16_numerics) {
        t_sub = Clock::now();
        zoo::ScopedBf16MatmulEmulation emulate(emulated_ops);
        auto declared_losses =
            TrainLosses(model, weights, batch, at::kCPU, opts.train_steps, opts.learning_rate);
        m.loss_band = declared_losses;  // temporarily: the declared-numerics curve
        r.timings_ms["train_declared"] = MsSince(t_sub);
      } else {
        m.loss_band = m.loss_reference;
      }
    });
    if (ref_ok) {
      for (double l : m.loss_reference) {
        if (!std::isfinite(l)) {
          ref_ok = false;
          m.status = Verdict::kRefFail;
          m.error = "reference training loss is not finite";
        }
      }
    }
    if (ref_ok) {
      const std::vector<double> declared_losses = m.loss_band;
      m.loss_declared = declared_losses;
      m.loss_band.clear();
      simdevice::ResetCounters();
      simdevice::Reseed(opts.seed + 1);
      const auto t_sub = Clock::now();
      const bool device_ok = Guarded(m, Verdict::kDeviceError, [&] {
        m.loss_device = TrainLosses(model, weights, batch, device, opts.train_steps, opts.learning_rate);
      });
      r.timings_ms["train_device"] = MsSince(t_sub);
      if (device_ok) {
        auto v = CompareLossCurves(m.loss_device, m.loss_reference, declared_losses, tol);
        m.loss_band = v.band;
        m.max_loss_gap_ratio = v.max_gap_ratio;
        m.status = v.pass ? Verdict::kPass : Verdict::kFailAccuracy;
        m.error = v.error;
      }
      collect(true);
    }
    m.ms = MsSince(t0);
    r.timings_ms["train"] = m.ms;
  }

  r.native_ops = native;
  r.fallback_ops = fallback;
  int64_t native_calls = 0, all_calls = 0;
  std::set<std::string> distinct;
  for (const auto& [op, u] : native) {
    distinct.insert(op);
    native_calls += u.calls;
    all_calls += u.calls;
  }
  for (const auto& [op, u] : fallback) {
    distinct.insert(op);
    all_calls += u.calls;
  }
  r.op_coverage.distinct_ops = static_cast<int>(distinct.size());
  r.op_coverage.native_ops = static_cast<int>(native.size());
  r.op_coverage.ratio = distinct.empty() ? 0.0 : static_cast<double>(native.size()) / distinct.size();
  r.op_coverage.call_ratio = all_calls == 0 ? 0.0 : static_cast<double>(native_calls) / all_calls;
  r.timings_ms["total"] = MsSince(t_total);
  return r;
}

}  // namespace ts::engine
