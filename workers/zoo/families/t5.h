// T5-style families (t5.cc; mt5.cc derives from it): config parsing and scaling, the recipe, and
// the registry entry of one class.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/encoder_decoder_heads.h"

namespace ts::zoo::internal {

// T5Config's fields as the T5-style families read them.
struct T5Cfg {
  int64_t vocab = 0, d_model = 0, d_kv = 0, d_ff = 0, layers = 0, dec_layers = 0, heads = 0;
  int64_t buckets = 32, max_distance = 128;
  double eps = 1e-6;
  bool gated = false;
  Activation act = Activation::kRelu;
  bool tie = true;
  int64_t pad = 0, eos = 1, start = 0;
  int64_t num_labels = 2;
};

// The sizes, relative-bias buckets, layer_norm_epsilon, tokens and labels (not the feed-forward,
// which T5's feed_forward_proj and Switch Transformers' dense_act_fn name differently).
StatusOr<T5Cfg> ParseT5Base(const nlohmann::json& config);
// The tiny config of a T5-style family (`family` "umt5" keeps two layers per stack).
StatusOr<nlohmann::json> ScaleT5(const nlohmann::json& config, const std::string& family);
// The trunk's recipe of a T5-style class.
EncDecRecipe T5Recipe(const T5Cfg& c, Seq2SeqHead head, const std::string& family);
// The pipeline tag of a T5-style head.
std::string T5PipelineTag(Seq2SeqHead head);

// The entry of a T5-style class (`family` "t5" or "mt5") with `head` one of
// kConditionalGeneration, kModel, kEncoderModel, kTokenClassification.
ArchEntry T5Entry(const std::string& arch, const std::string& family, Seq2SeqHead head,
                  nlohmann::json example);
// The four classes of a T5-style family: `prefix`ForConditionalGeneration (from `lm_example`),
// `prefix`Model, `prefix`EncoderModel and `prefix`ForTokenClassification (from `example`).
std::vector<ArchEntry> T5StyleArchs(const std::string& prefix, const std::string& family,
                                    const nlohmann::json& lm_example,
                                    const nlohmann::json& example);

}  // namespace ts::zoo::internal
