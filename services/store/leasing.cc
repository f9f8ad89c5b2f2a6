// Leasing: workers, leases (one statement for several workers), heartbeats, expiry with
// requeue, splitting a shard that keeps losing workers, recording a model lost too often as
// crash, and the queue's gauges.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "services/common/error_signature.h"
#include "services/common/random.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

// 16 bytes from the CSPRNG: a token that cannot be guessed from the ones seen before.
std::string NewToken() { return common::RandomHex(16); }

// A pending job from a lease row whose columns from `at` on are job_id, model_id, run, arch,
// task, config (lease_jobs and replay_leases).
void AddJob(const pqxx::row& row, int at, pb::LeaseShardResponse& o) {
  pb::Job* j = o.add_jobs();
  j->set_job_id(row[at].as<int64_t>());
  j->set_model_id(row[at + 1].c_str());
  j->set_run(row[at + 2].as<int>());
  j->set_arch(row[at + 3].c_str());
  j->set_task(row[at + 4].c_str());
  j->set_config_json(row[at + 5].c_str());
}

// A shard leased (or found empty) by one round of the leasing statement, by slot in `waiting`.
struct LeaseRound {
  std::set<size_t> leased;  // slots that got a shard
  std::set<size_t> empty;   // of those, shards with no job left to run
};

// Fills the answers from the leasing statement's rows (one per job; see lease_jobs).
void ReadLeaseRows(const pqxx::result& rows, const std::vector<size_t>& waiting,
                   const std::vector<std::string>& tokens,
                   std::vector<pb::LeaseShardResponse>& out, std::vector<bool>& known,
                   LeaseRound& round) {
  for (const auto& row : rows) {
    const size_t slot = static_cast<size_t>(row[0].as<int64_t>() - 1);
    known[waiting[slot]] = true;
    pb::LeaseShardResponse& o = out[waiting[slot]];
    if (row[10].as<bool>()) o.set_quarantined(true);
    if (row[1].is_null()) continue;  // no queued shard left for this worker (or quarantined)
    if (round.leased.insert(slot).second) {
      o.set_shard_id(row[1].as<int64_t>());
      o.set_sweep_id(row[2].as<int64_t>());
      o.set_attempt(row[3].as<int>());
      o.set_lease_token(tokens[slot]);
    }
    if (row[4].is_null()) {
      round.empty.insert(slot);
      continue;
    }
    AddJob(row, 4, o);
  }
}

// Completes a leased shard's answer with its sweep's settings.
absl::Status CompleteLease(Store::Impl& impl, pqxx::transaction_base& n,
                           pb::LeaseShardResponse& o) {
  auto sweep = impl.Sweep(n, o.sweep_id());
  if (!sweep.ok()) return sweep.status();
  o.set_has_shard(true);
  *o.mutable_profile() = sweep->profile;
  for (const auto& m : sweep->modes) o.add_modes(m);
  o.set_model_timeout_s(sweep->model_timeout_s);
  o.set_audit_ops(sweep->audit_ops);
  // Confirmation runs draw new random numbers, so a flaky defect can show itself.
  for (auto& j : *o.mutable_jobs()) {
    j.set_seed(sweep->seed + static_cast<uint64_t>(j.run() - 1));
  }
  return absl::OkStatus();
}

// One round: leases a shard for each worker in `waiting` and completes the answers of those
// whose shard has jobs to run with their sweep's settings.
absl::StatusOr<LeaseRound> LeaseOnce(Store::Impl& impl, const std::vector<int64_t>& worker_ids,
                                     const std::vector<std::string>& request_ids,
                                     const std::vector<size_t>& waiting,
                                     std::vector<pb::LeaseShardResponse>& out,
                                     std::vector<bool>& known) {
  std::vector<int64_t> ids;
  std::vector<std::string> tokens, requests;
  for (size_t i : waiting) {
    ids.push_back(worker_ids[i]);
    tokens.push_back(NewToken());
    requests.push_back(i < request_ids.size() ? request_ids[i] : "");
  }
  LeaseRound round;
  pqxx::nontransaction n(*impl.conn);
  ReadLeaseRows(n.exec_prepared("lease_jobs", IdArray(ids), TextArray(tokens),
                                impl.opts.lease_ttl_s, TextArray(requests)),
                waiting, tokens, out, known, round);
  for (size_t slot : round.leased) {
    if (round.empty.count(slot)) continue;
    if (auto st = CompleteLease(impl, n, out[waiting[slot]]); !st.ok()) return st;
  }
  return round;
}  // the nontransaction ends before the next transaction on this connection

