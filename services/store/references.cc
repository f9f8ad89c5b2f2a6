// Reference bundles of a fleet (store.h, "Reference bundles"; migration 17): bytes once per
// SHA-256 in reference_bundles, keys naming them in reference_keys, and what each model run took
// (model_runs.refs_*).
#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>
#include <pqxx/binarystring>

#include "services/store/store_internal.h"
#include "workers/refs/blob.h"

namespace ts::store {
namespace {

constexpr size_t kMaxWants = 2000;

std::vector<ReferenceEntry> Entries(const pqxx::result& rows) {
  std::vector<ReferenceEntry> out;
  for (const auto& r : rows) {
    out.push_back({r[0].c_str(), r[1].c_str(), r[2].c_str(), r[3].as<int64_t>()});
  }
  return out;
}

}  // namespace

std::string ComparisonsJson(const google::protobuf::RepeatedPtrField<pb::ReferenceComparison>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const pb::ReferenceComparison& c : v) {
    std::string text;
    (void)google::protobuf::util::MessageToJsonString(c, &text);  // a plain message: no error
    a.push_back(nlohmann::json::parse(text));
  }
  return a.dump();
}

absl::Status ParseComparisons(const pqxx::field& f,
                              google::protobuf::RepeatedPtrField<pb::ReferenceComparison>* out) {
  if (f.is_null()) return absl::OkStatus();
  const auto a = nlohmann::json::parse(f.c_str(), nullptr, false);
  if (a.is_discarded() || !a.is_array()) {
    return absl::DataLossError("results.ref_comparisons: not an array");
  }
  for (const auto& j : a) {
    if (!google::protobuf::util::JsonStringToMessage(j.dump(), out->Add()).ok()) {
      return absl::DataLossError("results.ref_comparisons: not a ReferenceComparison: " +
                                 j.dump().substr(0, 200));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Store::PutReferenceBundle(const ReferenceKeyRow& key,
                                               const std::string& content_digest,
                                               const std::string& body) {
  // Kept as the folder store keeps it (workers/refs/blob.h): deflated when that saves 3%, which
  // PostgreSQL's own compression of the column does not reach (schema/0017). `size` stays the
  // bundle's.
  const std::string blob = refs::BlobOf(body);
  return impl_->Run("PutReferenceBundle", [&]() -> absl::StatusOr<bool> {
    pqxx::work w(*impl_->conn);
    // ON CONFLICT DO NOTHING: of two workers storing the same bytes, the second waits for the
    // first's commit and stores nothing.
    const pqxx::result stored =
        w.exec_params(R"(
      INSERT INTO reference_bundles (content_digest, body, size) VALUES ($1, $2, $3)
      ON CONFLICT (content_digest) DO NOTHING RETURNING 1)",
                      content_digest, pqxx::binarystring(blob), static_cast<int64_t>(body.size()));
    w.exec_params(R"(
      INSERT INTO reference_keys (key_digest, model_id, weights_seed, device, zoo_version,
                                  torch_version, key_json, content_digest)
      VALUES ($1, $2, $3::numeric, $4, $5, $6, $7::jsonb, $8)
      ON CONFLICT (key_digest) DO UPDATE
        SET content_digest = EXCLUDED.content_digest, stored_at = now()
        WHERE reference_keys.content_digest <> EXCLUDED.content_digest)",
                  key.key_digest, key.model_id, std::to_string(key.weights_seed), key.device,
                  key.zoo_version, key.torch_version, key.key_json, content_digest);
    w.commit();
    return !stored.empty();
  });
}

absl::StatusOr<std::vector<ReferenceEntry>> Store::ReferencesFor(
    const std::vector<ReferenceWant>& wants, const std::string& zoo_version,
    const std::string& torch_version) {
  if (wants.size() > kMaxWants) {
    return absl::InvalidArgumentError("wants: at most " + std::to_string(kMaxWants));
  }
  std::vector<std::string> ids, seeds;
  for (const auto& w : wants) {
    ids.push_back(w.model_id);
    seeds.push_back(std::to_string(w.seed));
  }
  return impl_->Run("ReferencesFor", [&]() -> absl::StatusOr<std::vector<ReferenceEntry>> {
    pqxx::nontransaction n(*impl_->conn);
    return Entries(n.exec_params(R"(
      SELECT k.key_digest, k.key_json::text, k.content_digest, b.size
      FROM unnest($1::text[], $2::numeric[]) AS w(model_id, seed)
      JOIN reference_keys k ON k.model_id = w.model_id AND k.weights_seed = w.seed
      JOIN reference_bundles b USING (content_digest)
      WHERE k.device <> 'cpu' OR k.key_json ->> 'numerics' = 'none'
         OR (k.zoo_version = $3 AND k.torch_version = $4)
      ORDER BY k.key_digest)",
                                 TextArray(ids), TextArray(seeds), zoo_version, torch_version));
  });
}

absl::StatusOr<std::vector<ReferenceEntry>> Store::SweepReferences(int64_t sweep_id) {
  return impl_->Run("SweepReferences", [&]() -> absl::StatusOr<std::vector<ReferenceEntry>> {
    pqxx::read_transaction t(*impl_->conn);
    if (t.exec_params("SELECT 1 FROM sweeps WHERE sweep_id = $1", sweep_id).empty()) {
      return absl::NotFoundError("sweep_id: no sweep " + std::to_string(sweep_id));
    }
    // LEFT JOINs: the embedded default keeps its bundles in a folder, not in these tables.
    return Entries(t.exec_params(R"(
      SELECT DISTINCT mr.refs_key, coalesce(k.key_json::text, ''), mr.refs_content,
             coalesce(b.size, 0)
      FROM model_runs mr
      LEFT JOIN reference_keys k ON k.key_digest = mr.refs_key
      LEFT JOIN reference_bundles b ON b.content_digest = mr.refs_content
      WHERE mr.sweep_id = $1 AND mr.run = 1 AND mr.refs_content <> ''
      ORDER BY mr.refs_content)",
                                 sweep_id));
  });
}

