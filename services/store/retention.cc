// Retention: PruneSweeps turns finished sweeps into tombstones (their final counts kept) and
// drops their partitions without locking the parent tables (schema/README.md).
#include <algorithm>

#include "services/store/store_internal.h"

namespace ts::store {

namespace {

// Why a finished sweep must stay ("" when it may go). Tombstone asks again under the sweep's
// row lock, which a CreateSweep naming it as a baseline also takes (FOR SHARE), so that answer
// holds.
std::string WhyKept(pqxx::transaction_base& w, int64_t id) {
  pqxx::result b = w.exec_params(
      "SELECT sweep_id FROM sweeps WHERE baseline_sweep = $1 AND state = 'running' LIMIT 1", id);
  if (!b.empty()) return "the baseline of running sweep " + std::string(b[0][0].c_str());
  pqxx::result l =
      w.exec_params("SELECT count(*) FROM shards WHERE sweep_id = $1 AND state = 'leased'", id);
  if (l[0][0].as<int64_t>() > 0) {
    return std::string(l[0][0].c_str()) +
           " of its shards are still leased (cancelled; prune again once their workers "
           "have drained)";
  }
  return "";
}

// The named sweeps that may go, in order; an error for one that may not (or does not exist).
// Those pruned before are listed in out.already.
absl::StatusOr<std::vector<int64_t>> NamedSweeps(pqxx::transaction_base& w,
                                                 const PruneRequest& r, PruneResult& out) {
  std::vector<int64_t> chosen;
  for (size_t i = 0; i < r.sweep_ids.size(); ++i) {
    const int64_t id = r.sweep_ids[i];
    const std::string field = "sweep_ids[" + std::to_string(i) + "]";
    const std::string state = SweepState(w, id);
    if (state.empty()) return absl::NotFoundError(field + ": no sweep " + std::to_string(id));
    if (state == "pruned") {  // leftovers of an interrupted prune are finished below
      out.already.push_back(id);
      continue;
    }
    if (state == "running") {
      return absl::FailedPreconditionError(field + ": sweep " + std::to_string(id) +
                                           " is running; cancel it first");
    }
    if (std::string why = WhyKept(w, id); !why.empty()) {
      return absl::FailedPreconditionError(field + ": sweep " + std::to_string(id) + " is " + why);
    }
    chosen.push_back(id);
  }
  return chosen;
}

// Adds to `chosen` the finished sweeps the rules (older_than_s, keep_last) match; those that
// must stay go to out.kept with why.
void RuleSweeps(pqxx::transaction_base& w, const PruneRequest& r, std::vector<int64_t>& chosen,
                PruneResult& out) {
  if (r.older_than_s < 0 && r.keep_last < 0) return;
  pqxx::result rows = w.exec_params(R"(
    SELECT sweep_id FROM (
      SELECT sweep_id, finished_at,
             row_number() OVER (ORDER BY finished_at DESC, sweep_id DESC) AS newest
      FROM sweeps WHERE state IN ('done', 'cancelled')) f
    WHERE ($1 < 0 OR finished_at < now() - make_interval(secs => greatest($1, 0)))
      AND ($2 < 0 OR newest > $2)
    ORDER BY sweep_id)",
                                    r.older_than_s, r.keep_last);
  for (const auto& row : rows) {
    const int64_t id = row[0].as<int64_t>();
    if (std::find(chosen.begin(), chosen.end(), id) != chosen.end()) continue;
    if (std::string why = WhyKept(w, id); !why.empty()) {
      out.kept.push_back("sweep " + std::to_string(id) + ": " + why);
      continue;
    }
    chosen.push_back(id);
  }
}

// Step 1, one transaction: which sweeps go, into out.pruned with their counts (a done sweep's
// are kept, one row; only a cancelled one is counted).
absl::Status ChooseSweeps(Store::Impl& impl, const PruneRequest& r, PruneResult& out) {
  pqxx::work w(*impl.conn);
  auto chosen = NamedSweeps(w, r, out);
  if (!chosen.ok()) return chosen.status();
  RuleSweeps(w, r, *chosen, out);
  std::sort(chosen->begin(), chosen->end());
  for (int64_t id : *chosen) {
    auto progress = Progress(w, id);
    if (!progress.ok()) return progress.status();
    pqxx::result s = w.exec_params("SELECT name FROM sweeps WHERE sweep_id = $1", id);
    out.pruned.push_back({id, s[0][0].c_str(), progress->state(), progress->models_recorded()});
  }
  w.commit();
  return absl::OkStatus();
}

// Step 2, per sweep, one transaction: the tombstone with the final counts, and its rows go.
// Sweeps that changed since step 1, or must now stay, leave out.pruned.
absl::Status Tombstone(Store::Impl& impl, PruneResult& out) {
  std::vector<PrunedSweep> done;
  for (const PrunedSweep& p : out.pruned) {
    pqxx::work w(*impl.conn);
    pqxx::result s =
        w.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1 FOR UPDATE", p.sweep_id);
    const std::string state = s.empty() ? "" : s[0][0].c_str();
    if (state != "done" && state != "cancelled") continue;  // changed since step 1
    if (std::string why = WhyKept(w, p.sweep_id); !why.empty()) {
      out.kept.push_back("sweep " + std::to_string(p.sweep_id) + ": " + why);
      continue;
    }
    auto progress = Progress(w, p.sweep_id);
    if (!progress.ok()) return progress.status();
    w.exec_params(
        "UPDATE sweeps SET state = 'pruned', pruned_at = now(), summary = $2::jsonb "
        "WHERE sweep_id = $1",
        p.sweep_id, SummaryJson(*progress));
    w.exec_params("DELETE FROM regressions WHERE sweep_id = $1", p.sweep_id);
    w.exec_params("DELETE FROM jobs WHERE sweep_id = $1", p.sweep_id);
    w.exec_params("DELETE FROM shards WHERE sweep_id = $1", p.sweep_id);
    DropMaterialized(w, p.sweep_id);
    w.commit();
    impl.sweeps.erase(p.sweep_id);
    done.push_back(p);
  }
  out.pruned = std::move(done);
  return absl::OkStatus();
}

// Detaches (CONCURRENTLY: the parent table is never locked against other sweeps' reports)
// and drops one of a pruned sweep's partitions. Each step is idempotent, and a detach that
// was cut off half-way (pg_inherits.inhdetachpending) is finalized.
void DropPartition(pqxx::connection& c, const std::string& parent, int64_t sweep_id) {
  const std::string name = parent + "_" + std::to_string(sweep_id);
  pqxx::nontransaction n(c);  // DETACH ... CONCURRENTLY cannot run in a transaction
  pqxx::result r = n.exec_params(
      "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = to_regclass($1)", name);
  if (!r.empty()) {
    n.exec("ALTER TABLE " + parent + " DETACH PARTITION " + name +
           (r[0][0].as<bool>() ? " FINALIZE" : " CONCURRENTLY"));
  }
  n.exec("DROP TABLE IF EXISTS " + name);
}

// Step 3: the partitions of every pruned sweep that still has one: this call's, and those of
// an earlier call that was cut off after its tombstones (listed in out.completed).
void DropPartitions(Store::Impl& impl, PruneResult& out) {
  std::vector<int64_t> left;
  {
    pqxx::nontransaction n(*impl.conn);
    for (const auto& row : n.exec(R"(
           SELECT sweep_id FROM sweeps WHERE state = 'pruned'
             AND (to_regclass('results_' || sweep_id) IS NOT NULL
                  OR to_regclass('model_runs_' || sweep_id) IS NOT NULL)
           ORDER BY sweep_id)")) {
      left.push_back(row[0].as<int64_t>());
    }
  }
  for (int64_t id : left) {
    DropPartition(*impl.conn, "results", id);
    DropPartition(*impl.conn, "model_runs", id);
    const bool now = std::any_of(out.pruned.begin(), out.pruned.end(),
                                 [id](const PrunedSweep& p) { return p.sweep_id == id; });
    if (!now) out.completed.push_back(id);
  }
}

}  // namespace

absl::StatusOr<PruneResult> Store::PruneSweeps(const PruneRequest& r) {
  if (r.sweep_ids.empty() && r.older_than_s < 0 && r.keep_last < 0) {
    return absl::InvalidArgumentError(
        "sweep_ids: name the sweeps to prune, or give older_than_s or keep_last");
  }
  return impl_->Run("PruneSweeps", [&]() -> absl::StatusOr<PruneResult> {
    PruneResult out;
    if (auto st = ChooseSweeps(*impl_, r, out); !st.ok()) return st;
    if (r.dry_run) return out;
    if (auto st = Tombstone(*impl_, out); !st.ok()) return st;
    DropPartitions(*impl_, out);
    return out;
  });
}

}  // namespace ts::store
