// BART-style families (bart.cc; mbart.cc derives from it): config parsing and scaling, the
// recipe, and the registry entry of one class.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/encoder_decoder_heads.h"

namespace ts::zoo::internal {

// The entry of a BART-style class (`family` "bart", or "mbart": pre-LN with final layer norms,
// language-id shift) with `head` one of kConditionalGeneration, kModel,
// kSequenceClassification, kQuestionAnswering, kCausalLM.
ArchEntry BartEntry(const std::string& arch, const std::string& family, Seq2SeqHead head,
                    nlohmann::json example);

}  // namespace ts::zoo::internal