absl::StatusOr<std::string> Store::ReferenceBody(const std::string& content_digest) {
  return impl_->Run("ReferenceBody", [&]() -> absl::StatusOr<std::string> {
    pqxx::nontransaction n(*impl_->conn);
    const pqxx::result r = n.exec_params(
        "SELECT body FROM reference_bundles WHERE content_digest = $1", content_digest);
    if (r.empty()) return absl::NotFoundError("content_digest: no bundle " + content_digest);
    auto bundle = refs::BundleOf(pqxx::binarystring(r[0][0]).str());
    if (!bundle.ok()) {
      return absl::DataLossError("bundle " + content_digest + ": " + bundle.status().message());
    }
    return std::move(*bundle);
  });
}

absl::StatusOr<ReferenceCounts> Store::CountReferences() {
  return impl_->Run("CountReferences", [&]() -> absl::StatusOr<ReferenceCounts> {
    pqxx::nontransaction n(*impl_->conn);
    const pqxx::row r = n.exec(R"(
      SELECT (SELECT count(*) FROM reference_keys), count(*), coalesce(sum(size), 0),
             coalesce(sum(pg_column_size(body)), 0)
      FROM reference_bundles)")[0];
    return ReferenceCounts{r[0].as<int64_t>(), r[1].as<int64_t>(), r[2].as<int64_t>(),
                           r[3].as<int64_t>()};
  });
}

absl::StatusOr<SweepReferenceUse> Store::ReferenceUse(int64_t sweep_id) {
  return impl_->Run("ReferenceUse", [&]() -> absl::StatusOr<SweepReferenceUse> {
    pqxx::read_transaction t(*impl_->conn);
    if (sweep_id == 0) {
      const pqxx::result newest = t.exec(R"(
        SELECT s.sweep_id FROM sweeps s
        WHERE s.state <> 'pruned' AND EXISTS (SELECT 1 FROM model_runs mr
                                              WHERE mr.sweep_id = s.sweep_id AND mr.run = 1)
        ORDER BY s.sweep_id DESC LIMIT 1)");
      if (newest.empty()) return SweepReferenceUse{};
      sweep_id = newest[0][0].as<int64_t>();
    } else if (t.exec_params("SELECT 1 FROM sweeps WHERE sweep_id = $1", sweep_id).empty()) {
      return absl::NotFoundError("sweep_id: no sweep " + std::to_string(sweep_id));
    }
    const pqxx::row r = t.exec_params(R"(
      SELECT count(*) FILTER (WHERE refs_source <> ''),
             count(*) FILTER (WHERE refs_source = 'stored'),
             count(*) FILTER (WHERE refs_source = 'computed'),
             count(*) FILTER (WHERE refs_source = 'completed'),
             count(*) FILTER (WHERE refs_source = 'fresh'),
             count(*) FILTER (WHERE refs_warning LIKE 'stored reference bundle refused%')
      FROM model_runs WHERE sweep_id = $1 AND run = 1)",
                                      sweep_id)[0];
    SweepReferenceUse u;
    u.sweep_id = sweep_id;
    u.models = r[0].as<int64_t>();
    u.stored = r[1].as<int64_t>();
    u.computed = r[2].as<int64_t>();
    u.completed = r[3].as<int64_t>();
    u.fresh = r[4].as<int64_t>();
    u.refused = r[5].as<int64_t>();
    const pqxx::row q = t.exec_params(R"(
      SELECT count(*) FILTER (WHERE ref_comparisons IS NOT NULL),
             count(*) FILTER (WHERE reference_in_question)
      FROM results WHERE sweep_id = $1 AND run = 1)",
                                      sweep_id)[0];
    u.modes_compared = q[0].as<int64_t>();
    u.modes_in_question = q[1].as<int64_t>();
    return u;
  });
}

absl::StatusOr<ReferencePrune> Store::PruneReferences(const std::string& zoo_version,
                                                      const std::string& torch_version) {
  return impl_->Run("PruneReferences", [&]() -> absl::StatusOr<ReferencePrune> {
    pqxx::work w(*impl_->conn);
    ReferencePrune out;
    out.keys_removed = static_cast<int64_t>(w.exec_params(R"(
      DELETE FROM reference_keys
      WHERE device = 'cpu' AND key_json ->> 'numerics' <> 'none'
        AND (zoo_version <> $1 OR torch_version <> $2))",
                                                          zoo_version, torch_version)
                                                .affected_rows());
    const pqxx::row gone = w.exec(R"(
      WITH gone AS (
        DELETE FROM reference_bundles b
        WHERE NOT EXISTS (SELECT 1 FROM reference_keys k WHERE k.content_digest = b.content_digest)
        RETURNING size)
      SELECT count(*), coalesce(sum(size), 0) FROM gone)")[0];
    out.bundles_removed = gone[0].as<int64_t>();
    out.bytes_freed = gone[1].as<int64_t>();
    w.commit();
    return out;
  });
}

}  // namespace ts::store
