// The conformance engine: runs one model through the stages of DESIGN.md §4 on the simulated
// device and returns its verdicts.
//
// RunModel runs these stages in order (stages_internal.h holds the list; a new stage is one
// function added to it). Each is reported through RunOptions::on_stage as it starts; a mode's
// stage runs only when that mode is requested.
//
//   build      zoo::BuildModel (tiny scaling), seeded weights and the task's batch. A config
//              that cannot be built ends every requested mode with load_fail.
//   reference  CPU fp32 forward twice, fp64 golden forward, and a CPU forward at the profile's
//              declared numerics. A throwing or non-finite reference ends every requested mode
//              with ref_fail; two fp32 runs that differ bitwise, with ref_nondeterministic.
//              Then reseeds the device with RunOptions::seed.
//   eager      forward on the device (device_error, oom, unsupported_dtype), compared with the
//              references (fail_accuracy).
//   compile    trace, partition, simulated compile (compile_fail, compile_timeout), run on the
//              device, compare (COMPILER.md).
//   train      K-step SGD on a fixed batch: reference curves on CPU fp32 and at the declared
//              numerics, then on the device (reseeded with seed + 1); loss curves compared, and
//              the first step's gradients judged against an fp64 step (README.md, "Gradients").
//
// A mode that ends fail_accuracy, and with RunOptions::audit_ops any passing mode, is then
// replayed op by op (README.md, "Suspects"): ModeResult::audited and ::suspects.
//
// Op coverage counts the eager and train device runs (never the replays). timings_ms holds
// "build", "reference", "eager", "compile", "train" (with "train_reference", "train_declared",
// "train_device", "train_grad_check", and "train_golden_grads" when the fp64 step was needed:
// the device's gradients differ from the declared ones) for the stages that completed,
// "audit_eager", "audit_compile", "audit_train" for the replays, and "total".
//
// The engine reads the active profile's declared numerics and compiler spec
// (simdevice::ActiveProfile()); it never reads defects: verdicts come from numbers only.
//
// Thread-safety: one RunModel at a time per process (the device's counters and execution mode
// are process-global). Device faults become verdicts; RunModel does not throw for them. A fault
// that kills the process (abort) or hangs is the runner's to record (crash / timeout), which is
// why RunOptions::on_stage reports each stage as it starts.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "workers/engine/compiler.h"
#include "workers/engine/verdict.h"
#include "workers/refs/store.h"
#include "workers/zoo/model.h"

namespace ts::engine {

struct RunOptions {
  std::string arch;  // empty: config["architectures"][0]
  std::string task;  // empty: the head's default
  std::set<std::string> modes = {"eager", "compile", "train"};
  uint64_t seed = 0;
  // The catalog row's id ("org/name"): it seeds the model's own weights (ModelWeights). Empty:
  // the architecture's seeded weights alone.
  std::string model_id;
  // A checkpoint folder (zoo/safetensors.h: model.safetensors or model.safetensors.index.json):
  // the config is built at its own size (no tiny scaling) and its weights are read from the
  // folder by their HF names instead of seeded; a missing, mis-shaped or unreadable tensor is
  // load_fail naming it. Empty: seeded weights (ModelWeights).
  std::string checkpoint_dir;
  int train_steps = 5;
  int64_t batch_size = 2;
  double learning_rate = 0.05;
  // Replay every passing mode op by op too (README.md, "Suspects"): a wrong op the model
  // dilutes is reported in ModeResult::suspects as a warning. Failing modes
  // (fail_accuracy) are always replayed.
  bool audit_ops = false;
  // Called with "build", "reference", "eager", "compile", "train" as each stage starts.
  std::function<void(const std::string& stage)> on_stage;
  // Called once the model is built, with {"arch", "task", "family", "config_hash"}.
  std::function<void(const nlohmann::json& model)> on_built;
  // Reference bundles (README.md, "Reference bundles"): where this run's references come from
  // and go. Unset, or a checkpoint run: computed, and kept nowhere.
  struct ReferenceStore {
    // The stored bundle of a key: NOT_FOUND when there is none; any other error (DATA_LOSS for
    // a damaged file) refuses it with a warning. Unset: always computed (--references fresh).
    std::function<StatusOr<refs::StoredBundle>(const refs::BundleKey&)> load;
    // Keeps a bundle this run computed; returns its content address.
    std::function<StatusOr<std::string>(const refs::BundleKey&, const std::string& bytes)> save;
  } references;
};

// Valid mode names.
const std::set<std::string>& KnownModes();

ModelResult RunModel(const nlohmann::json& config, const RunOptions& opts);

// ---- Building blocks of RunModel, public so benchmarks time exactly the same calls.

// The weights of one catalog row. The architecture's weights seeded by opts.seed (the sweep's),
// plus, when opts.model_id is set, a fine-tune delta seeded by the id and the seed: each float
// tensor moves by N(0, (kFineTuneScale * its spread)^2) elementwise, its spread being its
// standard deviation (its mean magnitude for a constant tensor such as a norm weight; an
// all-zero tensor stays). Rows that share a config are then distinct models whose outputs are
// close but not identical, as fine-tunes of one checkpoint are; the same id and seed give the
// same weights bit for bit.
inline constexpr double kFineTuneScale = 1e-3;
zoo::WeightMap ModelWeights(const zoo::Model& model, const RunOptions& opts);

// Copies a tensor map to `device`; float tensors become `float_type`.
zoo::TensorMap ToDevice(const zoo::TensorMap& m, const c10::Device& device,
                        at::ScalarType float_type = at::kFloat);

// K steps of plain SGD (learning rate `lr`) on a fixed batch, from a private copy of `init`, on
// `device`. Returns the loss before each update. Throws c10::Error on device faults. With
// `first_grads`, it receives the first step's gradients, on the CPU (parameters no gradient
// reached are left out). `on_step`, when set, is called with s before step s starts (after the
// weights and batch are on the device) and with `steps` after the last: the engine's device
// clock measures one step between two calls.
std::vector<double> TrainLosses(const zoo::Model& model, const zoo::WeightMap& init,
                                const zoo::Batch& batch, const c10::Device& device, int steps,
                                double lr, zoo::WeightMap* first_grads = nullptr,
                                const std::function<void(int step)>& on_step = {});

// The gradients of one loss at `weights` on `device`, with float tensors as `float_type`,
// returned on the CPU. On the CPU in double: the reference the first training step's gradients
// are judged against.
zoo::WeightMap StepGradients(const zoo::Model& model, const zoo::WeightMap& weights,
                             const zoo::Batch& batch, const c10::Device& device,
                             at::ScalarType float_type);

// The model's Forward as a function of one flat tensor list [weights (by name)..., inputs (by
// name)...], for tracing. `flat` receives the example list; fn keeps references to `model`.
struct FlatForward {
  std::vector<at::Tensor> flat;
  TraceFn fn;
};
FlatForward Flatten(const zoo::Model& model, const zoo::WeightMap& weights,
                    const zoo::TensorMap& inputs);

// Runs torch's intra-op pool and (when it is the BLAS in use) OpenBLAS with `n` threads. Worker
// slots are one core each; tiny models are faster single-threaded anyway.
void ConfigureThreads(int n);

}  // namespace ts::engine