// Retried LeaseShard calls (a request id that already took a lease that this worker still
// holds) get that shard and token back, renewed; they leave `waiting`.
absl::Status ReplayLeases(Store::Impl& impl, const std::vector<int64_t>& worker_ids,
                          const std::vector<std::string>& request_ids,
                          std::vector<pb::LeaseShardResponse>& out, std::vector<bool>& known,
                          std::vector<size_t>& waiting) {
  std::vector<int64_t> ids;
  std::vector<std::string> requests;
  std::map<std::string, size_t> index;  // request id -> the first call carrying it
  for (size_t i = 0; i < request_ids.size() && i < worker_ids.size(); ++i) {
    if (request_ids[i].empty() || !index.emplace(request_ids[i], i).second) continue;
    ids.push_back(worker_ids[i]);
    requests.push_back(request_ids[i]);
  }
  if (ids.empty()) return absl::OkStatus();
  pqxx::nontransaction n(*impl.conn);
  pqxx::result rows = n.exec_prepared("replay_leases", IdArray(ids), TextArray(requests),
                                      impl.opts.lease_ttl_s);
  std::set<size_t> replayed;
  for (const auto& row : rows) {
    const size_t i = index.at(row[0].c_str());
    pb::LeaseShardResponse& o = out[i];
    if (replayed.insert(i).second) {
      known[i] = true;
      o.set_shard_id(row[1].as<int64_t>());
      o.set_sweep_id(row[2].as<int64_t>());
      o.set_attempt(row[3].as<int>());
      o.set_lease_token(row[4].c_str());
      o.set_replayed(true);
    }
    if (row[5].is_null()) continue;  // every job has its result: the worker finishes it
    AddJob(row, 5, o);
  }
  for (size_t i : replayed) {
    if (auto st = CompleteLease(impl, n, out[i]); !st.ok()) return st;
  }
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                               [&](size_t i) { return replayed.count(i) > 0; }),
                waiting.end());
  return absl::OkStatus();
}

// Closes the leased shards that had nothing left to run (their worker died between its last
// report and FinishShard); returns the workers, as indexes into worker_ids, that lease again.
std::vector<size_t> CloseEmptyShards(Store::Impl& impl, const LeaseRound& round,
                                     const std::vector<size_t>& waiting,
                                     std::vector<pb::LeaseShardResponse>& out) {
  std::vector<size_t> still;
  pqxx::work w(*impl.conn);
  for (size_t slot : round.empty) {
    pb::LeaseShardResponse& o = out[waiting[slot]];
    w.exec_params("UPDATE shards SET state = 'done', lease_token = NULL WHERE shard_id = $1",
                  o.shard_id());
    SettleSweep(w, o.sweep_id());
    o.Clear();
    still.push_back(waiting[slot]);
  }
  w.commit();
  return still;
}

