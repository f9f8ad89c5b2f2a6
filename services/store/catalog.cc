// The model catalog: UpsertModels (COPY into a temporary table, then one upsert that touches
// only rows that changed).
#include <set>

#include "services/store/store_internal.h"

namespace ts::store {

absl::StatusOr<pb::UpsertModelsResponse> Store::UpsertModels(const pb::UpsertModelsRequest& r) {
  return impl_->Run("UpsertModels", [&]() -> absl::StatusOr<pb::UpsertModelsResponse> {
    pqxx::work w(*impl_->conn);
    w.exec(R"(CREATE TEMP TABLE IF NOT EXISTS models_in (LIKE models INCLUDING DEFAULTS)
              ON COMMIT DELETE ROWS)");
    std::vector<std::array<Cell, 6>> rows;
    std::set<std::string> ids;
    for (const auto& m : r.models()) {
      if (!ids.insert(m.id()).second) continue;  // last one wins would need ordering; first wins
      rows.push_back({m.id(), m.task(), m.arch(), m.family(), m.config_json(), m.config_hash()});
    }
    Copy<6>(w, "models_in", {"model_id", "task", "arch", "family", "config", "config_hash"}, rows);
    pqxx::result res = w.exec(R"(
      INSERT INTO models (model_id, task, arch, family, config, config_hash)
      SELECT model_id, task, arch, family, config, config_hash FROM models_in
      ON CONFLICT (model_id) DO UPDATE
        SET task = EXCLUDED.task, arch = EXCLUDED.arch, family = EXCLUDED.family,
            config = EXCLUDED.config, config_hash = EXCLUDED.config_hash, updated_at = now()
        WHERE (models.task, models.arch, models.family, models.config_hash, models.config)
              IS DISTINCT FROM
              (EXCLUDED.task, EXCLUDED.arch, EXCLUDED.family, EXCLUDED.config_hash, EXCLUDED.config)
      RETURNING (xmax = 0))");
    w.commit();
    pb::UpsertModelsResponse out;
    for (const auto& row : res) {
      if (row[0].as<bool>()) {
        out.set_inserted(out.inserted() + 1);
      } else {
        out.set_updated(out.updated() + 1);
      }
    }
    return out;
  });
}

}  // namespace ts::store
