// A reference bundle: everything the engine's judge reads from the references of one model run
// (README.md, "What a verdict reads"), and its file (format.h).
//
// The references at key.dtype (fp32 outputs and gradients: the anchors) are stored exactly as
// computed. The fp64 golden and the declared-numerics references are stored no finer than the
// judge needs them, as a BF16 residual against their anchor (AsStored): the engine judges
// every run, fresh or from a bundle, against AsStored's form, so every ratio of a verdict
// judged from a bundle is the ratio judged from fresh references, to the last bit. Tensor
// names in the file:
//
//   forward.<list>.<i>        output i of the reference forward; <list> is "outputs" (the
//                             reference at key.dtype), "golden" (fp64) or "declared" (at the
//                             declared numerics; absent when key.numerics is "fp32": equal to
//                             outputs). An output that is not defined is absent.
//   train.loss.<curve>        F64 [steps]: "reference", "declared", "band" (band: only when
//                             the reference curve itself failed)
//   train.grads.<list>.<p>    the first step's gradient of parameter <p>; <list> as above,
//                             for the parameters whose device gradient differed from the
//                             declared one (the only ones the judge reads in full); every other
//                             parameter has its declared gradient's digest in the metadata
//
// Thread-safety: value types and pure functions.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workers/base/status.h"
#include "workers/refs/format.h"
#include "workers/refs/key.h"

namespace ts::refs {

using TensorList = std::vector<at::Tensor>;
using GradMap = std::map<std::string, at::Tensor>;

// How a part of the references ended. A failed part holds what the run had computed when it
// failed, and the verdict it gave: status "ref_fail" / "ref_nondeterministic", with its error.
struct PartOutcome {
  std::string status;  // "" when the references are usable
  std::string error;
  bool ok() const { return status.empty(); }
};

struct ForwardReferences {
  PartOutcome outcome;
  TensorList outputs;   // the reference forward at key.dtype (CPU: fp32)
  TensorList golden;    // fp64; empty when the producer has none (a GPU bundle)
  TensorList declared;  // at the declared numerics; empty: the same as `outputs`
};

struct TrainReferences {
  PartOutcome outcome;
  std::vector<double> loss_reference, loss_declared, loss_band;
  // TensorDigest of every parameter's declared-numerics gradient. The judge reads a gradient in
  // full only where the device's differs from the declared one bit for bit; elsewhere the
  // device's gradient *is* the declared one, which its digest shows.
  std::map<std::string, std::string> declared_digests;
  // The gradients in full, of the parameters a device made differ so far (a subset of the
  // digests' parameters): at key.dtype, at the declared numerics (empty with
  // declared_is_reference: the same), and in fp64 (below).
  GradMap grads;
  GradMap grads_declared;
  bool declared_is_reference = false;
  // The fp64 first-step gradients, taken only when a device gradient differed from the
  // declared one (engine README, "Gradients"): absent when the producing run did not need
  // them, failed when the fp64 step could not be taken (the run then judged no gradient).
  enum class Golden { kAbsent, kPresent, kFailed };
  Golden golden_state = Golden::kAbsent;
  GradMap grads_golden;
};

struct Bundle {
  BundleKey key;
  std::optional<ForwardReferences> forward;
  std::optional<TrainReferences> train;
  // Not part of the key: who made it and when ({"producer", "host", "created_at", ...}).
  nlohmann::json provenance = nlohmann::json::object();
};

// The form a golden (fp64) or declared-numerics (fp32) reference is judged and stored in,
// against its anchor (the same output or gradient at fp32, stored exactly): anchor + bf16(value -
// anchor), rounded once to value's dtype. Its error is at most 2^-8 of |value - anchor| (and
// the final rounding to value's dtype): 0.4% of the noise the
// judge measures with it (the fp32 rounding for golden, the declared numerics' rounding for
// declared), and it needs 2 bytes an element instead of 8 or 4. AsStored(AsStored(v, a), a) ==
// AsStored(v, a) bit for bit. `value` unchanged when it cannot be condensed (another shape or
// dtype, an fp32 anchor missing, a non-finite element): it is then stored as it is.
at::Tensor AsStored(const at::Tensor& value, const at::Tensor& anchor);

// SHA-256 (hex) of a tensor's dtype, shape and bytes: equal digests, equal tensors bit for bit.
std::string TensorDigest(const at::Tensor& t);

// The file's bytes. INVALID_ARGUMENT when a tensor has a dtype safetensors cannot hold.
StatusOr<std::string> EncodeBundle(const Bundle& bundle);

// The bundle in `bytes`, checked: a safetensors file with a kMetadataEntry of this format, a
// key, every tensor its metadata promises with the dtype and count it promises, and no other.
// INVALID_ARGUMENT with what is wrong otherwise.
StatusOr<Bundle> DecodeBundle(std::string_view bytes);

}  // namespace ts::refs
