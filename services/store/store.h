// The Touchstone store: every piece of sweep state lives in PostgreSQL (schema/), so a
// restarted scheduler carries on where the last one stopped.
//
// One Store owns one connection. It reconnects by itself: a call that finds the connection
// broken returns UNAVAILABLE, and the next call opens a new one.
//
// Requests are the scheduler API's messages (proto/touchstone/v1/scheduler.proto); the scheduler
// validates field shapes before calling, and the store checks what needs the database (lease
// tokens, job ownership, unknown names), naming the field in INVALID_ARGUMENT / NOT_FOUND /
// FAILED_PRECONDITION errors as the proto documents.
//
// Thread-safety: not thread-safe; one Store per thread (StorePool in the scheduler).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/query/compare.h"
#include "touchstone/v1/query.pb.h"
#include "touchstone/v1/scheduler.pb.h"

namespace ts::store {

namespace pb = ::touchstone::v1;

struct StoreOptions {
  std::string url;               // postgresql://user@host:port/db
  double lease_ttl_s = 30;       // a lease not renewed for this long expires
  int split_after_expiries = 2;  // a multi-model shard whose lease expired this often is split
  int max_lost_leases = 3;       // a model whose worker was lost this often is recorded `lost`
  double connect_timeout_s = 5;
  // Plan each statement once per connection (plan_cache_mode = force_generic_plan): for a
  // connection that runs only the short lease-path statements, where PostgreSQL would
  // otherwise re-plan the lease statement (~0.9 ms) on every call. Not for connections that
  // run queries over the partitioned results, whose custom plans prune partitions.
  bool generic_plans = false;
  // A worker that ends this many leases in a row without storing a result (lost, or released
  // empty), within quarantine_window_s, is quarantined for quarantine_s: it leases nothing, and
  // the leases it loses charge no model (migration 12).
  int quarantine_after = 5;
  double quarantine_window_s = 600;
  double quarantine_s = 600;
  // Detection: a model whose device time grew by more than this fraction over its baseline run
  // is a performance regression (services/query/perf_regression.h).
  double perf_threshold = 0.02;
};

struct ExpiryStats {
  int expired = 0;  // leases that ran out and were requeued
  int split = 0;    // shards split into single-model shards
  int lost = 0;  // models recorded `lost` after max_lost_leases
  int quarantined = 0;  // workers quarantined by these expiries
};

// A registered worker as `touchstone db workers` lists it.
struct WorkerRow {
  int64_t worker_id = 0;
  std::string name;
  std::string version;
  std::string last_seen;          // RFC 3339, UTC
  int failures = 0;               // leases ended in a row without a stored result
  std::string quarantined_until;  // RFC 3339, UTC; "" when not quarantined now
  int64_t shards_leased = 0;      // shards it holds now
};

// Retention: which finished sweeps to prune (Store::PruneSweeps, `touchstone db prune`). The
// rules combine: with both, a sweep goes when it finished longer ago than older_than_s and is
// not among the newest keep_last. Named sweeps go whatever the rules say.
struct PruneRequest {
  std::vector<int64_t> sweep_ids;  // these finished sweeps
  double older_than_s = -1;        // >= 0: finished sweeps that finished longer ago than this
  int64_t keep_last = -1;          // >= 0: every finished sweep but the newest keep_last
  bool dry_run = false;            // say what would go; drop nothing (a done sweep's
                                   // counts may be kept, as GetSweep keeps them)
};
struct PrunedSweep {
  int64_t sweep_id = 0;
  std::string name;
  std::string state;  // before pruning: done | cancelled
  int64_t models_recorded = 0;
};
struct PruneResult {
  std::vector<PrunedSweep> pruned;  // pruned now (with dry_run: would be), by sweep_id
  std::vector<std::string> kept;    // sweeps the rules matched but that stay, with why
  std::vector<int64_t> completed;   // earlier prunes cut off before their partitions went
  std::vector<int64_t> already;     // named sweeps that had been pruned before
};

using query::GroupTally;

// What CompareSweeps reads of two sweeps, in one snapshot.
struct SweepPairReads {
  std::vector<GroupTally> base_groups, head_groups;
  std::vector<query::ModelPair> differing;  // appeared, disappeared or flipped, by model_id
};

// What Gate reads of one sweep, in one snapshot.
struct GateReads {
  std::vector<GroupTally> groups;
  std::vector<pb::ResultRow> must_pass;  // the named models the sweep recorded
  // Per asked status that the tallies count: up to `examples` verdicts "model_id (mode)".
  std::map<std::string, std::vector<std::string>> forbid_examples;
};

struct RegressionRow {
  std::string model_id, mode, confirmation;  // pending | deterministic | flaky
};

// ---- Reference bundles (references.cc, migration 17; workers/refs/README.md) ----

// A bundle key as the store indexes it; the whole key is key_json.
struct ReferenceKeyRow {
  std::string key_digest;
  std::string model_id;
  uint64_t weights_seed = 0;
  std::string device, zoo_version, torch_version;
  std::string key_json;
};
// A stored key and the bundle it names.
struct ReferenceEntry {
  std::string key_digest, key_json, content_digest;
  int64_t size = 0;
};
// A model run a worker wants the references of (a shard's job).
struct ReferenceWant {
  std::string model_id;
  uint64_t seed = 0;
};
struct ReferenceCounts {
  int64_t keys = 0;     // keys with a bundle
  int64_t bundles = 0;  // distinct bundles
  int64_t bytes = 0;    // their size
  int64_t stored_bytes = 0;  // what they take in the table: deflated (workers/refs/blob.h)
};
// Where one sweep's primary runs took their references from (model_runs.refs_source).
struct SweepReferenceUse {
  int64_t sweep_id = 0;  // 0: no sweep recorded a model yet
  int64_t models = 0;    // primary runs that reached their references
  int64_t stored = 0;    // from a stored bundle
  int64_t computed = 0;  // computed and stored (no bundle, or one refused)
  int64_t completed = 0;  // from a stored bundle that lacked a gradient: completed, stored
  int64_t fresh = 0;     // computed and kept nowhere
  int64_t refused = 0;   // a stored bundle refused (warning), the references computed
  // Modes (of primary runs) judged against a reference from elsewhere too, and of them those
  // whose references disagree: the reference in question, not the device.
  int64_t modes_compared = 0;
  int64_t modes_in_question = 0;
};
struct ReferencePrune {
  int64_t keys_removed = 0;
  int64_t bundles_removed = 0;
  int64_t bytes_freed = 0;
};

struct QueueStats {
  int64_t shards_queued = 0;
  int64_t shards_leased = 0;
  int64_t jobs_pending = 0;
  int64_t sweeps_running = 0;
  int64_t workers_quarantined = 0;
};

class Store {
 public:
  static absl::StatusOr<std::unique_ptr<Store>> Connect(const StoreOptions& opts);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Applies the schema/ migrations this database lacks, under an advisory lock (several
  // schedulers may start at once). FAILED_PRECONDITION when the database is newer than us.
  absl::Status Migrate();
  // Versions applied, for tests and `touchstone db migrate`.
  absl::StatusOr<std::vector<int>> AppliedMigrations();

  absl::StatusOr<pb::RegisterWorkerResponse> RegisterWorker(const pb::RegisterWorkerRequest& r);
  // The next queued shard (highest priority, oldest first) with FOR UPDATE SKIP LOCKED;
  // has_shard=false when the queue is empty. NOT_FOUND for an unknown worker_id.
  // A request_id already used by this worker for a lease it still holds answers with that
  // shard and token (replayed), renewed, instead of leasing another.
  absl::StatusOr<pb::LeaseShardResponse> LeaseShard(int64_t worker_id,
                                                    const std::string& request_id = "");
  // LeaseShard for several workers in one transaction and one leasing statement (the
  // scheduler batches the requests that queue up behind a busy lease thread). One answer per
  // worker, in order: NOT_FOUND for an unknown worker_id, has_shard=false when the queue ran
  // out. The outer status is the transaction's (a database error fails every answer).
  absl::StatusOr<std::vector<absl::StatusOr<pb::LeaseShardResponse>>> LeaseShards(
      const std::vector<int64_t>& worker_ids, const std::vector<std::string>& request_ids = {});
  absl::StatusOr<pb::HeartbeatResponse> Heartbeat(const pb::HeartbeatRequest& r);
  // One transaction: checks the token (and renews the lease), stores results with COPY,
  // marks their jobs done, detects new failures vs the baseline and queues their confirmation
  // runs, settles confirmations. Idempotent: results whose job is done count as duplicates.
  absl::StatusOr<pb::ReportResultsResponse> ReportResults(const pb::ReportResultsRequest& r);
  absl::StatusOr<pb::FinishShardResponse> FinishShard(const pb::FinishShardRequest& r);
  // Requeues expired leases, splits shards that keep losing workers, records models lost too
  // often as `lost`, marks finished sweeps done.
  absl::StatusOr<ExpiryStats> ExpireLeases();
  // Start-up grace: every current lease runs at least `grace_s` more, so that workers that
  // kept running while no scheduler (or no database) answered can heartbeat and report on
  // their current token before expiry requeues their shards. Returns the leases extended.
  absl::StatusOr<int64_t> ExtendLeases(double grace_s);
  // Drops the stored answers of idempotent calls (request ids) older than `older_than_s`: a
  // retry comes within seconds; a day is plenty. Returns the rows dropped.
  absl::StatusOr<int64_t> ForgetOldRequests(double older_than_s = 86400);
  // Workers seen within `seen_within_s` (and every quarantined one), newest first.
  absl::StatusOr<std::vector<WorkerRow>> ListWorkers(double seen_within_s = 86400);

  absl::StatusOr<pb::UpsertModelsResponse> UpsertModels(const pb::UpsertModelsRequest& r);
  absl::StatusOr<pb::CreateSweepResponse> CreateSweep(const pb::CreateSweepRequest& r);
  // Progress counts; a pruned sweep answers with the counts it had when it was pruned.
  absl::StatusOr<pb::SweepProgress> GetSweep(int64_t sweep_id);
  // Takes and keeps the final counts and the query answers (queries.cc: group counters, one
  // compact row per model, op-demand and graph-break rankings) of up to `max` done sweeps that
  // lack them, oldest first. The scheduler's ticker queues it on the query pool with 1 each
  // tick, so that the first GetSweep or query after a sweep ends is as cheap as the rest, and
  // an upgraded database's old sweeps are done one at a time; a 100k-model sweep takes seconds
  // here, once. Returns how many.
  absl::StatusOr<int> SummarizeDoneSweeps(int max = 1);
  // Running -> cancelled; its queued shards end. Leased ones end at FinishShard or expiry.
  absl::StatusOr<pb::SweepProgress> CancelSweep(int64_t sweep_id);
  // Primary results of the sweep with model_id > after, ordered by model_id. NOT_FOUND for no
  // such sweep, FAILED_PRECONDITION for a pruned one.
  absl::StatusOr<std::vector<pb::ResultRow>> ListResults(int64_t sweep_id, const std::string& after,
                                                         int limit);
  // Drops finished sweeps' results: a tombstone row stays in sweeps (state 'pruned', the final
  // counts in summary); jobs, shards and regressions rows go in one transaction, then the
  // results_<id> and model_runs_<id> partitions are detached CONCURRENTLY (other sweeps'
  // reports never wait on the parent table's lock) and dropped. A prune cut off before its
  // partitions went is finished by the next call. Never pruned: running sweeps, the baseline
  // of a running sweep, a cancelled sweep whose shards are still leased (those are `kept`
  // when a rule matched them; named, they are FAILED_PRECONDITION). INVALID_ARGUMENT when no
  // sweep and no rule is given, NOT_FOUND for a named sweep that does not exist.
  absl::StatusOr<PruneResult> PruneSweeps(const PruneRequest& r);
  absl::StatusOr<QueueStats> Queue();
  absl::Status Ping();

  // ---- Reference bundles (references.cc) ----
  // Stores a bundle: its bytes once under their SHA-256, however many writers race (true when
  // this call stored them), and the key naming them (a key stored before now names these
  // bytes: a refused bundle is replaced by its recomputation). The caller has checked that
  // content_digest is the bytes' SHA-256 and that the key is the one they hold.
  absl::StatusOr<bool> PutReferenceBundle(const ReferenceKeyRow& key,
                                          const std::string& content_digest,
                                          const std::string& body);
  // The stored keys of these model runs: made on the CPU by this build (zoo and torch
  // versions), or by another implementation (numerics "none": GPU references) on any device.
  // At most 2,000 wants.
  absl::StatusOr<std::vector<ReferenceEntry>> ReferencesFor(const std::vector<ReferenceWant>& wants,
                                                            const std::string& zoo_version,
                                                            const std::string& torch_version);
  // The bundles a sweep's primary runs used or stored (model_runs.refs_key, refs_content), each
  // once; key_json and size are empty / 0 for a bundle this database does not hold (the
  // embedded default keeps them in a folder). NOT_FOUND for no such sweep.
  absl::StatusOr<std::vector<ReferenceEntry>> SweepReferences(int64_t sweep_id);
  // A bundle's bytes. NOT_FOUND when none has this digest.
  absl::StatusOr<std::string> ReferenceBody(const std::string& content_digest);
  absl::StatusOr<ReferenceCounts> CountReferences();
  // sweep_id 0: the newest sweep that recorded a model.
  absl::StatusOr<SweepReferenceUse> ReferenceUse(int64_t sweep_id);
  // Drops the engine's CPU keys of other builds than (zoo_version, torch_version) (they can
  // never be used again), then every bundle no key names. Other implementations' keys (numerics
  // "none", any device) stay.
  absl::StatusOr<ReferencePrune> PruneReferences(const std::string& zoo_version,
                                                 const std::string& torch_version);

  // ---- Read queries for the Query service (queries.cc) ----
  // Done sweeps are answered from the answers kept when they were summarized (a few rows),
  // running and cancelled ones (and done ones not summarized yet) live, by the same statements.
  // Every sweep-scoped call: NOT_FOUND "sweep_id: no sweep N" for no such sweep,
  // FAILED_PRECONDITION naming it for a pruned one (`field` names the request field).

  // Sweeps matching r's filters with sweep_id < before_id (0: no bound), newest first.
  absl::StatusOr<std::vector<pb::SweepInfo>> ListSweeps(const pb::ListSweepsRequest& r,
                                                        int64_t before_id, int limit);
  // One sweep's identity and counts (a pruned one too).
  absl::StatusOr<pb::SweepInfo> GetSweepInfo(int64_t sweep_id, const std::string& field);
  // The sweep's per (task, family, arch) counters.
  absl::StatusOr<std::vector<GroupTally>> SweepGroups(int64_t sweep_id, const std::string& field);
  // Both sweeps' counters and the models where they differ: recorded by one only, or pass in
  // one and not in the other for a mode both recorded (compact records: statuses, opcov,
  // total_ms). Computed in SQL: a comparison reads its flips, not two sweeps.
  absl::StatusOr<SweepPairReads> SweepPair(int64_t base_id, const std::string& base_field,
                                           int64_t head_id, const std::string& head_field);
  // The sweep's counters, the compact records of `must_pass`, and examples of the verdicts
  // with each status of `forbid` (by model_id, then mode).
  absl::StatusOr<GateReads> ReadForGate(int64_t sweep_id, const std::string& field,
                                        const std::vector<std::string>& must_pass,
                                        const std::vector<std::string>& forbid, size_t examples);
  // The sweep's regressions: (model_id, mode, confirmation).
  absl::StatusOr<std::vector<RegressionRow>> Regressions(int64_t sweep_id);
  // A model's full record in its last `last` sweeps, newest first. NOT_FOUND "model_id: ..."
  // when no sweep recorded it and the catalog lacks it.
  absl::StatusOr<pb::ModelHistory> ModelHistory(const std::string& model_id, int last);
  // The op-demand ranking for mode "eager" or "compile": ops[offset, offset + limit).
  absl::StatusOr<pb::OpDemandResponse> OpDemand(int64_t sweep_id, const std::string& mode,
                                                int64_t offset, int limit);
  // Graph-break reasons ranked: reasons[offset, offset + limit).
  absl::StatusOr<pb::GraphBreaksResponse> GraphBreaks(int64_t sweep_id, int64_t offset,
                                                      int limit);

  // Ops ranked by the primary models they break in `mode` (MODE_UNSPECIFIED: every mode, a
  // model counted once per op): ops[offset, offset + limit), and the sweep's counts of failing,
  // attributed and audited models (query.proto, SuspectOps). Kept answers for a done sweep,
  // live ones otherwise (suspects.cc).
  absl::StatusOr<pb::SuspectOpsResponse> SuspectOps(int64_t sweep_id, pb::Mode mode,
                                                    int64_t offset, int limit);

  // ---- Regression detection and alerts (detection.cc, alerts.cc; issue 11) ----

  // Detects the regressions of a done sweep against its baseline (0: its own; another is
  // INVALID_ARGUMENT "baseline_sweep_id: ...", reruns exist only against its own), in one
  // transaction: per model and mode, pass -> fail flips settled by the confirmation reruns
  // (deterministic: a regression; flaky: recorded, a quarantine candidate, never alerted;
  // crash, timeout and skipped never count); per class and per task the McNemar test and the
  // drop rule (services/query/regression_stats.h); regressions grouped into one alert per
  // (profile line, mode, cause); the lifecycle of the line's alerts (3 clean sweeps resolve,
  // a regression of a resolved cause reopens); quarantine. Detecting a sweep again changes
  // nothing and answers the same report. NOT_FOUND "sweep_id: ..." for no such sweep;
  // FAILED_PRECONDITION for a sweep that is not done, has no baseline, or was pruned (or whose
  // baseline was).
  absl::StatusOr<pb::DetectRegressionsResponse> DetectRegressions(int64_t sweep_id,
                                                                  int64_t baseline_sweep_id);
  // Also, in the same transaction, performance regressions (perf_detection.h): models whose
  // device time grew beyond StoreOptions::perf_threshold against the baseline, one alert of kind
  // performance per (mode, op that grew most), and per class and task the speedup line rule.
  //
  // The performance regressions of `sweep_id` against `baseline_sweep_id` (any sweep; the
  // figures are deterministic, no reruns needed), in every mode both recorded perf for, by
  // model_id then mode. NOT_FOUND for a missing sweep.
  absl::StatusOr<std::vector<pb::PerfRegression>> PerfRegressions(int64_t sweep_id,
                                                                  int64_t baseline_sweep_id);
  // Detects up to `max` done sweeps with a baseline that were not detected yet, oldest first
  // (the scheduler's ticker, after SummarizeDoneSweeps). Returns how many.
  absl::StatusOr<int> DetectDoneSweeps(int max = 1);
  // Alerts in `state` ("" any) with alert_id < before_id (0: no bound), newest first, each
  // with its models, classes and tasks.
  absl::StatusOr<std::vector<pb::Alert>> ListAlerts(const std::string& state, int64_t before_id,
                                                    int limit);
  // open -> acknowledged with the note (an acknowledged one gets the new note). NOT_FOUND
  // "alert_id: no alert N"; FAILED_PRECONDITION "alert_id: alert N is resolved".
  absl::StatusOr<pb::Alert> AckAlert(int64_t alert_id, const std::string& note,
                                     const std::string& by);

  // What Alertmanager delivery posts: every unresolved alert, and resolved ones not delivered
  // since they changed; `changed` counts the alerts of either kind changed since delivered.
  struct AlertBatch {
    std::vector<pb::Alert> alerts;
    int64_t changed = 0;
  };
  absl::StatusOr<AlertBatch> AlertsToDeliver();
  // Records that these versions of the alerts (by alert_id and updated_at) were delivered; an
  // alert changed since it was read is not marked, so its change is sent again.
  absl::Status MarkAlertsDelivered(const std::vector<pb::Alert>& delivered);
  // The alerts changed at or after `since_micros` (microseconds since the epoch), newest first,
  // at most 1000 (WatchAlerts).
  absl::StatusOr<std::vector<pb::Alert>> AlertsChangedSince(int64_t since_micros);
  // Quarantined models and modes, by model_id and mode.
  absl::StatusOr<std::vector<pb::QuarantineEntry>> ListQuarantine();
  // Regression alerts not resolved (drift warnings excluded), counted per task of their models
  // and severity: an alert with models of two tasks counts in both.
  struct OpenRegressions {
    std::string task, severity;
    int64_t alerts = 0;
  };
  absl::StatusOr<std::vector<OpenRegressions>> OpenRegressionsByTask();

  // ---- Schedules (schedules.cc; issue 13) ----
  // Times are passed in (the scheduler's clock, a test's) so that a test controls them.
  using TimePoint = std::chrono::system_clock::time_point;

  // Stores the schedule with its next due time after `now`; the profile is kept by content.
  // INVALID_ARGUMENT "cron: ..." for a bad spec, "name: ..." for a name already taken,
  // the filter's errors as CreateSweep's ("sweep.filter.tasks[0]: ...").
  absl::StatusOr<pb::Schedule> AddSchedule(const pb::AddScheduleRequest& r, TimePoint now);
  // Every schedule by name, each with its newest `runs` runs.
  absl::StatusOr<std::vector<pb::Schedule>> ListSchedules(int runs);
  // NOT_FOUND "name: no schedule X". Its sweeps stay (their schedule_id becomes NULL).
  absl::Status RemoveSchedule(const std::string& name);
  // Enabling sets the next due time after `now` (a schedule disabled for a week does not fire
  // for the times it missed). NOT_FOUND "name: no schedule X".
  absl::StatusOr<pb::Schedule> SetScheduleEnabled(const std::string& name, bool enabled,
                                                  TimePoint now);
  struct ScheduleTick {
    int started = 0;
    int skipped = 0;  // the previous sweep of the schedule was still running
    int failed = 0;   // CreateSweep refused (detail in schedule_runs)
  };
  // Handles every enabled schedule due at `now`, each in its own transaction holding the
  // schedule's row (FOR UPDATE SKIP LOCKED: another scheduler's ticker skips it, and after the
  // commit finds it no longer due): starts its sweep, or records the skip, or the failure, in
  // schedule_runs, and moves next_due past `now`. Due times missed while no scheduler ran are
  // handled once, at the earliest of them.
  absl::StatusOr<ScheduleTick> StartDueSchedules(TimePoint now);

  struct Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The profile line: the name less a trailing "-<version>" ("sim-2.1" -> "sim"), so that a
// profile's versions share their history; a name without a version is its own line.
std::string ProfileLine(const std::string& name);

// Embedded migrations, in order: {version, file name, SQL}.
struct Migration {
  int version;
  std::string name;
  std::string sql;
};
const std::vector<Migration>& Migrations();

}  // namespace ts::store
