// Zoo: further encoder families. See README.md.
#include "workers/zoo/families_internal.h"

namespace ts::zoo::internal {

std::vector<ArchEntry> EncoderZooArchs() { return {}; }

}  // namespace ts::zoo::internal
