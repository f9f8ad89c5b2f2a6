// The reference-bundle RPCs (scheduler.proto, "Reference bundles"): a fleet's bundles live in
// PostgreSQL (migration 17), which workers never reach. Validated on gRPC's callback threads,
// answered on the pools; the streams fetch or store one bundle at a time.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "services/scheduler/scheduler_impl.h"
#include "workers/refs/format.h"
#include "workers/refs/key.h"

namespace ts::scheduler {
namespace {

pb::ReferenceEntry ToProto(const store::ReferenceEntry& e) {
  pb::ReferenceEntry out;
  out.set_key_digest(e.key_digest);
  out.set_key_json(e.key_json);
  out.set_content_digest(e.content_digest);
  out.set_size(e.size);
  return out;
}

// A whole uploaded bundle, checked: its bytes hash to the digest it came under, and hold a
// bundle whose key parses. The row the store indexes it by.
absl::StatusOr<store::ReferenceKeyRow> CheckBundle(const std::string& digest,
                                                   const std::string& body) {
  const std::string actual = refs::Sha256Hex(body);
  if (actual != digest) {
    return absl::InvalidArgumentError("bundle " + digest + ": its " + std::to_string(body.size()) +
                                      " bytes hash to " + actual + " (damaged or cut short)");
  }
  auto header = refs::ParseBundleHeader(body);
  if (!header.ok()) {
    return absl::InvalidArgumentError("bundle " + digest + ": " + header.status().message());
  }
  store::ReferenceKeyRow row;
  row.key_digest = refs::KeyDigest(header->key);
  row.model_id = header->key.model_id;
  row.weights_seed = header->key.weights_seed;
  row.device = header->key.device;
  row.zoo_version = header->key.zoo_version;
  row.torch_version = header->key.torch_version;
  row.key_json = refs::KeyToJson(header->key).dump();
  return row;
}

}  // namespace

grpc::ServerUnaryReactor* Scheduler::Impl::ListReferences(grpc::CallbackServerContext* ctx,
                                                          const pb::ListReferencesRequest* req,
                                                          pb::ListReferencesResponse* resp) {
  return Handle(query_pool.get(), "ListReferences", ctx, req, resp,
                [](store::Store& s, const auto& r, auto* out) -> absl::Status {
                  absl::StatusOr<std::vector<store::ReferenceEntry>> entries;
                  if (r.sweep_id() > 0) {
                    entries = s.SweepReferences(r.sweep_id());
                  } else {
                    std::vector<store::ReferenceWant> wants;
                    for (const auto& w : r.wants()) wants.push_back({w.model_id(), w.seed()});
                    entries = s.ReferencesFor(wants, r.zoo_version(), r.torch_version());
                  }
                  if (!entries.ok()) return entries.status();
                  for (const auto& e : *entries) *out->add_entries() = ToProto(e);
                  return absl::OkStatus();
                });
}

grpc::ServerUnaryReactor* Scheduler::Impl::ReferenceStats(grpc::CallbackServerContext* ctx,
                                                          const pb::ReferenceStatsRequest* req,
                                                          pb::ReferenceStatsResponse* resp) {
  return Handle(query_pool.get(), "ReferenceStats", ctx, req, resp,
                [](store::Store& s, const auto& r, auto* out) -> absl::Status {
                  auto counts = s.CountReferences();
                  if (!counts.ok()) return counts.status();
                  auto use = s.ReferenceUse(r.sweep_id());
                  if (!use.ok()) return use.status();
                  out->set_keys(counts->keys);
                  out->set_bundles(counts->bundles);
                  out->set_bytes(counts->bytes);
                  out->set_stored_bytes(counts->stored_bytes);
                  out->set_sweep_id(use->sweep_id);
                  out->set_models(use->models);
                  out->set_stored(use->stored);
                  out->set_computed(use->computed);
                  out->set_completed(use->completed);
                  out->set_fresh(use->fresh);
                  out->set_refused(use->refused);
                  out->set_modes_compared(use->modes_compared);
                  out->set_modes_in_question(use->modes_in_question);
                  return absl::OkStatus();
                });
}

grpc::ServerUnaryReactor* Scheduler::Impl::PruneReferences(grpc::CallbackServerContext* ctx,
                                                           const pb::PruneReferencesRequest* req,
                                                           pb::PruneReferencesResponse* resp) {
  return Handle(pool.get(), "PruneReferences", ctx, req, resp,
                [](store::Store& s, const auto& r, auto* out) -> absl::Status {
                  auto p = s.PruneReferences(r.zoo_version(), r.torch_version());
                  if (!p.ok()) return p.status();
                  out->set_keys_removed(p->keys_removed);
                  out->set_bundles_removed(p->bundles_removed);
                  out->set_bytes_freed(p->bytes_freed);
                  return absl::OkStatus();
                });
}

// FetchReferences: each bundle's bytes are read on the query pool when the previous bundle is
// written out, then sent as chunks, one write at a time.
class Scheduler::Impl::FetchReactor final : public grpc::ServerWriteReactor<pb::ReferenceChunk> {
 public:
  FetchReactor(Impl* impl, pb::FetchReferencesRequest req) : impl_(impl), req_(std::move(req)) {
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (offset_ < body_.size()) {
      WriteChunk();
      return;
    }
    if (index_ == req_.content_digests_size()) {
      Finish(grpc::Status::OK);
      return;
    }
    const bool queued = impl_->query_pool->Submit([this](store::Store* s) {
      if (!s) {
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "database unreachable; retry"));
        return;
      }
      auto body = s->ReferenceBody(req_.content_digests(index_));
      if (!body.ok()) {
        Finish(common::ToGrpcStatus(body.status()));
        return;
      }
      body_ = std::move(*body);
      offset_ = 0;
      digest_ = req_.content_digests(index_++);
      WriteChunk();
    });
    if (!queued) Finish(QueueFull());
  }
  void WriteChunk() {
    const size_t n = std::min(kMaxReferenceChunkBytes, body_.size() - offset_);
    chunk_.set_content_digest(digest_);
    chunk_.set_data(body_.substr(offset_, n));
    offset_ += n;
    chunk_.set_last(offset_ == body_.size());
    if (chunk_.last()) {
      body_.clear();
      offset_ = 0;
    }
    StartWrite(&chunk_);
  }

  Impl* impl_;
  pb::FetchReferencesRequest req_;
  int index_ = 0;
  std::string digest_, body_;
  size_t offset_ = 0;
  pb::ReferenceChunk chunk_;
};

