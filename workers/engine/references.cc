// Reference bundles in the engine (references.h).
#include "workers/engine/references.h"

#include <algorithm>
#include <set>
#include <utility>

#include <ATen/ATen.h>

#include "workers/engine/stages_internal.h"
#include "workers/refs/zoo_version.h"

namespace ts::engine::internal {
namespace {

// The declared numerics the "declared" references emulate: the zoo's bf16 rounding of matmul
// inputs on the op classes the device runs natively, or none.
std::string NumericsName(const StageContext& ctx) {
  if (!ctx.bf16_numerics) return "fp32";
  std::string classes;
  for (const auto& [on, name] :
       {std::pair{ctx.emulated_ops.linear, "linear"},
        std::pair{ctx.emulated_ops.batched, "batched"}, std::pair{ctx.emulated_ops.conv, "conv"}}) {
    if (on) classes += (classes.empty() ? "" : ",") + std::string(name);
  }
  return "bf16_matmul_inputs:" + classes;
}

void Refuse(StageContext& ctx, const std::string& why) {
  ctx.result.references.warning = "stored reference bundle refused (" + why + "); recomputed";
  ctx.references.stored.reset();
}

// Loads and checks the stored bundle of the run's key into ctx.references.stored.
void LoadStored(StageContext& ctx) {
  ReferenceState& st = ctx.references;
  auto stored = ctx.opts.references.load(st.key);
  if (!stored.ok()) {
    if (stored.status().code() != StatusCode::kNotFound) Refuse(ctx, stored.status().message());
    return;
  }
  auto bundle = refs::DecodeBundle(stored->bytes);
  if (!bundle.ok()) return Refuse(ctx, bundle.status().message());
  const std::string differs = refs::FirstDifference(bundle->key, st.key);
  if (!differs.empty()) return Refuse(ctx, "it holds the references of another key: " + differs);
  if (!bundle->forward) return Refuse(ctx, "it has no forward references");
  if (ctx.opts.modes.count("train") && bundle->forward->outcome.ok() && !bundle->train) {
    return Refuse(ctx, "it has no training references");
  }
  st.stored = std::move(*bundle);
  ctx.result.references.content_digest = stored->content_digest;
}

StatusOr<Verdict> OutcomeVerdict(const refs::PartOutcome& o) {
  auto v = VerdictFromName(o.status);
  if (!v || (*v != Verdict::kRefFail && *v != Verdict::kRefNondeterministic)) {
    return InvalidArgumentError("status '" + o.status + "' is not a reference verdict");
  }
  return *v;
}

}  // namespace

refs::BundleKey ReferenceKey(const StageContext& ctx) {
  refs::BundleKey k;
  k.model_id = ctx.opts.model_id;
  k.config_hash = ctx.result.config_hash;
  k.arch = ctx.result.arch;
  k.task = ctx.result.task;
  k.weights_seed = ctx.opts.seed;  // ModelWeights
  k.batch_seed = ctx.opts.seed;    // Model::MakeBatch
  k.batch_size = ctx.opts.batch_size;
  k.train_steps = ctx.opts.train_steps;
  k.learning_rate = ctx.opts.learning_rate;
  // "reference" runs whatever the modes; train adds its own.
  k.modes = {refs::kForwardPart};
  if (ctx.opts.modes.count("train")) k.modes.push_back(refs::kTrainPart);
  k.zoo_version = refs::ZooVersion();
  k.torch_version = refs::TorchVersion();  // = TORCH_VERSION (ReferencesTest checks)
  k.device = refs::kCpuDevice;
  k.dtype = "float32";
  k.numerics = NumericsName(ctx);
  return k;
}

std::optional<StageEnd> ForwardFromBundle(StageContext& ctx) {
  ReferenceState& st = ctx.references;
  // A checkpoint's weights are not in the key; without a store nothing is kept.
  st.keyed = ctx.opts.checkpoint_dir.empty() && ctx.opts.references.save;
  ctx.result.references.source = "fresh";
  if (!st.keyed) return std::nullopt;
  st.key = ReferenceKey(ctx);
  st.computed.key = st.key;
  st.computed.provenance = {{"producer", "touchstone engine"}};
  ctx.result.references.key_digest = refs::KeyDigest(st.key);
  if (ctx.opts.references.load) LoadStored(ctx);
  if (!st.stored) return std::nullopt;
  const refs::ForwardReferences& f = *st.stored->forward;
  if (!f.outcome.ok()) {
    auto v = OutcomeVerdict(f.outcome);
    if (!v.ok()) {
      Refuse(ctx, "forward: " + v.status().message());
      return std::nullopt;
    }
    for (auto& [name, m] : ctx.result.modes) {
      if (!ctx.opts.modes.count(name)) continue;
      m.status = *v;
      m.error = f.outcome.error;
    }
    return StageEnd::kStopModel;
  }
  ctx.ref = f.outputs;
  ctx.golden = f.golden;
  ctx.declared = f.declared.empty() ? f.outputs : f.declared;
  return StageEnd::kContinue;
}

void RecordForward(StageContext& ctx, StageEnd end) {
  if (!ctx.references.keyed) return;
  refs::ForwardReferences f;
  if (end == StageEnd::kStopModel) {
    // The stage ended every requested mode with one verdict: keep it, not the tensors.
    for (const auto& [name, m] : ctx.result.modes) {
      if (!ctx.opts.modes.count(name)) continue;
      f.outcome = {VerdictName(m.status), m.error};
      break;
    }
  } else {
    f.outputs = ctx.ref;
    f.golden = ctx.golden;
    if (ctx.bf16_numerics) f.declared = ctx.declared;
  }
  ctx.references.computed.forward = std::move(f);
}

std::optional<bool> TrainFromBundle(StageContext& ctx, ModeResult& m, std::vector<double>& declared,
                                    zoo::WeightMap& grads, zoo::WeightMap& grads_declared) {
  ReferenceState& st = ctx.references;
  if (!st.stored) return std::nullopt;
  const refs::TrainReferences& t = *st.stored->train;
  if (!t.outcome.ok()) {
    auto v = OutcomeVerdict(t.outcome);
    if (!v.ok()) return std::nullopt;  // not reached for bundles this engine wrote
    m.status = *v;
    m.error = t.outcome.error;
    m.loss_reference = t.loss_reference;
    m.loss_band = t.loss_band;
    return false;
  }
  m.loss_reference = t.loss_reference;
  declared = t.loss_declared;
  // The parameters held in full; GradientsForJudge adds the others once the device has run.
  grads = t.grads;
  grads_declared = t.declared_is_reference ? t.grads : t.grads_declared;
  return true;
}

void RecordTrain(StageContext& ctx, const ModeResult& m, bool ok,
                 const std::vector<double>& declared, const zoo::WeightMap& grads,
                 const zoo::WeightMap& grads_declared) {
  ReferenceState& st = ctx.references;
  if (!st.keyed) return;
  refs::TrainReferences t;
  t.loss_reference = m.loss_reference;
  if (!ok) {
    t.outcome = {VerdictName(m.status), m.error};
    t.loss_band = m.loss_band;
  } else {
    // Every gradient in full for now: FinishReferences keeps those the judge read in full.
    t.loss_declared = declared;
    t.grads = grads;
    t.declared_is_reference = !ctx.bf16_numerics;
    if (ctx.bf16_numerics) t.grads_declared = grads_declared;
    for (const auto& [p, g] : grads_declared) {
      if (g.defined()) t.declared_digests[p] = refs::TensorDigest(g);
    }
  }
  if (st.stored) st.completed = true;  // a stored bundle lacked a gradient: computed again
  st.computed.train = std::move(t);
}

bool GradientsForJudge(StageContext& ctx, const zoo::WeightMap& device,
                       zoo::WeightMap& grads_declared) {
  ReferenceState& st = ctx.references;
  if (st.keyed && st.stored && !st.completed) {
    // A parameter the bundle has no gradient of in full: the device's is the declared one
    // exactly when its digest is the declared one's, and is then taken for it (the judge
    // passes it at ratio 1 without reading anything else); otherwise it must be computed.
    // A held gradient is in its stored form (refs::AsStored), so equality is decided by the
    // digest for every parameter, held or not, as the fresh run decides it on the exact one.
    for (const auto& [p, digest] : st.stored->train->declared_digests) {
      auto it = device.find(p);
      if (it != device.end() && it->second.defined() && refs::TensorDigest(it->second) == digest) {
        grads_declared[p] = it->second;
        continue;
      }
      if (!grads_declared.count(p)) return false;
    }
  }
  // The parameters whose gradient the judge reads in full: the device's is not the declared
  // one bit for bit (as CompareGradients decides).
  st.differing.clear();
  for (const auto& [p, decl] : grads_declared) {
    auto it = device.find(p);
    if (it == device.end() || !it->second.defined() || !decl.defined() ||
        it->second.scalar_type() != decl.scalar_type() || !at::equal(it->second.cpu(), decl.cpu())) {
      st.differing.insert(p);
    }
  }
  return true;
}

bool GoldenFromBundle(StageContext& ctx, zoo::WeightMap& golden) {
  ReferenceState& st = ctx.references;
  if (!st.stored || st.completed) return false;
  const refs::TrainReferences& t = *st.stored->train;
  if (t.golden_state == refs::TrainReferences::Golden::kAbsent) return false;
  golden = t.grads_golden;
  return true;
}

void RecordGolden(StageContext& ctx, const zoo::WeightMap& golden) {
  ReferenceState& st = ctx.references;
  if (st.stored && !st.completed) {
    st.golden_added = golden;
    return;
  }
  if (!st.keyed || !st.computed.train) return;
  st.computed.train->golden_state = golden.empty() ? refs::TrainReferences::Golden::kFailed
                                                   : refs::TrainReferences::Golden::kPresent;
  st.computed.train->grads_golden = golden;
}

namespace {

// Stores `b`; false (with a warning) when it cannot be.
bool Save(StageContext& ctx, const refs::Bundle& b) {
  ReferenceUse& use = ctx.result.references;
  auto bytes = refs::EncodeBundle(b);
  StatusOr<std::string> digest =
      bytes.ok() ? ctx.opts.references.save(b.key, *bytes) : StatusOr<std::string>(bytes.status());
  if (!digest.ok()) {
    use.warning += (use.warning.empty() ? "" : "; ") +
                   ("reference bundle not stored: " + digest.status().message());
    return false;
  }
  use.content_digest = *digest;
  return true;
}

// `grads` restricted to `keep`.
zoo::WeightMap Only(const zoo::WeightMap& grads, const std::set<std::string>& keep) {
  zoo::WeightMap out;
  for (const auto& [p, g] : grads) {
    if (keep.count(p)) out[p] = g;
  }
  return out;
}

// The train part as stored: every digest, and in full only the gradients of `keep`.
void KeepInFull(refs::TrainReferences& t, const std::set<std::string>& keep) {
  t.grads = Only(t.grads, keep);
  t.grads_declared = Only(t.grads_declared, keep);
  t.grads_golden = Only(t.grads_golden, keep);
}

}  // namespace

namespace {

std::string LabelOf(const refs::BundleKey& k) {
  std::string label = k.device.rfind("cuda", 0) == 0 ? "gpu" : "external";
  return k.dtype == "float32" ? label : label + "_" + k.dtype;
}

// The comparison's identity; its numbers are filled by the judges.
ReferenceComparison ComparisonOf(const ExternalReference& e) {
  ReferenceComparison c;
  c.label = e.label;
  c.device = e.bundle.key.device;
  c.dtype = e.bundle.key.dtype;
  c.implementation = e.bundle.key.zoo_version;
  return c;
}

// The fp64 outputs of two implementations of the same model differ by their arithmetic's last
// bits only (~1e-16 relative); a floor this far below fp32 noise keeps exact agreement of tiny
// outputs from reading as disagreement.
constexpr double kAgreementFloor = 1e-9;

// The RMS of a list of outputs (RMSE against zeros).
double Rms(const TensorList& ts) {
  TensorList zeros;
  for (const auto& t : ts) zeros.push_back(t.defined() ? at::zeros_like(t) : t);
  return OutputsRmse(ts, zeros);
}

}  // namespace

void LoadExternal(StageContext& ctx) {
  ReferenceState& st = ctx.references;
  if (!st.keyed || !ctx.opts.references.others) return;
  for (const refs::StoredBundle& sb : ctx.opts.references.others(st.key)) {
    auto b = refs::DecodeBundle(sb.bytes);
    if (!b.ok()) {
      st.external_refused.push_back(sb.content_digest.substr(0, 12) + ": " + b.status().message());
      continue;
    }
    ExternalReference e{LabelOf(b->key), std::move(*b)};
    // Labels name the record's entries: a second bundle of the same kind gets "_2", ...
    for (int n = 2;; ++n) {
      const bool taken = std::any_of(st.external.begin(), st.external.end(),
                                     [&](const ExternalReference& x) { return x.label == e.label; });
      if (!taken) break;
      e.label = LabelOf(e.bundle.key) + "_" + std::to_string(n);
    }
    if (refs::RunDigest(e.bundle.key) != refs::RunDigest(st.key) || !e.bundle.forward ||
        !e.bundle.forward->outcome.ok() ||
        e.bundle.forward->outputs.size() != ctx.ref.size()) {
      st.external_refused.push_back(e.label + ": its outputs are not this run's");
      continue;
    }
    st.external.push_back(std::move(e));
  }
}

void JudgeExternal(const StageContext& ctx, ModeResult& m, const std::vector<at::Tensor>& out) {
  for (const ExternalReference& e : ctx.references.external) {
    const refs::ForwardReferences& f = *e.bundle.forward;
    ReferenceComparison c = ComparisonOf(e);
    const TensorList& golden = f.golden.empty() ? f.outputs : f.golden;
    const Accuracy a = CompareOutputs(out, f.outputs, golden, ctx.declared, ctx.tol);
    c.status = AccuracyPasses(a, ctx.tol) ? Verdict::kPass : Verdict::kFailAccuracy;
    c.rmse_ratio = a.rmse_ratio;
    c.max_abs_err = a.max_abs_err;
    c.cosine = a.cosine;
    if (!f.golden.empty()) {
      // Two fp64 computations of one function: they differ beyond the two references' own
      // rounding noise only when the implementations compute different functions.
      c.agreement = OutputsRmse(ctx.golden, f.golden);
      c.noise = OutputsRmse(ctx.ref, ctx.golden) + OutputsRmse(f.outputs, f.golden) +
                kAgreementFloor * Rms(ctx.golden);
      c.agrees = c.agreement <= c.noise;
    }
    m.reference_in_question = m.reference_in_question || !c.agrees;
    m.references.push_back(std::move(c));
  }
}

void JudgeExternalTraining(const StageContext& ctx, ModeResult& m) {
  for (const ExternalReference& e : ctx.references.external) {
    if (!e.bundle.train || !e.bundle.train->outcome.ok() ||
        e.bundle.train->loss_reference.size() != m.loss_reference.size()) {
      continue;
    }
    const std::vector<double>& curve = e.bundle.train->loss_reference;
    ReferenceComparison c = ComparisonOf(e);
    if (!m.loss_device.empty()) {
      const LossCurveVerdict v = CompareLossCurves(m.loss_device, curve, m.loss_declared, ctx.tol);
      c.status = v.pass ? Verdict::kPass : Verdict::kFailAccuracy;
      c.max_loss_gap_ratio = v.max_gap_ratio;
    }
    // Its curve within the band our curve allows a device (the declared numerics' running gap
    // from our reference): an fp32 curve of the same function is far inside it. A curve at
    // another dtype has noise of its own this band does not measure: not judged.
    if (c.dtype == "float32") {
      const LossCurveVerdict agree =
          CompareLossCurves(curve, m.loss_reference, m.loss_declared, ctx.tol);
      c.agreement = agree.max_gap_ratio;
      c.noise = 1;
      c.agrees = agree.max_gap_ratio <= 1;
    }
    m.reference_in_question = m.reference_in_question || !c.agrees;
    m.references.push_back(std::move(c));
  }
}

void FinishReferences(StageContext& ctx) {
  ReferenceState& st = ctx.references;
  ReferenceUse& use = ctx.result.references;
  if (!st.keyed) return;  // "fresh" once the reference stage ran; else never reached
  for (const std::string& why : st.external_refused) {
    use.warning += (use.warning.empty() ? "" : "; ") + ("reference from elsewhere left out: " + why);
  }
  if (st.stored && st.completed) {
    // The train references computed again for a gradient the bundle lacked: the key now names
    // the bundle with it too (and with those it had), so the next such run finds them.
    std::set<std::string> keep = st.differing;
    for (const auto& [p, g] : st.stored->train->grads) keep.insert(p);
    refs::Bundle fuller = *st.stored;
    fuller.train = std::move(st.computed.train);
    KeepInFull(*fuller.train, keep);
    use.source = "completed";
    Save(ctx, fuller);
    return;
  }
  if (st.stored) {
    use.source = "stored";
    if (!st.golden_added) return;
    // The same references and the fp64 gradients: the key now names the fuller bundle, so the
    // next run that needs them finds them too (two runs adding them store the same bytes).
    refs::Bundle fuller = *st.stored;
    fuller.train->golden_state = st.golden_added->empty() ? refs::TrainReferences::Golden::kFailed
                                                          : refs::TrainReferences::Golden::kPresent;
    // For every gradient held in full: a later device may make any of them differ.
    std::set<std::string> held;
    for (const auto& [p, g] : fuller.train->grads) held.insert(p);
    fuller.train->grads_golden = Only(*st.golden_added, held);
    Save(ctx, fuller);
    return;
  }
  if (!st.computed.forward) return;  // stopped before the references: nothing to store
  if (st.computed.train) KeepInFull(*st.computed.train, st.differing);
  if (Save(ctx, st.computed)) use.source = "computed";
}

}  // namespace ts::engine::internal
