// The engine's reference store (engine::RunOptions::references) over a folder of bundles
// (workers/refs/store.h): the embedded default's STATE/refs, or a worker's local copy of what
// its scheduler serves.
//
// Thread-safety: the returned callbacks may be called from any thread (DirStore is safe across
// threads and processes).
#pragma once

#include <string>

#include "workers/base/status.h"
#include "workers/engine/engine.h"

namespace ts::runner {

// `reuse` false is `--references fresh`: every run computes its references and stores them
// again; true takes a stored bundle when one of the run's key is there. INTERNAL when the folder
// cannot be created.
StatusOr<engine::RunOptions::ReferenceStore> FolderReferences(const std::string& dir, bool reuse);

}  // namespace ts::runner
