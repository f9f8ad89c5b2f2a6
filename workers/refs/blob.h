// How a reference bundle is kept at rest, in the folder store (store.h) and in a fleet's
// PostgreSQL (services/store/references.cc): its bytes as they are, or deflated when that saves
// 3%. A deflated blob is "TSZ1", the bundle's size (8 bytes, little-endian) and a zlib stream at
// the fastest level. A bundle never starts with "TSZ1" (a safetensors file starts with its
// header's length: these four bytes would make it ~3e9 times the file), so a blob stored
// before deflation existed reads back as it is.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "workers/base/status.h"

namespace ts::refs {

// `bundle` deflated when that saves at least 3%, else as it is. Floats' mantissas do not
// compress; their exponents, the BF16 residuals' and the metadata do.
std::string BlobOf(std::string_view bundle);

// The bundle's bytes in `blob`; INVALID_ARGUMENT (the caller's DATA_LOSS) when a deflated blob
// is cut short, states a size deflate cannot reach, or does not inflate to the size it states.
// A blob that is not deflated is returned as it is: the caller checks its digest.
StatusOr<std::string> BundleOf(std::string blob);

}  // namespace ts::refs
