// Zoo: further decoder-only families. See README.md.
#include "workers/zoo/families_internal.h"

namespace ts::zoo::internal {

std::vector<ArchEntry> DecoderZooArchs() { return {}; }

}  // namespace ts::zoo::internal
