// T5-style families (t5.cc; mt5.cc derives from it): config parsing and scaling, the recipe, and
// the registry entry of one class.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/encoder_decoder_heads.h"

namespace ts::zoo::internal {

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