// Records `lost` for every mode of a job whose worker was lost too often while running it: the
// infrastructure's failure (preemption, a dead node), not a verdict on the model.
void RecordLost(pqxx::transaction_base& txn, int64_t sweep_id, int64_t shard_id, int64_t job_id,
                const std::string& model_id, int run, int lost,
                const std::vector<std::string>& modes) {
  const std::string error = "the worker running this model was lost " + std::to_string(lost) +
                            " times (shard " + std::to_string(shard_id) +
                            "); recorded as lost: the model has no verdict of its own";
  std::vector<std::array<Cell, 7>> rows;
  for (const auto& m : modes) {
    rows.push_back({std::to_string(sweep_id), model_id, m, std::to_string(run), "lost", error,
                    common::ErrorSignature(error)});
  }
  Copy<7>(txn, "results",
          {"sweep_id", "model_id", "mode", "run", "status", "error", "error_signature"}, rows);
  txn.exec_params(R"(
    INSERT INTO model_runs (sweep_id, model_id, run) VALUES ($1, $2, $3)
    ON CONFLICT DO NOTHING)",
                  sweep_id, model_id, run);
  txn.exec_params("UPDATE jobs SET done = true WHERE job_id = $1", job_id);
  if (run > 1) SettleConfirmation(txn, sweep_id, model_id);  // it may have been the last one
  const int primary = run == 1 ? 1 : 0;  // recorded, but not a failure of the model
  txn.exec_params(R"(
    UPDATE shards SET jobs_done = jobs_done + 1, primary_done = primary_done + $2
    WHERE shard_id = $1)",
                  shard_id, primary);
}

// This shard keeps killing workers: one shard per pending model finds the culprit. The pending
// jobs' totals move with them; what was done stays with this shard.
void SplitShard(pqxx::transaction_base& w, int64_t shard_id, int64_t sweep_id, int priority,
                const pqxx::result& pending) {
  int primary_moved = 0;
  for (const auto& job : pending) {
    const int primary = job[2].as<int>() == 1 ? 1 : 0;
    primary_moved += primary;
    pqxx::result sh = w.exec_params(
        "INSERT INTO shards (sweep_id, priority, jobs_total, primary_total) "
        "VALUES ($1, $2, 1, $3) RETURNING shard_id",
        sweep_id, priority, primary);
    w.exec_params("UPDATE jobs SET shard_id = $1 WHERE job_id = $2", sh[0][0].as<int64_t>(),
                  job[0].as<int64_t>());
  }
  w.exec_params(R"(
    UPDATE shards SET state = 'split', jobs_total = jobs_total - $2,
                      primary_total = primary_total - $3
    WHERE shard_id = $1)",
                shard_id, static_cast<int>(pending.size()), primary_moved);
}

}  // namespace

bool NoteLeaseEnd(pqxx::transaction_base& w, const StoreOptions& o, int64_t worker_id,
                  bool produced, int* quarantined) {
  if (produced) {
    w.exec_params(
        "UPDATE workers SET failures = 0, failing_since = NULL WHERE worker_id = $1 AND failures > 0",
        worker_id);
    return false;
  }
  pqxx::result r = w.exec_params(R"(
    UPDATE workers SET
      failures = CASE WHEN failing_since IS NULL
                        OR failing_since < now() - make_interval(secs => $2)
                      THEN 1 ELSE failures + 1 END,
      failing_since = CASE WHEN failing_since IS NULL
                             OR failing_since < now() - make_interval(secs => $2)
                           THEN now() ELSE failing_since END
    WHERE worker_id = $1
    RETURNING failures, coalesce(quarantined_until > now(), false))",
                                 worker_id, o.quarantine_window_s);
  if (r.empty()) return false;
  if (r[0][1].as<bool>()) return true;
  if (r[0][0].as<int>() < o.quarantine_after) return false;
  w.exec_params(
      "UPDATE workers SET quarantined_until = now() + make_interval(secs => $2) WHERE worker_id = $1",
      worker_id, o.quarantine_s);
  // Its lost leases were its own fault: the charges it left on jobs still to run go back.
  w.exec_params(R"(
    UPDATE jobs SET lost_leases = lost_leases - cardinality(lost_by) +
                                  cardinality(array_remove(lost_by, $1::bigint)),
                    lost_by = array_remove(lost_by, $1::bigint)
    WHERE NOT done AND $1::bigint = ANY(lost_by)
      AND sweep_id IN (SELECT sweep_id FROM sweeps WHERE state = 'running'))",
                worker_id);
  if (quarantined != nullptr) ++*quarantined;
  return true;
}

