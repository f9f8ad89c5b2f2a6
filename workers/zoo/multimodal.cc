// Zoo: multimodal families (clip). See README.md.
#include "workers/zoo/families_internal.h"

namespace ts::zoo::internal {

std::vector<ArchEntry> MultimodalArchs() { return {}; }

}  // namespace ts::zoo::internal
