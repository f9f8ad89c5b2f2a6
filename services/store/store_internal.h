// What the store's files share behind the Store facade (store.h): the connection (Store::Impl),
// the PostgreSQL text forms of values, the one reading of a ModeVerdict's mode and status, and
// the steps that more than one concern runs (sweep settings, settling, progress, closing a
// shard). Each concern's own steps stay in its file's anonymous namespace.
//
// Private to services/store: pqxx appears here and nowhere above the store.
//
// Thread-safety: as Store: one Impl per thread. The free functions are pure or work only on the
// transaction they are given.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/store/pg_status.h"
#include "services/store/store.h"
#include "touchstone/v1/query.pb.h"

namespace ts::store {

// ---- PostgreSQL text forms (pg_text.cc) ----

// A COPY cell: NULL when empty.
using Cell = std::optional<std::string>;

// A double as PostgreSQL reads it back exactly (%.17g, NaN, Infinity, -Infinity).
std::string Num(double v);
// Array literals: {"a","b\"c"}, {1.5,NaN}, {1,2}.
std::string TextArray(const std::vector<std::string>& v);
std::string DoubleArray(const google::protobuf::RepeatedField<double>& v);
std::string IdArray(const std::vector<int64_t>& v);
// A text[] column's elements; empty for NULL.
std::vector<std::string> ParseTextArray(const pqxx::field& f);
// A verdict's suspects as results.suspects keeps them: a JSON array of {op, shapes, dtype,
// ratio, calls, total_calls} in the record's order (ratios are finite: the scheduler refuses
// others, and 1e300 stands for a non-finite mismatch).
std::string SuspectsJson(const google::protobuf::RepeatedPtrField<pb::Suspect>& v);
// results.suspects back into `out`, exactly as written (nothing for NULL). DATA_LOSS naming
// the column when the text is not such an array.
absl::Status ParseSuspects(const pqxx::field& f,
                           google::protobuf::RepeatedPtrField<pb::Suspect>* out);
// The ops a replay could not check, as results.unchecked keeps them: a JSON array of {op, calls,
// error}; ParseUnchecked reads it back (nothing for NULL; DATA_LOSS naming the column).
std::string UncheckedJson(const google::protobuf::RepeatedPtrField<pb::UncheckedOp>& v);
absl::Status ParseUnchecked(const pqxx::field& f,
                            google::protobuf::RepeatedPtrField<pb::UncheckedOp>* out);

// A perf's top ops as results.perf_top_ops keeps them: a JSON array of {op, us, share}, largest
// first (non-finite numbers as null).
std::string TopOpsJson(const google::protobuf::RepeatedPtrField<pb::OpTime>& v);
// results.perf_* back into a ModeVerdict's perf when perf_device_us is not NULL; `first` is the
// column of perf_device_us, the other ten follow in migration 0016's order. DATA_LOSS naming
// the column when perf_top_ops is not such an array.
absl::Status ParsePerf(const pqxx::row& row, int first, pb::ModeVerdict* out);
// A perf as a JSON object of the perf columns ({device_us, flops, bytes, mfu, launches,
// fallback_us, transfer_bytes, peak_device_bytes, top_ops, speedup, compression}; null: NaN).
absl::Status PerfFromJson(const nlohmann::json& j, pb::Perf* out);
// A perf_top_ops array ({op, us, share}) into `out`'s top ops.
absl::Status ParseTopOps(const nlohmann::json& a, pb::Perf* out);

template <size_t N, size_t... I>
auto AsTuple(const std::array<const char*, N>& a, std::index_sequence<I...>) {
  return std::make_tuple(a[I]...);
}

// COPY rows (NULL where a cell is empty) into `table`.
template <size_t N>
void Copy(pqxx::transaction_base& txn, const std::string& table,
          const std::array<const char*, N>& columns, const std::vector<std::array<Cell, N>>& rows) {
  if (rows.empty()) return;
  pqxx::stream_to s(txn, table, std::vector<std::string>(columns.begin(), columns.end()));
  for (const auto& row : rows) {
    std::array<const char*, N> p;
    for (size_t i = 0; i < N; ++i) p[i] = row[i] ? row[i]->c_str() : nullptr;
    s << AsTuple(p, std::make_index_sequence<N>{});
  }
  s.complete();
}

// ---- Verdicts (reports.cc) ----

// A ModeVerdict's mode and status as the store keeps them (results.mode, results.status) and
// compares them (with a sweep's modes, with 'pass'): the enums' names (proto/names.h). The one
// place that reads those two proto fields.
struct VerdictText {
  std::string mode;    // eager | compile | train
  std::string status;  // a verdict status name: pass, fail_accuracy, ...
};
VerdictText StoredVerdict(const pb::ModeVerdict& v);

// ---- The connection (store.cc) ----

// What a sweep's workers need, fixed at creation (cached per connection).
struct SweepInfo {
  std::vector<std::string> modes;
  double model_timeout_s = 300;
  uint64_t seed = 0;
  int priority = 0;
  int64_t baseline = 0;
  pb::Profile profile;
  bool audit_ops = false;  // replay passing modes op by op too
};

struct Store::Impl {
  StoreOptions opts;
  std::unique_ptr<pqxx::connection> conn;
  std::map<int64_t, SweepInfo> sweeps;  // sweeps never change after creation

