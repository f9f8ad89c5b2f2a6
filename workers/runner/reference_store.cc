#include "workers/runner/reference_store.h"

#include <memory>
#include <utility>

#include "workers/refs/store.h"

namespace ts::runner {

StatusOr<engine::RunOptions::ReferenceStore> FolderReferences(const std::string& dir, bool reuse) {
  auto opened = refs::DirStore::Open(dir);
  if (!opened.ok()) return opened.status();
  auto store = std::make_shared<refs::DirStore>(std::move(*opened));
  engine::RunOptions::ReferenceStore out;
  out.save = [store](const refs::BundleKey& key, const std::string& bytes) {
    return store->Put(key, bytes);
  };
  if (reuse) out.load = [store](const refs::BundleKey& key) { return store->Get(key); };
  return out;
}

}  // namespace ts::runner
