// The wav2vec2 lineage (wav2vec2.cc; hubert.cc, unispeech.cc and unispeech_sat.cc derive from
// it): the registry entry of one class on the audio trunk and the base example config. Private to
// the zoo.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/audio_heads.h"

namespace ts::zoo::internal {

using Wav2Vec2MakeFn = std::unique_ptr<Model> (*)(ModelSpec, Wav2Vec2Recipe);

// The entry of `arch` (model_type `family`, its base model under the family's prefix) serving
// `task`, built by `make` from the config's Wav2Vec2Recipe.
ArchEntry Wav2Vec2Entry(const std::string& arch, const char* task, Wav2Vec2MakeFn make,
                        nlohmann::json example, const std::string& family = "wav2vec2");

nlohmann::json Wav2Vec2Example();  // facebook/wav2vec2-base-960h

}  // namespace ts::zoo::internal
