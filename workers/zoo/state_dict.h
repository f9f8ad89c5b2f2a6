// A zoo model's transformers state_dict (issue 17 item 2): its weights (WeightShapes(), HF
// names) plus what transformers' state_dict() also holds under names of its own:
//   - tied copies: the output projection tied to the input embedding ("lm_head.weight",
//     Whisper's "proj_out.weight", the MLM heads' "*.decoder.weight" and "*.decoder.bias"),
//     T5 / BART "encoder.embed_tokens" / "decoder.embed_tokens" copies of "shared" (what
//     transformers' _tied_weights_keys declare; one tensor under two names);
//   - BatchNorm "num_batches_tracked" (int64 scalar, 0 here: the zoo runs BatchNorm in eval);
//   - wav2vec2's "masked_spec_embed" (a parameter only its training-time masking reads, present
//     when mask_time_prob or mask_feature_prob is positive, as transformers builds it);
//   - XIELUActivation's constant buffers `act_fn.beta` (0.5) and `act_fn.eps` (-1e-6) (apertus);
//   - modules transformers builds that the class never calls (BigBird's pooler, the BART
//     lineage's decoder-only cross-attention), seeded.
// The rules every class shares live in state_dict.cc; what only a family knows is declared by
// its family file (families_internal.h StateDictRules).
// The export writes this state_dict, so that transformers loads it with strict=True; loading a
// checkpoint takes the WeightShapes() names from it and ignores the rest.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "workers/zoo/model.h"

namespace ts::zoo {

struct StateDictEntry {
  std::string name;
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;  // kLong for num_batches_tracked
  std::string tied_to;                // the WeightShapes() name this entry copies; "" otherwise
  // A constant buffer (XIELUActivation's beta / eps): every element this value.
  std::optional<double> fill = std::nullopt;
  // A computed buffer with these values, row-major, in `dtype` (the rotary `inv_freq` of ESM and
  // Wav2Vec2Conformer); empty otherwise.
  std::vector<double> values = {};
};

// WeightShapes() in order, then the extra entries.
std::vector<StateDictEntry> StateDictShapes(const Model& model);

// The state_dict tensors for `weights` (a complete WeightMap of `model`): tied copies are the
// weight they copy, num_batches_tracked 0, masked_spec_embed uniform [0, 1) from `seed`.
TensorMap StateDict(const Model& model, const WeightMap& weights, uint64_t seed);

}  // namespace ts::zoo
