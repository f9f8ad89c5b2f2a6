// Family builders behind BuildModel (model.cc), and helpers shared by the families.
// Private to the zoo.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo::internal {

// The state_dict being assembled by StateDictShapes (state_dict.cc), as a family's
// StateDictRules::extra sees it: the model's weights, and what has been added so far.
class StateDictBuilder {
 public:
  explicit StateDictBuilder(const Model& model);
  const Model& model() const { return model_; }
  // The model's WeightShapes() by name.
  const std::map<std::string, std::vector<int64_t>>& weights() const { return weights_; }
  bool HasWeight(const std::string& name) const { return weights_.count(name) > 0; }
  // A copy of weight `from` under `name`: nothing when `from` is not a weight or `name` is
  // already a weight or an added entry.
  void AddTied(const std::string& name, const std::string& from);
  // A module transformers builds but the class never calls (the export writes it seeded):
  // nothing when `name` is already a weight or an added entry.
  void AddUnused(const std::string& name, std::vector<int64_t> shape);
  // Any entry, appended as given.
  void Add(StateDictEntry entry);
  std::vector<StateDictEntry> Take() { return std::move(out_); }

 private:
  const Model& model_;
  std::map<std::string, std::vector<int64_t>> weights_;
  std::set<std::string> added_;
  std::vector<StateDictEntry> out_;
};

// What a class's transformers state_dict holds beyond its weights that only its family knows.
// state_dict.cc applies the rules every class shares (the encoder-decoders' embed_tokens copies
// of "shared", output projections tied to the input embedding, BatchNorm counters) with these
// settings, then `extra`.
struct StateDictRules {
  // The module of a causal / seq2seq LM's output projection tied to the input embedding
  // (Whisper's proj_out, BioGPT's output_projection).
  std::string tied_output = "lm_head";
  // Output projections transformers ties to the input embedding as `<name>.weight` when the
  // class has `<name>.bias` (DistilBERT's vocab_projector, ELECTRA's generator_lm_head, XLM's
  // pred_layer.proj).
  std::vector<std::string> tied_projections = {};
  // The class's lm_head is a bare decoder Linear with its own bias parameter, tied as the MLM
  // heads' decoder is (BertGenerationDecoder).
  bool bare_lm_head = false;
  // The masked LM decoder Linear carries the head's bias as `decoder.bias` too (false: ESM's
  // decoder has no bias; the head adds its own `bias` parameter).
  bool decoder_bias = true;
  // Entries appended last: modules transformers builds that the class never calls, parameters
  // only training-time code reads (may be empty).
  std::function<void(StateDictBuilder& sd)> extra = nullptr;
};

// One architecture class the zoo builds. `scale` turns the real config into the tiny one
// (validating it first; errors name the field); `build` builds from spec.tiny_config.
struct ArchEntry {
  ArchInfo info;  // exact transformers class, family (model_type), default pipeline tag
  // A real-shaped config.json for this class, modelled on a public checkpoint (sizes, heads,
  // vocab, rope/norm settings as that checkpoint has them). Tests build every class from it;
  // the catalog varies it.
  nlohmann::json example_config;
  std::function<StatusOr<nlohmann::json>(const nlohmann::json& config)> scale;
  std::function<StatusOr<std::unique_ptr<Model>>(ModelSpec spec)> build;
  StateDictRules state_dict = {};
  // transformers pools the last token that is not pad_token_id (the decoders'
  // *ForSequenceClassification; the zoo pools the last attended one): the export names a pad id
  // for a config without one (export.cc).
  bool pools_last_non_pad = false;
};

// `config` with architectures = [arch] (one example config per class of a family).
inline nlohmann::json WithArchitecture(nlohmann::json config, const std::string& arch) {
  config["architectures"] = {arch};
  return config;
}

// ---- Registration. Each family file (families/<model_type>.cc) registers itself at static
// initialisation with TS_ZOO_REGISTER_FAMILY (or its decoder / encoder form, trunks/
// decoder_family.h, trunks/encoder_family.h); Registry() calls every registered list once. The
// archive is linked whole (CMakeLists.txt), so a family file nothing calls into still registers.
using ArchListFn = std::vector<ArchEntry> (*)();
struct FamilyRegistration {
  explicit FamilyRegistration(ArchListFn archs);
};
#define TS_ZOO_REGISTER_FAMILY(name, archs) \
  static const ::ts::zoo::internal::FamilyRegistration kZooFamily##name(archs)

// Every registered architecture, sorted by class name (built once).
const std::vector<ArchEntry>& Registry();
// The entry of class `arch`, or null.
const ArchEntry* FindArch(const std::string& arch);

// The weight `name`; throws c10::Error naming it when absent.
const at::Tensor& GetWeight(const WeightMap& weights, const std::string& name);
// The weight `name`, or an undefined tensor when `name` is empty.
at::Tensor GetOptionalWeight(const WeightMap& weights, const std::string& name);
// The input `name`, or an undefined tensor when absent.
at::Tensor GetOptionalInput(const TensorMap& inputs, const std::string& name);
// The input `name`; throws c10::Error naming it when absent.
const at::Tensor& GetInput(const TensorMap& inputs, const std::string& name);

// HF cross entropy: logits [N, C], labels [N] int64, ignore_index -100, mean.
at::Tensor CrossEntropy(const at::Tensor& logits, const at::Tensor& labels);

// Right padding used by every text batch: row 1 (if any) has its last seq_len / 4 tokens padded.
at::Tensor MakeAttentionMask(int64_t batch_size, int64_t seq_len);

}  // namespace ts::zoo::internal