namespace {

// After a shard's lease expired and it was requeued (`row`: shard_id, sweep_id, expiries,
// priority, job_in_flight): ends it when its sweep was cancelled or nothing is left, records its
// one model as `lost` when that model was lost too often, or splits it when it keeps losing
// workers. Only one job is charged the lost lease: the one the worker last said it was running
// (Heartbeat.job_id) or, when that one has its result, the next one it would have run (a worker
// runs a shard's jobs in job order); never the jobs that did not start.
absl::Status AfterExpiry(Store::Impl& impl, pqxx::transaction_base& w, const pqxx::row& row,
                         ExpiryStats& stats) {
  const int64_t shard_id = row[0].as<int64_t>();
  const int64_t sweep_id = row[1].as<int64_t>();
  const int expiries = row[2].as<int>();
  const int priority = row[3].as<int>();
  const auto end_shard = [&] {
    w.exec_params("UPDATE shards SET state = 'done' WHERE shard_id = $1", shard_id);
  };
  if (SweepState(w, sweep_id) == "cancelled") {
    end_shard();
    return absl::OkStatus();
  }
  const int64_t in_flight = row[4].is_null() ? 0 : row[4].as<int64_t>();
  // The worker that lost it: one more lease without a result, unless it stored some. A worker
  // that keeps losing leases (quarantined) is the problem, not the model it was running.
  const bool bad_worker = !row[5].is_null() &&
                          NoteLeaseEnd(w, impl.opts, row[5].as<int64_t>(), row[6].as<int>() > 0,
                                       &stats.quarantined);
  if (!bad_worker) {
    w.exec_params(R"(
      UPDATE jobs SET lost_leases = lost_leases + 1, lost_by = lost_by || $3::bigint
      WHERE job_id = (
        SELECT job_id FROM jobs WHERE shard_id = $1 AND NOT done
        ORDER BY (job_id >= $2) DESC, job_id LIMIT 1))",
                  shard_id, in_flight, row[5].is_null() ? int64_t{0} : row[5].as<int64_t>());
  }
  pqxx::result pending = w.exec_params(R"(
    SELECT job_id, model_id, run, lost_leases FROM jobs WHERE shard_id = $1 AND NOT done
    ORDER BY job_id)",
                                       shard_id);
  if (pending.empty()) {
    end_shard();
    return absl::OkStatus();
  }
  if (pending.size() == 1 && pending[0][3].as<int>() >= impl.opts.max_lost_leases) {
    auto sweep = impl.Sweep(w, sweep_id);
    if (!sweep.ok()) return sweep.status();
    RecordLost(w, sweep_id, shard_id, pending[0][0].as<int64_t>(), pending[0][1].c_str(),
               pending[0][2].as<int>(), pending[0][3].as<int>(), sweep->modes);
    end_shard();
    ++stats.lost;
    return absl::OkStatus();
  }
  if (pending.size() > 1 && expiries >= impl.opts.split_after_expiries) {
    SplitShard(w, shard_id, sweep_id, priority, pending);
    ++stats.split;
  }
  return absl::OkStatus();
}

}  // namespace

