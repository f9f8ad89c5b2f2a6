// Idempotent calls: the answer of each CreateSweep and ReportResults that carries a request_id
// is stored in the call's own transaction (rpc_requests, migration 12), so that a retry after a
// lost answer, or a twin racing it, is answered as the first call was instead of running again.
#include <openssl/sha.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "services/store/store_internal.h"

namespace ts::store {

namespace {

// SHA-256 of the request's deterministic encoding (maps in key order): the same request gives
// the same digest however its client built it.
std::string Digest(const google::protobuf::Message& m) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d);
  return std::string(reinterpret_cast<const char*>(d), sizeof(d));
}

}  // namespace

absl::StatusOr<std::optional<std::string>> BeginRequest(pqxx::transaction_base& w,
                                                         const char* method,
                                                         const std::string& request_id,
                                                         const google::protobuf::Message& req) {
  if (request_id.empty()) return std::nullopt;
  const std::string digest = Digest(req);
  // The answer is not known yet: an empty placeholder, replaced by EndRequest before commit.
  // Nobody else can see it before then, and a twin's INSERT waits for this transaction.
  pqxx::result ins = w.exec_params(R"(
    INSERT INTO rpc_requests (method, request_id, digest, response) VALUES ($1, $2, $3, '')
    ON CONFLICT DO NOTHING RETURNING 1)",
                                   method, request_id, pqxx::binarystring(digest));
  if (!ins.empty()) return std::nullopt;
  pqxx::result old = w.exec_params(
      "SELECT digest, response FROM rpc_requests WHERE method = $1 AND request_id = $2", method,
      request_id);
  if (old.empty()) {
    // Dropped as too old between the two statements: extremely unlikely; the caller retries.
    return absl::AbortedError("request_id: its earlier answer was just dropped; retry");
  }
  if (pqxx::binarystring(old[0][0]).str() != digest) {
    return absl::InvalidArgumentError("request_id: '" + request_id + "' was used for another " +
                                      method + " request; use a new id per request");
  }
  return pqxx::binarystring(old[0][1]).str();
}

void EndRequest(pqxx::transaction_base& w, const char* method, const std::string& request_id,
                const google::protobuf::Message& answer) {
  if (request_id.empty()) return;
  w.exec_params("UPDATE rpc_requests SET response = $3 WHERE method = $1 AND request_id = $2",
                method, request_id, pqxx::binarystring(answer.SerializeAsString()));
}

absl::StatusOr<int64_t> Store::ForgetOldRequests(double older_than_s) {
  return impl_->Run("ForgetOldRequests", [&]() -> absl::StatusOr<int64_t> {
    pqxx::work w(*impl_->conn);
    pqxx::result r = w.exec_params(
        "DELETE FROM rpc_requests WHERE created_at < now() - make_interval(secs => $1)",
        older_than_s);
    w.commit();
    return static_cast<int64_t>(r.affected_rows());
  });
}

}  // namespace ts::store
