// Zoo: audio families (whisper, wav2vec2). See README.md.
#include "workers/zoo/families_internal.h"

namespace ts::zoo::internal {

std::vector<ArchEntry> AudioArchs() { return {}; }

}  // namespace ts::zoo::internal