void PrepareLeaseStatements(pqxx::connection& c) {
  // One statement, in autocommit, leases a shard for each of several known workers ($1 ids,
  // $2 tokens, pairwise) and lists each shard's pending jobs: a lease costs one round trip.
  // Every known worker's slot has at least one row (null shard: the queue ran out; null job:
  // a shard with nothing left to run); unknown workers have none.
  c.prepare("lease_jobs", R"(
    WITH who AS (
      SELECT * FROM unnest($1::bigint[], $2::text[], $4::text[])
        WITH ORDINALITY AS w(worker_id, token, request, slot)),
    known AS (
      SELECT who.worker_id, who.token, who.request, who.slot,
             coalesce(w.quarantined_until > now(), false) AS quarantined
      FROM who JOIN workers w USING (worker_id)),
    eligible AS (
      SELECT *, row_number() OVER (ORDER BY slot) AS rn FROM known WHERE NOT quarantined),
    picked AS (
      SELECT shard_id, row_number() OVER () AS rn FROM (
        SELECT shard_id FROM shards WHERE state = 'queued'
        ORDER BY priority DESC, shard_id LIMIT (SELECT count(*) FROM eligible)
        FOR UPDATE SKIP LOCKED) q),
    leased AS (
      UPDATE shards s SET state = 'leased', attempt = s.attempt + 1, lease_token = e.token,
             lease_expires = now() + make_interval(secs => $3), worker_id = e.worker_id,
             lease_request = nullif(e.request, ''), job_in_flight = NULL, lease_results = 0
      FROM picked JOIN eligible e USING (rn)
      WHERE s.shard_id = picked.shard_id
      RETURNING s.shard_id, s.sweep_id, s.attempt, e.slot)
    SELECT k.slot, l.shard_id, l.sweep_id, l.attempt,
           j.job_id, j.model_id, j.run, m.arch, m.task, m.config::text, k.quarantined
    FROM known k
    LEFT JOIN leased l ON l.slot = k.slot
    LEFT JOIN jobs j ON j.shard_id = l.shard_id AND NOT j.done
    LEFT JOIN models m ON m.model_id = j.model_id
    ORDER BY k.slot, j.job_id)");
  // The leases that LeaseShard calls with these request ids ($2, pairwise with the workers $1)
  // took and still hold, renewed, with their pending jobs (ReplayLeases).
  c.prepare("replay_leases", R"(
    WITH q AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS q(worker_id, request)),
    r AS (
      UPDATE shards s SET lease_expires = now() + make_interval(secs => $3)
      FROM q WHERE s.state = 'leased' AND s.lease_request = q.request
                   AND s.worker_id = q.worker_id
      RETURNING s.lease_request, s.shard_id, s.sweep_id, s.attempt, s.lease_token)
    SELECT r.lease_request, r.shard_id, r.sweep_id, r.attempt, r.lease_token,
           j.job_id, j.model_id, j.run, m.arch, m.task, m.config::text
    FROM r LEFT JOIN jobs j ON j.shard_id = r.shard_id AND NOT j.done
    LEFT JOIN models m ON m.model_id = j.model_id
    ORDER BY r.shard_id, j.job_id)");
  // A heartbeat: renews the lease and notes the job in flight ($4; 0: between jobs).
  c.prepare("heartbeat", R"(
    UPDATE shards SET lease_expires = now() + make_interval(secs => $3),
                      job_in_flight = nullif($4::bigint, 0)
    WHERE shard_id = $1 AND lease_token = $2 AND state = 'leased'
    RETURNING sweep_id)");
  // Renews a lease when the token is current; every write of a lease holder starts with it.
  c.prepare("renew", R"(
    UPDATE shards SET lease_expires = now() + make_interval(secs => $3)
    WHERE shard_id = $1 AND lease_token = $2 AND state = 'leased'
    RETURNING sweep_id)");
}

absl::Status StaleToken(pqxx::transaction_base& txn, int64_t shard_id) {
  pqxx::result r = txn.exec_params("SELECT state FROM shards WHERE shard_id = $1", shard_id);
  if (r.empty()) return absl::NotFoundError("shard_id: no shard " + std::to_string(shard_id));
  return absl::FailedPreconditionError(
      "lease_token: not the current lease of shard " + std::to_string(shard_id) + " (shard is " +
      r[0][0].c_str() + "; the lease expired or the shard finished): drop the shard");
}

