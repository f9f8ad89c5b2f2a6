// Zoo: further vision families. See README.md.
#include "workers/zoo/families_internal.h"

namespace ts::zoo::internal {

std::vector<ArchEntry> VisionZooArchs() { return {}; }

}  // namespace ts::zoo::internal
