// A fleet worker's local copy of its scheduler's reference bundles (workers/refs/README.md):
// before a shard, the bundles of its jobs that the local folder store lacks are fetched from the
// scheduler (ListReferences, FetchReferences); the runner child reads and writes that folder;
// bundles it computed are uploaded (UploadReferences) before the results that used them are
// reported. The worker never reaches the database.
//
// Failures cost time, never results: a bundle that cannot be fetched is computed by the runner,
// one that cannot be uploaded stays local (and is uploaded with the next report).
//
// Thread-safety: one owner thread (the worker's main loop).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "touchstone/v1/scheduler.grpc.pb.h"
#include "workers/refs/store.h"

namespace ts::worker {

class ReferenceSync {
 public:
  // A context with the worker's token and deadline, for each call.
  using ContextFn = std::function<std::unique_ptr<grpc::ClientContext>()>;

  ReferenceSync(::touchstone::v1::Scheduler::Stub* stub, ContextFn context, refs::DirStore store)
      : stub_(stub), context_(std::move(context)), store_(std::move(store)) {}

  const refs::DirStore& store() const { return store_; }

  // Brings the scheduler's bundles of these (model id, seed) runs, made by this build's zoo and
  // torch versions (or on another device), into the local store. Returns how many were fetched
  // (the others were here already).
  absl::StatusOr<int> Fetch(const std::vector<std::pair<std::string, uint64_t>>& runs);

  // Notes a bundle the runner used or stored; Upload sends those the scheduler lacks.
  void Note(const std::string& content_digest);
  // Uploads the noted bundles the scheduler does not hold, as one stream. Returns how many it
  // sent; the ones not sent stay noted.
  absl::StatusOr<int> Upload();

 private:
  ::touchstone::v1::Scheduler::Stub* stub_;
  ContextFn context_;
  refs::DirStore store_;
  std::set<std::string> held_;     // content digests the scheduler holds
  std::set<std::string> pending_;  // noted, to upload
};

}  // namespace ts::worker
