#include "services/worker/reference_sync.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "services/common/grpc_status.h"
#include "workers/refs/key.h"
#include "workers/refs/zoo_version.h"

namespace ts::worker {
namespace {

namespace pb = ::touchstone::v1;

constexpr size_t kChunkBytes = 1 << 20;  // as the scheduler sends them (validate.h)

}  // namespace

absl::StatusOr<int> ReferenceSync::Fetch(const std::vector<std::pair<std::string, uint64_t>>& runs) {
  if (runs.empty()) return 0;
  pb::ListReferencesRequest list;
  for (const auto& [id, seed] : runs) {
    pb::ReferenceWant* w = list.add_wants();
    w->set_model_id(id);
    w->set_seed(seed);
  }
  list.set_zoo_version(refs::ZooVersion());
  list.set_torch_version(refs::TorchVersion());
  pb::ListReferencesResponse listed;
  auto ctx = context_();
  grpc::Status st = stub_->ListReferences(ctx.get(), list, &listed);
  if (!st.ok()) return common::FromGrpcStatus(st);
  // Only the bundles whose key this store does not already name with the same bytes.
  pb::FetchReferencesRequest fetch;
  for (const auto& e : listed.entries()) {
    held_.insert(e.content_digest());
    const auto key = refs::KeyFromJson(nlohmann::json::parse(e.key_json(), nullptr, false));
    if (!key.ok()) continue;  // a key this build cannot read: not one it would use
    if (store_.ContentOf(*key) == e.content_digest() && store_.HasBlob(e.content_digest())) {
      continue;
    }
    fetch.add_content_digests(e.content_digest());
  }
  if (fetch.content_digests_size() == 0) return 0;
  auto fctx = context_();
  auto reader = stub_->FetchReferences(fctx.get(), fetch);
  pb::ReferenceChunk chunk;
  std::string body;
  int fetched = 0;
  while (reader->Read(&chunk)) {
    body += chunk.data();
    if (!chunk.last()) continue;
    // Import files it under the key written inside; a bundle that is not what it was listed as
    // is dropped (the runner computes its references).
    if (refs::Sha256Hex(body) == chunk.content_digest() && store_.Import(body).ok()) ++fetched;
    body.clear();
  }
  st = reader->Finish();
  if (!st.ok()) return common::FromGrpcStatus(st);
  return fetched;
}

void ReferenceSync::Note(const std::string& content_digest) {
  if (!content_digest.empty() && !held_.count(content_digest)) pending_.insert(content_digest);
}

absl::StatusOr<int> ReferenceSync::Upload() {
  if (pending_.empty()) return 0;
  pb::UploadReferencesResponse resp;
  auto ctx = context_();
  auto writer = stub_->UploadReferences(ctx.get(), &resp);
  std::vector<std::string> sent;
  for (const std::string& digest : pending_) {
    auto bytes = store_.ReadBlob(digest);
    if (!bytes.ok()) continue;  // gone from the local store (pruned): nothing to send
    pb::ReferenceChunk chunk;
    chunk.set_content_digest(digest);
    bool ok = true;
    size_t off = 0;
    do {
      const size_t n = std::min(kChunkBytes, bytes->size() - off);
      chunk.set_data(bytes->substr(off, n));
      off += n;
      chunk.set_last(off == bytes->size());
      ok = writer->Write(chunk);
    } while (ok && !chunk.last());
    if (!ok) break;  // the scheduler refused the stream: Finish says why
    sent.push_back(digest);
  }
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (!st.ok()) return common::FromGrpcStatus(st);
  for (const std::string& d : sent) {
    pending_.erase(d);
    held_.insert(d);
  }
  // A digest whose blob is gone cannot be sent; forget it rather than retry forever.
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = store_.HasBlob(*it) ? std::next(it) : pending_.erase(it);
  }
  return static_cast<int>(sent.size());
}

}  // namespace ts::worker
