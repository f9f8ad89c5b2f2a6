#include "workers/engine/stages_internal.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <utility>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "workers/engine/compiler.h"
#include "workers/engine/op_audit.h"
#include "workers/simdevice/runtime.h"
#include "workers/zoo/config.h"
#include "workers/zoo/config_hash.h"
#include "workers/zoo/safetensors.h"

namespace ts::engine::internal {
namespace {

using Clock = std::chrono::steady_clock;

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

void Accumulate(std::map<std::string, OpUse>& into,
                const std::map<std::string, simdevice::OpStats>& from) {
  for (const auto& [op, st] : from) {
    into[op].calls += st.calls;
    into[op].ms += st.ms;
  }
}

// Ends every requested mode with `status`: the model cannot go further.
void EndAllModes(StageContext& ctx, Verdict status, const std::string& error) {
  for (auto& [name, m] : ctx.result.modes) {
    if (!ctx.opts.modes.count(name)) continue;
    m.status = status;
    m.error = error;
  }
}

// Peak device memory, and (for the stages that count towards coverage) op use since the last
// ResetCounters.
void CollectCounters(StageContext& ctx, bool coverage) {
  auto c = simdevice::SnapshotCounters();
  ctx.result.peak_device_bytes = std::max(ctx.result.peak_device_bytes, c.peak_bytes);
  if (!coverage) return;
  Accumulate(ctx.native, c.native);
  Accumulate(ctx.fallback, c.fallback);
}

// The accuracy verdict of device outputs against the references.
void Judge(const StageContext& ctx, ModeResult& m, const TensorList& out) {
  JudgeExternal(ctx, m, out);  // references from elsewhere, when stored (references.h)
  m.accuracy = CompareOutputs(out, ctx.ref, ctx.golden, ctx.declared, ctx.tol);
  if (AccuracyPasses(*m.accuracy, ctx.tol)) {
    m.status = Verdict::kPass;
    return;
  }
  m.status = Verdict::kFailAccuracy;
  m.error = DescribeFailure(*m.accuracy, ctx.tol);
}

// The device RNG seeds of the modes' device runs (and of their replays, which must draw the
// same flaky defects): eager `seed`, train `seed + 1`, compile `seed + 2`.
uint64_t ModeSeed(const StageContext& ctx, const char* mode) {
  const std::string m = mode;
  return ctx.opts.seed + (m == "train" ? 1 : m == "compile" ? 2 : 0);
}

// A mode is replayed op by op when its numbers are wrong, and, with the op audit, when it passes.
bool NeedsAudit(const StageContext& ctx, const ModeResult& m) {
  return m.status == Verdict::kFailAccuracy ||
         (ctx.opts.audit_ops && m.status == Verdict::kPass);
}

// Replays a mode op by op (op_audit.h) into m.suspects and m.unchecked. Runs after the mode's
// counters were collected: the replay counts towards neither coverage nor the mode's time.
void Audit(StageContext& ctx, ModeResult& m, const char* mode,
           const std::function<void()>& replay) {
  if (!NeedsAudit(ctx, m)) return;
  const auto t0 = Clock::now();
  simdevice::Reseed(ModeSeed(ctx, mode));
  ReplayFindings found = ReplayOpByOp(ctx.profile.numerics, replay);
  m.suspects = std::move(found.suspects);
  m.unchecked = std::move(found.unchecked);
  m.audited = true;
  simdevice::ResetCounters();
  ctx.result.timings_ms[std::string("audit_") + mode] = MsSince(t0);
}

// ---- The stages.

// 1. The model from the config (tiny scaling), seeded weights and the task's batch.
StageEnd Build(StageContext& ctx) {
  const auto t0 = Clock::now();
  ModelResult& r = ctx.result;
  zoo::BuildOptions bo;
  bo.arch = ctx.opts.arch;
  bo.task = ctx.opts.task;
  bo.tiny = ctx.opts.checkpoint_dir.empty();  // a checkpoint runs at its own size
  auto built = zoo::BuildModel(ctx.config, bo);
  if (!built.ok()) {
    // Not built: the architecture the run named, else the config's.
    r.arch = ctx.opts.arch.empty() ? zoo::ArchOf(ctx.config) : ctx.opts.arch;
    r.task = ctx.opts.task;
    EndAllModes(ctx, Verdict::kLoadFail, built.status().message());
    r.timings_ms["build"] = MsSince(t0);
    return StageEnd::kStopModel;
  }
  ctx.model = std::move(*built);
  const zoo::ModelSpec& spec = ctx.model->spec();
  r.arch = spec.arch;
  r.task = spec.task;
  r.family = spec.family;
  r.tiny_config = spec.tiny_config;
  if (ctx.opts.on_built) {
    ctx.opts.on_built({{"arch", r.arch}, {"task", r.task}, {"family", r.family},
                       {"config_hash", r.config_hash}});
  }
  if (!ctx.opts.checkpoint_dir.empty()) {
    auto ckpt = zoo::ReadCheckpoint(ctx.opts.checkpoint_dir);
    StatusOr<zoo::WeightMap> w = ckpt.status();
    if (ckpt.ok()) w = zoo::WeightsFromCheckpoint(*ctx.model, *ckpt);
    if (!w.ok()) {
      EndAllModes(ctx, Verdict::kLoadFail, ctx.opts.checkpoint_dir + ": " + w.status().message());
      return StageEnd::kStopModel;
    }
    ctx.weights = std::move(*w);
  }
  ModeResult load;
  if (!Guarded(load, Verdict::kLoadFail, [&] {
        if (ctx.opts.checkpoint_dir.empty()) ctx.weights = ModelWeights(*ctx.model, ctx.opts);
        ctx.batch = ctx.model->MakeBatch(ctx.opts.seed, ctx.opts.batch_size);
      })) {
    EndAllModes(ctx, Verdict::kLoadFail, load.error);
    return StageEnd::kStopModel;  // no "build" timing on this path
  }
  r.timings_ms["build"] = MsSince(t0);
  return StageEnd::kContinue;
}

// 2. CPU fp32 twice, fp64 golden, CPU at the declared numerics. Ends every mode with ref_fail
// or ref_nondeterministic when the references cannot be trusted.
StageEnd Reference(StageContext& ctx) {
  const auto t0 = Clock::now();
  const zoo::Model& model = *ctx.model;
  torch::NoGradGuard no_grad;
  TensorList ref2;
  ModeResult refmode;
  const bool ok = Guarded(refmode, Verdict::kRefFail, [&] {
    ctx.ref = model.Forward(ctx.weights, ctx.batch.inputs);
    ref2 = model.Forward(ctx.weights, ctx.batch.inputs);
    auto w64 = ToDevice(ctx.weights, at::kCPU, at::kDouble);
    auto in64 = ToDevice(ctx.batch.inputs, at::kCPU, at::kDouble);
    ctx.golden = model.Forward(w64, in64);
    if (!ctx.bf16_numerics) {
      ctx.declared = ctx.ref;
      return;
    }
    zoo::ScopedBf16MatmulEmulation emulate(ctx.emulated_ops);
    ctx.declared = model.Forward(ctx.weights, ctx.batch.inputs);
  });
  if (!ok) {
    EndAllModes(ctx, Verdict::kRefFail, "reference: " + refmode.error);
    ctx.result.timings_ms["reference"] = MsSince(t0);
    return StageEnd::kStopModel;
  }
  if (!AllFinite(ctx.ref) || !AllFinite(ctx.golden)) {
    EndAllModes(ctx, Verdict::kRefFail, "reference: CPU outputs are not finite");
    return StageEnd::kStopModel;
  }
  if (!BitwiseEqual(ctx.ref, ref2)) {
    EndAllModes(ctx, Verdict::kRefNondeterministic, "reference: two CPU fp32 runs differ");
    return StageEnd::kStopModel;
  }
  // The fp64 and declared references as a bundle stores them, so that a run judged from a
  // bundle is judged as this one is (refs::AsStored: within 0.4% of their noise).
  for (size_t i = 0; i < ctx.ref.size(); ++i) {
    if (i < ctx.golden.size()) ctx.golden[i] = refs::AsStored(ctx.golden[i], ctx.ref[i]);
    if (ctx.bf16_numerics && i < ctx.declared.size()) {
      ctx.declared[i] = refs::AsStored(ctx.declared[i], ctx.ref[i]);
    }
  }
  ctx.result.timings_ms["reference"] = MsSince(t0);
  simdevice::Reseed(ctx.opts.seed);  // the device stages draw from the model's seed
  return StageEnd::kContinue;
}

// 2, with bundles: the references from a stored bundle when there is one, else computed as
// above and recorded for storing (references.h).
StageEnd ReferenceOrBundle(StageContext& ctx) {
  const auto t0 = Clock::now();
  if (auto end = ForwardFromBundle(ctx)) {
    if (*end == StageEnd::kContinue) LoadExternal(ctx);
    ctx.result.timings_ms["reference"] = MsSince(t0);
    if (*end == StageEnd::kContinue) simdevice::Reseed(ctx.opts.seed);
    return *end;
  }
  const StageEnd end = Reference(ctx);
  RecordForward(ctx, end);
  if (end == StageEnd::kContinue) LoadExternal(ctx);
  return end;
}

// The mode's performance record when it passed: what the clock measured, and the device memory
// peak since the last ResetCounters. None when the clock measured nothing (it is off).
void KeepPerf(ModeResult& m, const simdevice::PerfCounters& measured) {
  if (m.status != Verdict::kPass || !(measured.device_us > 0)) return;
  m.perf = PerfOf(measured, simdevice::SnapshotCounters().peak_bytes);
}

// 3. Forward on the device, compared with the references.
StageEnd Eager(StageContext& ctx) {
  const auto t0 = Clock::now();
  simdevice::ResetCounters();
  ModeResult& m = ctx.result.modes["eager"];
  TensorList out;
  simdevice::PerfCounters measured;
  if (Guarded(m, Verdict::kDeviceError, [&] {
        torch::NoGradGuard no_grad;
        auto wd = ToDevice(ctx.weights, ctx.device);
        auto in = ToDevice(ctx.batch.inputs, ctx.device);
        // The step is the forward: weights and inputs are staged first, outputs read after.
        simdevice::DeviceClock& clock = simdevice::ActiveClock();
        clock.Reset();
        TensorList device_out = ctx.model->Forward(wd, in);
        measured = clock.Snapshot();
        out = ToCpu(device_out);
      })) {
    Judge(ctx, m, out);
    KeepPerf(m, measured);
  }
  CollectCounters(ctx, /*coverage=*/true);
  m.ms = MsSince(t0);
  ctx.result.timings_ms["eager"] = m.ms;
  Audit(ctx, m, "eager", [&] {
    torch::NoGradGuard no_grad;
    ctx.model->Forward(ToDevice(ctx.weights, ctx.device), ToDevice(ctx.batch.inputs, ctx.device));
  });
  return StageEnd::kContinue;
}

// Compiles the traced graph and runs it on the device; fills `m`. Returns the compiled graph
// when it ran (for the replay), else nullptr.
std::unique_ptr<CompiledGraph> CompileAndRun(StageContext& ctx,
                                             const std::shared_ptr<torch::jit::Graph>& graph,
                                             const TensorList& flat, ModeResult& m) {
  CompileReport report;
  auto compiled = CompiledGraph::Compile(graph, ctx.profile, flat, &report);
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
    return nullptr;
  }
  TensorList out;
  const auto t_run = Clock::now();
  simdevice::PerfCounters measured;
  if (!Guarded(m, Verdict::kDeviceError, [&] {
        torch::NoGradGuard no_grad;
        simdevice::DeviceClock& clock = simdevice::ActiveClock();
        clock.Reset();  // Run pauses the clock while it stages inputs and reads outputs
        out = (*compiled)->Run(flat);
        measured = clock.Snapshot();
      })) {
    return nullptr;
  }
  m.first_run_ms = MsSince(t_run);
  Judge(ctx, m, out);
  KeepPerf(m, measured);
  return std::move(*compiled);
}

// 4. Trace, partition, simulated compile, run on the device, compare (COMPILER.md).
StageEnd Compile(StageContext& ctx) {
  const auto t0 = Clock::now();
  simdevice::ResetCounters();
  simdevice::Reseed(ModeSeed(ctx, "compile"));
  ModeResult& m = ctx.result.modes["compile"];
  auto [flat, fn] = Flatten(*ctx.model, ctx.weights, ctx.batch.inputs);
  auto graph = TraceToGraph(fn, flat);
  std::unique_ptr<CompiledGraph> compiled;
  if (graph.ok()) {
    compiled = CompileAndRun(ctx, *graph, flat, m);
  } else {
    m.status = Verdict::kCompileFail;
    m.error = "trace: " + graph.status().message();
  }
  CollectCounters(ctx, /*coverage=*/false);
  SetCompileRatios(ctx.result);
  m.ms = MsSince(t0);
  ctx.result.timings_ms["compile"] = m.ms;
  if (compiled) {
    Audit(ctx, m, "compile", [&] {
      torch::NoGradGuard no_grad;
      compiled->Run(flat);
    });
  }
  return StageEnd::kContinue;
}

// The first training step's gradients: CPU fp32, fp64 golden, at the declared numerics.
struct ReferenceGrads {
  zoo::WeightMap fp32, golden, declared;
};

// The reference loss curves of training: CPU fp32 into m.loss_reference, and the curve at the
// declared numerics into `declared`; the first step's fp32 and declared gradients into `grads`
// (the fp64 ones come later, when needed: GoldenGradients). False (with m's status and error)
// when they fail.
bool TrainReferences(StageContext& ctx, ModeResult& m, std::vector<double>& declared,
                     ReferenceGrads& grads) {
  const RunOptions& o = ctx.opts;
  const bool ok = Guarded(m, Verdict::kRefFail, [&] {
    auto t_sub = Clock::now();
    m.loss_reference = TrainLosses(*ctx.model, ctx.weights, ctx.batch, at::kCPU, o.train_steps,
                                   o.learning_rate, &grads.fp32);
    ctx.result.timings_ms["train_reference"] = MsSince(t_sub);
    if (!ctx.bf16_numerics) {
      declared = m.loss_reference;
      grads.declared = grads.fp32;
      return;
    }
    t_sub = Clock::now();
    zoo::ScopedBf16MatmulEmulation emulate(ctx.emulated_ops);
    declared = TrainLosses(*ctx.model, ctx.weights, ctx.batch, at::kCPU, o.train_steps,
                           o.learning_rate, &grads.declared);
    ctx.result.timings_ms["train_declared"] = MsSince(t_sub);
  });
  if (!ok) return false;
  for (double l : m.loss_reference) {
    if (std::isfinite(l)) continue;
    m.status = Verdict::kRefFail;
    m.error = "reference training loss is not finite";
    m.loss_band = declared;  // the record has always carried the declared curve here
    return false;
  }
  return true;
}

// The first step's gradients in fp64 on the CPU into refs.golden (one extra forward and
// backward). A model that cannot take an fp64 step has no gradient reference: a device gradient
// that differs from the declared numerics' is then unjudged, which JudgeTraining reports.
void GoldenGradients(StageContext& ctx, ReferenceGrads& refs) {
  if (GoldenFromBundle(ctx, refs.golden)) return;
  const auto t0 = Clock::now();
  try {
    refs.golden = StepGradients(*ctx.model, ctx.weights, ctx.batch, at::kCPU, at::kDouble);
  } catch (const std::exception&) {
    refs.golden.clear();
  }
  for (auto& [p, g] : refs.golden) {  // as a bundle stores them (refs::AsStored)
    auto anchor = refs.fp32.find(p);
    if (anchor != refs.fp32.end()) g = refs::AsStored(g, anchor->second);
  }
  ctx.result.timings_ms["train_golden_grads"] = MsSince(t0);
  RecordGolden(ctx, refs.golden);
}

// train's references from a stored bundle when there is one, else computed and recorded.
bool TrainReferencesOrBundle(StageContext& ctx, ModeResult& m, std::vector<double>& declared,
                             ReferenceGrads& refs) {
  if (auto ok = TrainFromBundle(ctx, m, declared, refs.fp32, refs.declared)) return *ok;
  const bool ok = TrainReferences(ctx, m, declared, refs);
  RecordTrain(ctx, m, ok, declared, refs.fp32, refs.declared);
  return ok;
}

// The train verdict from the loss curves and the first step's gradients. The fp64 gradients
// are computed only when a device gradient differs from the declared numerics' (CompareGradients
// asks for them then; an exact one passes at ratio 1 whatever they hold).
void JudgeTraining(StageContext& ctx, ModeResult& m, const std::vector<double>& declared,
                   ReferenceGrads& refs, const zoo::WeightMap& device_grads) {
  if (!GradientsForJudge(ctx, device_grads, refs.declared)) {
    // A stored bundle lacks a gradient this device needs read in full (references.h).
    std::vector<double> again;
    const bool ok = TrainReferences(ctx, m, again, refs);
    RecordTrain(ctx, m, ok, again, refs.fp32, refs.declared);
    if (!ok) return;
    GradientsForJudge(ctx, device_grads, refs.declared);
  }
  // The declared gradients the judge reads in full, as a bundle stores them (refs::AsStored);
  // one equal to the device's bit for bit stays as it is: that equality is what is judged.
  zoo::WeightMap declared_for_judge = refs.declared;
  if (ctx.bf16_numerics) {
    for (const std::string& p : ctx.references.differing) {  // GradientsForJudge's
      auto g = declared_for_judge.find(p);
      auto anchor = refs.fp32.find(p);
      if (g == declared_for_judge.end() || !g->second.defined() || anchor == refs.fp32.end()) {
        continue;
      }
      g->second = refs::AsStored(g->second, anchor->second);
    }
  }
  auto v = CompareLossCurves(m.loss_device, m.loss_reference, declared, ctx.tol);
  m.loss_band = v.band;
  m.max_loss_gap_ratio = v.max_gap_ratio;
  m.status = v.pass ? Verdict::kPass : Verdict::kFailAccuracy;
  m.error = v.error;
  const auto t0 = Clock::now();
  auto golden = [&]() -> const zoo::WeightMap& {
    GoldenGradients(ctx, refs);
    return refs.golden;
  };
  auto g = CompareGradients(device_grads, refs.fp32, golden, declared_for_judge, ctx.tol);
  auto& timings = ctx.result.timings_ms;  // the comparison's own time, without the fp64 step
  timings["train_grad_check"] =
      MsSince(t0) - (timings.count("train_golden_grads") ? timings["train_golden_grads"] : 0.0);
  if (g.judged > 0) m.grad_rmse_ratio = g.worst_ratio;
  m.grad_worst_param = g.worst_param;
  ApplyGradientVerdict(g, &m.status, &m.error);
}

// 5. K steps of SGD on a fixed batch: reference curves and first-step gradients on CPU, then the
// device's, compared.
StageEnd Train(StageContext& ctx) {
  const auto t0 = Clock::now();
  ModeResult& m = ctx.result.modes["train"];
  std::vector<double> declared;
  ReferenceGrads refs;
  if (TrainReferencesOrBundle(ctx, m, declared, refs)) {
    m.loss_declared = declared;
    simdevice::ResetCounters();
    simdevice::Reseed(ModeSeed(ctx, "train"));
    const auto t_sub = Clock::now();
    zoo::WeightMap device_grads;
    // The clock measures one step: the second when there is one (the first also copies its
    // gradients out for the gradient check).
    const int timed_step = ctx.opts.train_steps >= 2 ? 1 : 0;
    simdevice::DeviceClock& clock = simdevice::ActiveClock();
    simdevice::PerfCounters measured;
    auto on_step = [&](int step) {
      if (step == timed_step) clock.Reset();
      if (step == timed_step + 1) measured = clock.Snapshot();
    };
    const bool device_ok = Guarded(m, Verdict::kDeviceError, [&] {
      m.loss_device =
          TrainLosses(*ctx.model, ctx.weights, ctx.batch, ctx.device, ctx.opts.train_steps,
                      ctx.opts.learning_rate, &device_grads, on_step);
    });
    ctx.result.timings_ms["train_device"] = MsSince(t_sub);
    if (device_ok) {
      JudgeTraining(ctx, m, declared, refs, device_grads);
      KeepPerf(m, measured);
    }
    JudgeExternalTraining(ctx, m);
    CollectCounters(ctx, /*coverage=*/true);
  }
  m.ms = MsSince(t0);
  ctx.result.timings_ms["train"] = m.ms;
  Audit(ctx, m, "train", [&] {  // the first step's forward and backward
    StepGradients(*ctx.model, ctx.weights, ctx.batch, ctx.device, at::kFloat);
  });
  return StageEnd::kContinue;
}

}  // namespace

