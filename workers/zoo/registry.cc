#include <algorithm>
#include <set>

#include "workers/zoo/families/family_lists.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/trunks/decoder_family.h"
#include "workers/zoo/trunks/encoder_family.h"

namespace ts::zoo::internal {

const std::vector<ArchEntry>& Registry() {
  static const std::vector<ArchEntry> kRegistry = [] {
    std::vector<ArchEntry> all;
    for (auto list :
         {DecoderArchs, EncoderArchs, T5Archs, Mt5Archs, Umt5Archs, BartArchs, MbartArchs, MvpArchs,
          PlbartArchs, BartVariantArchs, WhisperArchs, Wav2Vec2Archs, VitArchs, VitMsnArchs,
          DeitArchs, SwinArchs, ConvNextArchs, ResNetArchs, MobileNetV1Archs, MobileNetV2Archs,
          EfficientNetArchs, ClipArchs}) {
      for (auto& e : list()) all.push_back(std::move(e));
    }
    std::sort(all.begin(), all.end(),
              [](const ArchEntry& a, const ArchEntry& b) { return a.info.arch < b.info.arch; });
    // A class registered twice is a programming error in a family file.
    for (size_t i = 1; i < all.size(); ++i) {
      TORCH_CHECK(all[i].info.arch != all[i - 1].info.arch, "zoo: ", all[i].info.arch,
                  " registered twice");
    }
    return all;
  }();
  return kRegistry;
}

}  // namespace ts::zoo::internal
