// Zoo: encoder-decoder families (t5, bart). See README.md.
#include "workers/zoo/families_internal.h"

namespace ts::zoo::internal {

std::vector<ArchEntry> Seq2SeqArchs() { return {}; }

}  // namespace ts::zoo::internal