StageContext::StageContext(const nlohmann::json& config_in, const RunOptions& opts_in)
    : config(config_in), opts(opts_in), device(simdevice::SimDevice()) {
  result.config_hash = zoo::ConfigHash(config);
  for (const auto& m : KnownModes()) result.modes[m] = ModeResult();
  profile = simdevice::ActiveProfile();
  bf16_numerics = profile.numerics.matmul != simdevice::MatmulNumerics::kFp32;
  // The declared numerics apply where the device runs an op natively; a fallback op is exact.
  emulated_ops.linear = simdevice::OpListMatches(profile.native_ops, "aten::mm") ||
                        simdevice::OpListMatches(profile.native_ops, "aten::addmm");
  emulated_ops.batched = simdevice::OpListMatches(profile.native_ops, "aten::bmm");
  emulated_ops.conv = simdevice::OpListMatches(profile.native_ops, "aten::convolution");
  tol.multiplier = bf16_numerics ? 3.0 : 2.0;
}

const std::vector<Stage>& Stages() {
  static const std::vector<Stage> kStages = {
      {"build", nullptr, &Build},       {"reference", nullptr, &ReferenceOrBundle},
      {"eager", "eager", &Eager},       {"compile", "compile", &Compile},
      {"train", "train", &Train},
  };
  return kStages;
}

void SummarizeCoverage(StageContext& ctx) {
  ModelResult& r = ctx.result;
  r.native_ops = ctx.native;
  r.fallback_ops = ctx.fallback;
  int64_t native_calls = 0, all_calls = 0;
  std::set<std::string> distinct;
  for (const auto& [op, u] : ctx.native) {
    distinct.insert(op);
    native_calls += u.calls;
    all_calls += u.calls;
  }
  for (const auto& [op, u] : ctx.fallback) {
    distinct.insert(op);
    all_calls += u.calls;
  }
  r.op_coverage.distinct_ops = static_cast<int>(distinct.size());
  r.op_coverage.native_ops = static_cast<int>(ctx.native.size());
  r.op_coverage.ratio =
      distinct.empty() ? 0.0 : static_cast<double>(ctx.native.size()) / distinct.size();
  r.op_coverage.call_ratio =
      all_calls == 0 ? 0.0 : static_cast<double>(native_calls) / all_calls;
}

}  // namespace ts::engine::internal