  // Opens the connection when there is none (or it broke) and prepares the hot statements.
  absl::Status Ensure();

  // Runs fn on an open connection; an exception becomes a status (pg_status.h), and a broken
  // connection is dropped so that the next call reconnects.
  template <typename Fn>
  auto Run(const char* what, Fn fn) -> decltype(fn()) {
    if (auto st = Ensure(); !st.ok()) return st;
    try {
      return fn();
    } catch (...) {
      absl::Status st = StatusFromCurrentException(what);
      if (st.code() == absl::StatusCode::kUnavailable || !conn->is_open()) conn.reset();
      return st;
    }
  }

  // The sweep's settings, from the cache or the database. NOT_FOUND for no such sweep.
  absl::StatusOr<SweepInfo> Sweep(pqxx::transaction_base& txn, int64_t sweep_id);
};

// Prepared statements, per concern, on a new connection.
void PrepareLeaseStatements(pqxx::connection& c);   // leasing.cc: lease_jobs, renew
void PrepareReportStatements(pqxx::connection& c);  // reports.cc: jobs_of, mark_done

// ---- Steps shared by several concerns ----

// sweeps.cc: marks the sweep done when none of its shards is queued or leased; returns 1 when
// it did. Its final counts are taken later, off the report path (Progress).
int SettleSweep(pqxx::transaction_base& txn, int64_t sweep_id);
// reports.cc: settles `model`'s regressions in the sweep once no confirmation run is left:
// `deterministic` when its recorded runs agree, `flaky` when they differ. A `lost` run (the
// infrastructure's) is no observation: with fewer than two runs that count, it stays
// `pending`. Called by a report of a confirmation run and when one is recorded lost.
void SettleConfirmation(pqxx::transaction_base& w, int64_t sweep_id, const std::string& model);
// sweeps.cc: the sweep's progress counts in `w`'s snapshot (kept, summed or counted: see the
// definition). Keeps a done sweep's counts in sweeps.summary the first time.
absl::StatusOr<pb::SweepProgress> Progress(pqxx::transaction_base& w, int64_t sweep_id);
// A sweep's counts summed from its shards' tallies (cheap: no scan of its results), as Progress
// gives them for a running sweep.
void SumTallies(pqxx::transaction_base& w, int64_t sweep_id, pb::SweepProgress* out);
// sweeps.cc: sweeps.summary, the SweepProgress in protobuf's JSON (proto field names).
std::string SummaryJson(const pb::SweepProgress& p);
// A sweeps.summary (SummaryJson's text) into `out`; DATA_LOSS naming the sweep when it is not.
absl::Status ParseSummary(const pqxx::field& summary, int64_t sweep_id, pb::SweepProgress* out);
// sweeps.cc: creates the sweep in `w` (filter and baseline checks, the sample, shards, jobs,
// partitions) without committing: Store::CreateSweep, and a schedule's due time
// (schedules.cc). Its errors as Store::CreateSweep's; `w` must then be rolled back.
absl::StatusOr<pb::CreateSweepResponse> CreateSweepIn(pqxx::transaction_base& w,
                                                     const pb::CreateSweepRequest& r);
// sweeps.cc: the sweep's state, "" for no such sweep.
std::string SweepState(pqxx::transaction_base& txn, int64_t sweep_id);

// leasing.cc: a lease of `worker_id` ended: `produced` (a result was stored under it) clears
// its failures; otherwise one more lease in a row without a result (a new streak when the last
// began over quarantine_window_s ago), and at quarantine_after it is quarantined (counted in
// *quarantined when not null). Returns whether the worker is quarantined now.
bool NoteLeaseEnd(pqxx::transaction_base& w, const StoreOptions& o, int64_t worker_id,
                  bool produced, int* quarantined);
// leasing.cc: why a token check failed: NOT_FOUND for no such shard, FAILED_PRECONDITION
// otherwise.
absl::Status StaleToken(pqxx::transaction_base& txn, int64_t shard_id);
// reports.cc: closes a leased shard whose row this transaction holds: done when every job has
// a result (or the sweep was cancelled), else back to the queue (`release`: without counting an
// expiry). Settles the sweep. Returns the jobs left.
int FinishLeasedShard(pqxx::transaction_base& txn, int64_t shard_id, int64_t sweep_id,
                      bool release);

// requests.cc: idempotent calls (rpc_requests, migration 12). BeginRequest inserts the call's
// row in `w` and returns nullopt when `request_id` is new (or empty: not idempotent); a
// concurrent twin's INSERT waits for this transaction. When the id was used before it returns
// that call's stored answer, or INVALID_ARGUMENT ("request_id: ...") when it was used for
// another request. EndRequest stores the answer in the same transaction.
absl::StatusOr<std::optional<std::string>> BeginRequest(pqxx::transaction_base& w,
                                                         const char* method,
                                                         const std::string& request_id,
                                                         const google::protobuf::Message& req);
void EndRequest(pqxx::transaction_base& w, const char* method, const std::string& request_id,
                const google::protobuf::Message& answer);

// Live reads see one snapshot across their statements, while reports keep landing.
using ReadTxn = pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>;

// queries.cc: a readable sweep: its state, and whether its answers are kept (MaterializeSweep).
struct ReadableSweep {
  std::string state;
  bool kept = false;
};
// queries.cc: NOT_FOUND / FAILED_PRECONDITION (`field` names the request field) for a sweep
// whose results cannot be read (none, pruned); else its state and whether its answers are kept,
// in one statement.
absl::StatusOr<ReadableSweep> Readable(pqxx::transaction_base& t, int64_t sweep_id,
                                       const std::string& field);

// queries.cc: takes and keeps a done sweep's query answers (sweep_groups, sweep_verdicts,
// sweep_op_demand, sweep_breaks, then sweep_facts) with the statements that answer a running
// sweep live. A no-op when they are there already.
void MaterializeSweep(pqxx::transaction_base& w, int64_t sweep_id);
// queries.cc: the sweeps' identity and counts, in the order of `ids` (NOT_FOUND for a missing
// one). May keep a done sweep's counts (Progress): run it in a read-write transaction.
absl::StatusOr<std::vector<pb::SweepInfo>> SweepInfos(pqxx::transaction_base& w,
                                                      const std::vector<int64_t>& ids);
// suspects.cc: keeps the sweep's SuspectOps answers (sweep_suspect_facts, sweep_suspects) for
// every mode and each one; MaterializeSweep's step.
void KeepSuspects(pqxx::transaction_base& w, int64_t sweep_id);
// queries.cc: drops them (a pruned sweep).
void DropMaterialized(pqxx::transaction_base& w, int64_t sweep_id);

}  // namespace ts::store