absl::StatusOr<pb::RegisterWorkerResponse> Store::RegisterWorker(
    const pb::RegisterWorkerRequest& r) {
  return impl_->Run("RegisterWorker", [&]() -> absl::StatusOr<pb::RegisterWorkerResponse> {
    pqxx::work w(*impl_->conn);
    // A worker restarted under the same name keeps its failure count and quarantine.
    pqxx::result res = w.exec_params(R"(
      INSERT INTO workers (name, version, slots, failures, failing_since, quarantined_until)
      SELECT $1, $2, $3, coalesce(p.failures, 0), p.failing_since, p.quarantined_until
      FROM (SELECT 1) one LEFT JOIN LATERAL (
        SELECT failures, failing_since, quarantined_until FROM workers
        WHERE name = $1 ORDER BY worker_id DESC LIMIT 1) p ON true
      RETURNING worker_id)",
                                     r.name(), r.version(), std::max(1, r.slots()));
    w.commit();
    pb::RegisterWorkerResponse out;
    out.set_worker_id(res[0][0].as<int64_t>());
    out.set_lease_ttl_s(impl_->opts.lease_ttl_s);
    out.set_heartbeat_interval_s(impl_->opts.lease_ttl_s / 3);
    return out;
  });
}

absl::StatusOr<pb::LeaseShardResponse> Store::LeaseShard(int64_t worker_id,
                                                        const std::string& request_id) {
  auto v = LeaseShards({worker_id}, {request_id});
  if (!v.ok()) return v.status();
  return std::move((*v)[0]);
}

absl::StatusOr<std::vector<absl::StatusOr<pb::LeaseShardResponse>>> Store::LeaseShards(
    const std::vector<int64_t>& worker_ids, const std::vector<std::string>& request_ids) {
  using Answers = std::vector<absl::StatusOr<pb::LeaseShardResponse>>;
  return impl_->Run("LeaseShard", [&]() -> absl::StatusOr<Answers> {
    std::vector<pb::LeaseShardResponse> out(worker_ids.size());
    std::vector<bool> known(worker_ids.size(), false);
    std::vector<size_t> waiting;  // indexes into worker_ids still without a shard
    for (size_t i = 0; i < worker_ids.size(); ++i) waiting.push_back(i);
    if (auto st = ReplayLeases(*impl_, worker_ids, request_ids, out, known, waiting); !st.ok()) {
      return st;
    }
    // A leased shard whose jobs all have results (its worker died between the last report and
    // FinishShard) is closed, and its worker takes the next one.
    for (int tries = 0; tries < 8 && !waiting.empty(); ++tries) {
      auto round = LeaseOnce(*impl_, worker_ids, request_ids, waiting, out, known);
      if (!round.ok()) return round.status();
      if (round->empty.empty()) break;
      waiting = CloseEmptyShards(*impl_, *round, waiting, out);
    }
    Answers answers;
    for (size_t i = 0; i < out.size(); ++i) {
      if (!known[i]) {
        answers.push_back(absl::NotFoundError("worker_id: no worker " +
                                              std::to_string(worker_ids[i]) + " (register first)"));
        continue;
      }
      if (!out[i].has_shard()) {
        // A quarantined worker asks again when its quarantine may have ended.
        out[i].set_retry_after_ms(out[i].quarantined()
                                      ? static_cast<int>(std::min(60.0, impl_->opts.quarantine_s) * 1000)
                                      : 500);
      }
      answers.push_back(std::move(out[i]));
    }
    return answers;
  });
}

absl::StatusOr<pb::HeartbeatResponse> Store::Heartbeat(const pb::HeartbeatRequest& r) {
  return impl_->Run("Heartbeat", [&]() -> absl::StatusOr<pb::HeartbeatResponse> {
    pqxx::work w(*impl_->conn);
    pqxx::result s = w.exec_prepared("heartbeat", r.shard_id(), r.lease_token(),
                                     impl_->opts.lease_ttl_s, r.job_id());
    if (s.empty()) return StaleToken(w, r.shard_id());
    w.exec_params("UPDATE workers SET last_seen = now() WHERE worker_id = $1", r.worker_id());
    const std::string state = SweepState(w, s[0][0].as<int64_t>());
    w.commit();
    pb::HeartbeatResponse out;
    out.set_lease_expires_in_s(impl_->opts.lease_ttl_s);
    out.set_drain(state == "cancelled");
    return out;
  });
}

