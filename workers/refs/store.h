// A content-addressed store of reference bundles in one folder: the embedded default's
// (STATE/refs), and a worker's local copy of what the scheduler serves it (README.md, "Where
// bundles live").
//
//   ROOT/blobs/ab/<sha256>                    a bundle's bytes, named by their SHA-256, deflated
//                                             when that saves 3% (blob.h); reads
//                                             inflate them and check the digest
//   ROOT/keys/ab/<run digest>/<key digest>    {"content": <sha256>, "size": N, "key": {...}}
//   ROOT/tmp/                                 writes in progress
//
// Every file appears by rename(2) of a complete file written under tmp/, so a reader sees a
// whole file or none, and a writer killed mid-write leaves only a tmp/ file (Prune removes
// those). Blobs are immutable: writers of the same bytes produce one blob. A key names the blob
// its last writer stored. Nothing is fsynced: a blob torn by a power loss fails its digest check
// on read, is refused, and its references are computed again.
//
// Thread-safety: a DirStore is immutable after Open; any number of processes and threads may
// use the same folder at once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "workers/base/status.h"
#include "workers/refs/key.h"

namespace ts::refs {

struct StoredBundle {
  std::string content_digest;  // SHA-256 of `bytes`
  std::string bytes;
};

struct Entry {
  BundleKey key;
  std::string key_digest;
  std::string run_digest;
  std::string content_digest;
  int64_t size = 0;
};

struct StoreStats {
  int64_t keys = 0;           // keys with a bundle
  int64_t blobs = 0;          // distinct bundles
  int64_t blob_bytes = 0;     // their size on disk
  int64_t partial_files = 0;  // tmp/ files (writes in progress, or left by a killed writer)
};

struct PruneResult {
  int64_t keys_removed = 0;
  int64_t blobs_removed = 0;
  int64_t bytes_freed = 0;
  int64_t partial_files_removed = 0;
};

class DirStore {
 public:
  // Called with a file's tmp/ path once its bytes are written, before its rename: the point
  // where a killed writer leaves the most behind (store_test kills its process there).
  using AfterWrite = std::function<void(const std::string& tmp_path)>;

  // Opens (creating its folders) the store at `root`. INTERNAL naming the folder on failure.
  static StatusOr<DirStore> Open(const std::string& root, AfterWrite after_write = nullptr);

  const std::string& root() const { return root_; }

  // Stores `bytes` as the bundle of `key`; returns their SHA-256. The caller vouches that the
  // bytes are the bundle of `key` (Import checks it from the bytes themselves).
  StatusOr<std::string> Put(const BundleKey& key, std::string_view bytes) const;
  // Stores a bundle under the key written in its own header: INVALID_ARGUMENT when the bytes
  // are not a bundle (ParseBundleHeader's message). Returns the entry.
  StatusOr<Entry> Import(std::string_view bytes) const;

  // The bundle of `key`. NOT_FOUND: the key has none. DATA_LOSS: its blob is missing, or its
  // bytes do not hash to their name (a flipped or truncated file); the caller recomputes.
  StatusOr<StoredBundle> Get(const BundleKey& key) const;
  // The content digest the key's entry names ("" when the key has none), without reading the
  // blob: enough to see that a bundle the scheduler lists is here already.
  std::string ContentOf(const BundleKey& key) const;
  // A blob by its digest, checked as Get checks it.
  StatusOr<std::string> ReadBlob(const std::string& content_digest) const;
  bool HasBlob(const std::string& content_digest) const;

  // The entries of one run (every device, dtype and build), and of the whole store.
  std::vector<Entry> ListRun(const std::string& run_digest) const;
  std::vector<Entry> List() const;

  StoreStats Stats() const;
  // Removes the keys `keep` rejects, then every blob no key names, and tmp/ files older than
  // `partial_age_s` (a live writer's file is younger).
  PruneResult Prune(const std::function<bool(const Entry&)>& keep,
                    double partial_age_s = 3600) const;

 private:
  DirStore(std::string root, AfterWrite after_write)
      : root_(std::move(root)), after_write_(std::move(after_write)) {}
  std::string BlobPath(const std::string& digest) const;
  std::string KeyPath(const std::string& run_digest, const std::string& key_digest) const;
  Status WriteAtomically(const std::string& path, std::string_view bytes) const;
  std::vector<Entry> ListUnder(const std::string& dir) const;

  std::string root_;
  AfterWrite after_write_;
};

// A file's bytes: NOT_FOUND when it does not exist, INTERNAL when it cannot be read.
StatusOr<std::string> ReadFileBytes(const std::string& path);

}  // namespace ts::refs
