// The reference bundle file (README.md, "The bundle file"): a safetensors file whose
// "__metadata__" holds one entry, kMetadataEntry, a JSON object
//
//   {"format": 1, "key": {...BundleKey...},
//    "forward": {"status", "error", "outputs": N, "lists": ["outputs", "golden", "declared"]},
//    "train": {"status", "error", "params": [...], "lists": [...], "golden": "present"|...},
//    "provenance": {...}}
//
// and whose tensors are the references themselves (bundle.h names them). This header reads the
// metadata without libtorch, so that the worker, the store and `touchstone refs import` can
// check a bundle's key without decoding its tensors.
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "workers/base/status.h"
#include "workers/refs/key.h"

namespace ts::refs {

// 2: golden and declared references may be stored as BF16 residuals against their anchor
// (bundle.h, AsStored). Format 1 (make_references.py writes it: every tensor as computed) is
// read too.
inline constexpr int kFormatVersion = 2;
inline constexpr int kOldestFormatVersion = 1;
inline constexpr const char* kMetadataEntry = "touchstone.reference_bundle";

struct BundleHeader {
  BundleKey key;
  nlohmann::json metadata;  // the whole kMetadataEntry object
};

// The header of a bundle's bytes: INVALID_ARGUMENT when they are not a safetensors file, carry
// no kMetadataEntry, another format version, or a key that does not parse (the message says
// which).
StatusOr<BundleHeader> ParseBundleHeader(std::string_view bytes);

}  // namespace ts::refs