absl::StatusOr<ExpiryStats> Store::ExpireLeases() {
  return impl_->Run("ExpireLeases", [&]() -> absl::StatusOr<ExpiryStats> {
    ExpiryStats stats;
    pqxx::work w(*impl_->conn);
    pqxx::result expired = w.exec(R"(
      UPDATE shards s SET state = 'queued', lease_token = NULL, worker_id = NULL,
             expiries = s.expiries + 1
      FROM (SELECT shard_id, worker_id, lease_results FROM shards
            WHERE state = 'leased' AND lease_expires < now()
            FOR UPDATE SKIP LOCKED) e
      WHERE s.shard_id = e.shard_id
      RETURNING s.shard_id, s.sweep_id, s.expiries, s.priority, s.job_in_flight, e.worker_id,
                e.lease_results)");
    for (const auto& row : expired) {
      ++stats.expired;
      if (auto st = AfterExpiry(*impl_, w, row, stats); !st.ok()) return st;
    }
    // Sweeps whose last FinishShard raced another one settle here.
    pqxx::result running = w.exec("SELECT sweep_id FROM sweeps WHERE state = 'running'");
    for (const auto& row : running) SettleSweep(w, row[0].as<int64_t>());
    w.commit();
    return stats;
  });
}

absl::StatusOr<int64_t> Store::ExtendLeases(double grace_s) {
  return impl_->Run("ExtendLeases", [&]() -> absl::StatusOr<int64_t> {
    pqxx::work w(*impl_->conn);
    pqxx::result r = w.exec_params(R"(
      UPDATE shards SET lease_expires = greatest(lease_expires, now() + make_interval(secs => $1))
      WHERE state = 'leased')",
                                   grace_s);
    w.commit();
    return static_cast<int64_t>(r.affected_rows());
  });
}

absl::StatusOr<std::vector<WorkerRow>> Store::ListWorkers(double seen_within_s) {
  return impl_->Run("ListWorkers", [&]() -> absl::StatusOr<std::vector<WorkerRow>> {
    pqxx::nontransaction n(*impl_->conn);
    pqxx::result rows = n.exec_params(R"(
      SELECT w.worker_id, w.name, w.version,
             to_char(w.last_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), w.failures,
             CASE WHEN w.quarantined_until > now()
                  THEN to_char(w.quarantined_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                  ELSE '' END,
             (SELECT count(*) FROM shards s WHERE s.worker_id = w.worker_id AND s.state = 'leased')
      FROM workers w
      WHERE w.last_seen > now() - make_interval(secs => $1) OR w.quarantined_until > now()
      ORDER BY w.worker_id DESC)",
                                      seen_within_s);
    std::vector<WorkerRow> out;
    for (const auto& r : rows) {
      out.push_back({r[0].as<int64_t>(), r[1].c_str(), r[2].c_str(), r[3].c_str(), r[4].as<int>(),
                     r[5].c_str(), r[6].as<int64_t>()});
    }
    return out;
  });
}

absl::StatusOr<QueueStats> Store::Queue() {
  return impl_->Run("Queue", [&]() -> absl::StatusOr<QueueStats> {
    pqxx::nontransaction n(*impl_->conn);
    pqxx::result r = n.exec(R"(
      SELECT count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'leased'),
             (SELECT count(*) FROM sweeps WHERE state = 'running')
      FROM shards WHERE state IN ('queued', 'leased'))");
    QueueStats q;
    q.shards_queued = r[0][0].as<int64_t>();
    q.shards_leased = r[0][1].as<int64_t>();
    q.sweeps_running = r[0][2].as<int64_t>();
    pqxx::result j = n.exec(R"(
      SELECT count(*) FROM jobs j JOIN shards s USING (shard_id)
      WHERE NOT j.done AND s.state IN ('queued', 'leased'))");
    q.jobs_pending = j[0][0].as<int64_t>();
    q.workers_quarantined =
        n.exec("SELECT count(*) FROM workers WHERE quarantined_until > now()")[0][0].as<int64_t>();
    return q;
  });
}

}  // namespace ts::store
