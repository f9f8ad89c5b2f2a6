// The database a `touchstone` command opens: `--db URL`, else the embedded cluster's under a
// state folder (db.cc's `db prune | workers`, refs.cc's `refs stats | export`).
//
// Thread-safety: one command per process, on the main thread.
#pragma once

#include <memory>
#include <string>

namespace ts::store {
class EmbeddedPostgres;
class Store;
}  // namespace ts::store

namespace ts::cli {

// The store of `db`, else of the embedded cluster under `state_dir` (started, never created:
// these commands only read or trim what a sweep made), migrated.
struct OpenedStore {
  OpenedStore();
  ~OpenedStore();
  std::unique_ptr<store::EmbeddedPostgres> pg;  // when embedded: stopped when this goes
  std::unique_ptr<store::Store> store;
};
// Returns 0, or the exit code of an error (already printed for the running command: usage.h).
int OpenStore(std::string db, const std::string& state_dir, OpenedStore* out);

}  // namespace ts::cli
