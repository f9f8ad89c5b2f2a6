// The registration lists of the family files under families/: registry.cc concatenates them
// with the older per-file lists of families_internal.h. Private to the zoo.
#pragma once

#include <vector>

#include "workers/zoo/families_internal.h"

namespace ts::zoo::internal {

std::vector<ArchEntry> T5Archs();        // families/t5.cc
std::vector<ArchEntry> Mt5Archs();       // families/mt5.cc
std::vector<ArchEntry> Umt5Archs();      // families/mt5.cc
std::vector<ArchEntry> BartArchs();      // families/bart.cc
std::vector<ArchEntry> MbartArchs();     // families/mbart.cc
std::vector<ArchEntry> MvpArchs();       // families/mvp_plbart.cc
std::vector<ArchEntry> PlbartArchs();    // families/mvp_plbart.cc
// marian, pegasus, blenderbot, blenderbot-small, m2m_100 (families/bart_variants.cc)
std::vector<ArchEntry> BartVariantArchs();
std::vector<ArchEntry> WhisperArchs();   // families/whisper.cc
std::vector<ArchEntry> VitMsnArchs();    // families/vit_msn.cc
std::vector<ArchEntry> MobileNetV1Archs();  // families/mobilenet_v1.cc
std::vector<ArchEntry> Wav2Vec2Archs();  // families/wav2vec2.cc: the registered classes
// families/wav2vec2.cc: Wav2Vec2Model and Wav2Vec2ForCTC, built and unit-tested but not
// registered (their device loss curve leaves the declared bf16 curve; see README.md).

}  // namespace ts::zoo::internal