grpc::ServerWriteReactor<pb::ReferenceChunk>* Scheduler::Impl::FetchReferences(
    grpc::CallbackServerContext* ctx, const pb::FetchReferencesRequest* req) {
  absl::Status st = Admit(ctx, "FetchReferences", *req);
  if (!st.ok()) {
    struct Refuse final : grpc::ServerWriteReactor<pb::ReferenceChunk> {
      explicit Refuse(const absl::Status& s) { Finish(common::ToGrpcStatus(s)); }
      void OnDone() override { delete this; }
    };
    return new Refuse(st);
  }
  return new FetchReactor(this, *req);
}

// UploadReferences: chunks are gathered into the current bundle; at its last chunk the bundle
// is checked and stored on the database pool, and the next chunk is read once that is done. A
// stream that ends (or is cut) mid-bundle stores nothing of it.
class Scheduler::Impl::UploadReactor final : public grpc::ServerReadReactor<pb::ReferenceChunk> {
 public:
  UploadReactor(Impl* impl, pb::UploadReferencesResponse* resp) : impl_(impl), resp_(resp) {
    StartRead(&chunk_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {  // the client's end of the stream, or a cut one
      if (!body_.empty() || !digest_.empty()) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "bundle " + digest_ + ": the stream ended before its last chunk; "
                            "nothing of it was stored"));
        return;
      }
      Finish(grpc::Status::OK);
      return;
    }
    if (absl::Status st = Validate(chunk_); !st.ok()) return Refuse(st);
    if (digest_.empty()) digest_ = chunk_.content_digest();
    if (chunk_.content_digest() != digest_) {
      return Refuse(absl::InvalidArgumentError(
          "content_digest: a chunk of " + chunk_.content_digest() + " before bundle " + digest_ +
          " ended"));
    }
    if (body_.size() + chunk_.data().size() > kMaxReferenceBundleBytes) {
      return Refuse(absl::InvalidArgumentError("bundle " + digest_ + ": over " +
                                               std::to_string(kMaxReferenceBundleBytes) +
                                               " bytes"));
    }
    body_ += chunk_.data();
    if (!chunk_.last()) {
      StartRead(&chunk_);
      return;
    }
    auto row = CheckBundle(digest_, body_);
    if (!row.ok()) return Refuse(row.status());
    const bool queued = impl_->pool->Submit([this, key = std::move(*row)](store::Store* s) {
      auto stored = s ? s->PutReferenceBundle(key, digest_, body_)
                      : absl::StatusOr<bool>(absl::UnavailableError("database unreachable; retry"));
      if (!stored.ok()) return Refuse(stored.status());
      if (*stored) {
        resp_->set_stored(resp_->stored() + 1);
      } else {
        resp_->set_duplicates(resp_->duplicates() + 1);
      }
      body_.clear();
      digest_.clear();
      StartRead(&chunk_);
    });
    if (!queued) Finish(QueueFull());
  }
  void OnDone() override { delete this; }

 private:
  void Refuse(const absl::Status& st) { Finish(common::ToGrpcStatus(st)); }

  Impl* impl_;
  pb::UploadReferencesResponse* resp_;
  pb::ReferenceChunk chunk_;
  std::string digest_, body_;
};

grpc::ServerReadReactor<pb::ReferenceChunk>* Scheduler::Impl::UploadReferences(
    grpc::CallbackServerContext* ctx, pb::UploadReferencesResponse* resp) {
  absl::Status st = Auth(ctx, "UploadReferences");
  if (!st.ok()) {
    struct Refuse final : grpc::ServerReadReactor<pb::ReferenceChunk> {
      explicit Refuse(const absl::Status& s) { Finish(common::ToGrpcStatus(s)); }
      void OnDone() override { delete this; }
    };
    return new Refuse(st);
  }
  return new UploadReactor(this, resp);
}

}  // namespace ts::scheduler
