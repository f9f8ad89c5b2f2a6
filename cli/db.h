// `touchstone db migrate` and `touchstone db prune`: the database's schema and retention.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/usage.h"

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
// Returns 0, or the exit code of an error (already printed as `cmd`'s).
int OpenStore(std::string db, const std::string& state_dir, OpenedStore* out,
              const CommandText& cmd);

// Returns the process exit code: 0 done, 2 usage or a bad flag or sweep, 1 database failure.
int DbCommand(const std::vector<std::string>& args);

}  // namespace ts::cli
