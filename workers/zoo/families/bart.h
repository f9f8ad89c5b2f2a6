// BART-style families (bart.cc; mbart.cc derives from it): config parsing and scaling, the
// recipe, and the registry entry of one class.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/encoder_decoder_heads.h"

namespace ts::zoo::internal {

// The entry of a BART-style class (`family` "bart"; "mbart": pre-LN with final layer norms,
// language-id shift; "mvp": BART without MVP's prompts; "plbart": BART layers with the
// language-id shift, scale_embedding default true; "marian", "pegasus", "blenderbot",
// "blenderbot-small", "m2m_100": their own files) with `head` one of kConditionalGeneration,
// kModel, kSequenceClassification, kQuestionAnswering, kCausalLM.
ArchEntry BartEntry(const std::string& arch, const std::string& family, Seq2SeqHead head,
                    nlohmann::json example);

// The state_dict extra of a decoder-only *ForCausalLM of the lineage (BART's, Whisper's): each
// `model.decoder.layers.N` keeps the cross-attention (encoder_attn, encoder_attn_layer_norm) it
// never calls, written seeded, shaped as the layer's self-attention.
void AddUnusedCrossAttention(StateDictBuilder& sd);

}  // namespace ts::zoo::internal
