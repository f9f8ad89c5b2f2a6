// Reference bundles in the engine (README.md, "Reference bundles"), private to it. The stages
// ask here first; on a stored bundle they take the references from it, else they compute them
// as before and record them here, and RunModel stores what was computed at the end.
//
// Thread-safety: the state belongs to one RunModel call (its StageContext).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "workers/engine/verdict.h"
#include "workers/refs/bundle.h"
#include "workers/refs/key.h"
#include "workers/zoo/model.h"

namespace ts::engine::internal {

struct StageContext;
enum class StageEnd;

// A bundle of another implementation of this run (engine README, "References from elsewhere").
struct ExternalReference {
  std::string label;  // "gpu", "gpu_bfloat16", "external"
  refs::Bundle bundle;
};

struct ReferenceState {
  bool keyed = false;  // the run has a key (store configured, not a checkpoint run)
  refs::BundleKey key;
  std::optional<refs::Bundle> stored;  // the bundle in use
  refs::Bundle computed;               // what this run computed, stored at the end
  // The fp64 first-step gradients this run computed because `stored` lacked them (its producer
  // did not need them): the bundle is stored again with them at the end.
  std::optional<zoo::WeightMap> golden_added;
  // train: the parameters whose device gradient was not the declared one bit for bit (the
  // gradients the judge reads in full, in their stored form, and so those a bundle keeps in
  // full). Set by GradientsForJudge on every run, keyed or not.
  std::set<std::string> differing;
  // The stored bundle lacked the full gradient of a parameter the device made differ: the
  // train references were computed again (RecordTrain), and the bundle is stored with it.
  bool completed = false;
  // Other implementations' bundles of this run, usable for this run's outputs.
  std::vector<ExternalReference> external;
  std::vector<std::string> external_refused;  // "label: why", for result.references.warning
};

// The key of this run (once built): the model run, the recipe, the build and the reference's
// device, dtype and declared numerics.
refs::BundleKey ReferenceKey(const StageContext& ctx);

// At the start of "reference": keys the run and loads its stored bundle when there is one (a
// bundle that cannot be used is refused with a warning in result.references). Returns the
// stage's end when the forward references came from it (ctx.ref / golden / declared set, or the
// modes ended with the bundle's ref_fail / ref_nondeterministic), nullopt when they must be
// computed.
std::optional<StageEnd> ForwardFromBundle(StageContext& ctx);
// After the computed reference stage: records its references, or how it ended.
void RecordForward(StageContext& ctx, StageEnd end);

// train's reference curves and first-step gradients from the stored bundle: nullopt when they
// must be computed, else whether they are usable (false: m holds the bundle's ref_fail).
std::optional<bool> TrainFromBundle(StageContext& ctx, ModeResult& m, std::vector<double>& declared,
                                    zoo::WeightMap& grads, zoo::WeightMap& grads_declared);
void RecordTrain(StageContext& ctx, const ModeResult& m, bool ok,
                 const std::vector<double>& declared, const zoo::WeightMap& grads,
                 const zoo::WeightMap& grads_declared);
// Once the device's first-step gradients are in, before the judge: notes which parameters the
// judge will read in full (ReferenceState::differing) and completes `grads_declared` from a
// stored bundle's digests (a parameter whose device gradient hashes to its declared
// digest *is* its declared gradient), and notes which parameters the judge will read in full.
// False when a stored bundle lacks the full gradient of a parameter the device made differ:
// the caller computes train's references again (RecordTrain) and calls this once more.
bool GradientsForJudge(StageContext& ctx, const zoo::WeightMap& device,
                       zoo::WeightMap& grads_declared);
// The fp64 first-step gradients from the stored bundle when it has them (true: `golden` set,
// empty when the producer's fp64 step failed).
bool GoldenFromBundle(StageContext& ctx, zoo::WeightMap& golden);
void RecordGolden(StageContext& ctx, const zoo::WeightMap& golden);

// Once the reference stage has the forward references: loads the bundles of other
// implementations of this run (RunOptions::references.others). One whose outputs do not line up
// with ours is left out, with a warning.
void LoadExternal(StageContext& ctx);
// eager, compile: the device's outputs against each external reference, and that reference
// against ours (the mode's ReferenceComparison list; reference_in_question).
void JudgeExternal(const StageContext& ctx, ModeResult& m, const std::vector<at::Tensor>& out);
// train: the device's loss curve against each external curve, and that curve against ours.
void JudgeExternalTraining(const StageContext& ctx, ModeResult& m);

// At the end of RunModel: stores the computed bundle (when the run computed its references and
// has a store), or the stored one completed with the fp64 gradients it lacked, and fills
// result.references.
void FinishReferences(StageContext& ctx);

}  // namespace ts::engine::internal
