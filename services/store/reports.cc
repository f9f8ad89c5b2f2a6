// Reports and confirmations: ReportResults (checks, COPY of results and model_runs, the shard's
// tallies, new failures against the baseline and their confirmation runs, settling them),
// FinishShard, and closing a leased shard.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "proto/names.h"
#include "services/common/error_signature.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

// A report's job as the database has it.
struct JobRow {
  std::string model_id;
  int run;
  bool done;
};
using JobRows = std::map<int64_t, JobRow>;

JobRows JobsOf(pqxx::transaction_base& w, const pb::ReportResultsRequest& r) {
  std::vector<int64_t> ids;
  for (const auto& res : r.results()) ids.push_back(res.job_id());
  JobRows jobs;
  for (const auto& row : w.exec_prepared("jobs_of", r.shard_id(), IdArray(ids))) {
    jobs[row[0].as<int64_t>()] = {row[1].c_str(), row[2].as<int>(), row[3].as<bool>()};
  }
  return jobs;
}

// One result against its job and the sweep's modes (each exactly once); INVALID_ARGUMENT names
// the field (`at`: "results[i]").
absl::Status CheckResult(const pb::ModelResult& res, const std::string& at,
                         const JobRows& jobs, int64_t shard_id,
                         const std::vector<std::string>& modes) {
  auto it = jobs.find(res.job_id());
  if (it == jobs.end()) {
    return absl::InvalidArgumentError(at + ".job_id: job " + std::to_string(res.job_id()) +
                                      " is not in shard " + std::to_string(shard_id));
  }
  if (it->second.model_id != res.model_id()) {
    return absl::InvalidArgumentError(at + ".model_id: job " + std::to_string(res.job_id()) +
                                      " is model '" + it->second.model_id + "', not '" +
                                      res.model_id() + "'");
  }
  if (res.run() != 0 && res.run() != it->second.run) {
    return absl::InvalidArgumentError(at + ".run: job " + std::to_string(res.job_id()) +
                                      " is run " + std::to_string(it->second.run));
  }
  std::set<std::string> wanted(modes.begin(), modes.end());
  for (int k = 0; k < res.modes_size(); ++k) {
    const std::string mode = StoredVerdict(res.modes(k)).mode;
    if (!wanted.erase(mode)) {
      return absl::InvalidArgumentError(at + ".modes[" + std::to_string(k) + "].mode: '" + mode +
                                        "' is not a mode of this sweep, or repeated");
    }
  }
  if (!wanted.empty()) {
    return absl::InvalidArgumentError(at + ".modes: missing mode '" + *wanted.begin() + "'");
  }
  return absl::OkStatus();
}

// The results to store: each checked, those whose job is done (or that repeat one in this
// report) counted as duplicates in `out`.
absl::StatusOr<std::vector<const pb::ModelResult*>> FreshResults(
    const pb::ReportResultsRequest& r, const JobRows& jobs, const std::vector<std::string>& modes,
    pb::ReportResultsResponse& out) {
  std::vector<const pb::ModelResult*> fresh;
  std::set<int64_t> seen;
  for (int i = 0; i < r.results_size(); ++i) {
    const pb::ModelResult& res = r.results(i);
    const std::string at = "results[" + std::to_string(i) + "]";
    if (auto st = CheckResult(res, at, jobs, r.shard_id(), modes); !st.ok()) return st;
    if (jobs.at(res.job_id()).done || !seen.insert(res.job_id()).second) {
      out.set_duplicates(out.duplicates() + 1);
      continue;
    }
    fresh.push_back(&res);
  }
  return fresh;
}

// The identity of a report's rows: sweep, model, run, worker.
struct RowKey {
  std::string sweep;
  std::string model_id;
  std::string run;
  std::string worker;
};

constexpr size_t kResultWidth = 46;
// clang-format off
constexpr std::array<const char*, kResultWidth> kResultColumns = {
    "sweep_id",        "model_id",       "mode",          "run",           "status",
    "error",           "error_signature", "worker_id",    "ms",            "has_accuracy",
    "rmse_device",     "rmse_reference", "rmse_ratio",    "max_abs_err",   "cosine",
    "rmse_vs_declared", "max_rel_err",   "allclose",      "graph_breaks",  "break_reasons",
    "device_segments", "graph_nodes",    "compile_ms",    "compile_wall_ms", "first_run_ms",
    "loss_reference",  "loss_device",    "loss_declared", "loss_band",     "max_loss_gap_ratio",
    "grad_rmse_ratio", "grad_worst_param", "audited",     "suspects",      "unchecked",
    "perf_device_us",
    "perf_flops",      "perf_bytes",     "perf_mfu",      "perf_launches", "perf_fallback_us",
    "perf_transfer_bytes", "perf_peak_bytes", "perf_top_ops", "perf_speedup",
    "perf_compression"};
// clang-format on

std::string Bool(bool b) { return b ? "t" : "f"; }

// A mode's perf columns (migration 0016): all NULL when the mode has no perf; speedup and
// compression NULL unless measured (a compile that passed, with eager perf).
std::array<Cell, 11> PerfCells(const pb::ModeVerdict& m) {
  if (!m.has_perf()) return {};
  const pb::Perf& p = m.perf();
  const auto ratio = [](double x) { return std::isfinite(x) && x > 0 ? Cell(Num(x)) : Cell(); };
  return {Num(p.device_us()),
          Num(p.flops()),
          Num(p.bytes()),
          Num(p.mfu()),
          std::to_string(p.launches()),
          Num(p.fallback_us()),
          Num(p.transfer_bytes()),
          std::to_string(p.peak_device_bytes()),
          TopOpsJson(p.top_ops()),
          ratio(p.speedup()),
          ratio(p.compression())};
}

// A results row: the verdict as reported, every field (GetModel gives the record back whole;
// a value that was not measured is the NaN the worker sent). Break reasons and loss curves are
// NULL when empty, and so are the suspects and the unchecked ops (jsonb, SuspectsJson,
// UncheckedJson).
std::array<Cell, kResultWidth> ResultRow(const RowKey& key, const pb::ModeVerdict& m) {
  const VerdictText v = StoredVerdict(m);
  const std::array<Cell, 11> perf = PerfCells(m);
  std::vector<std::string> reasons(m.break_reasons().begin(), m.break_reasons().end());
  const auto curve = [](const google::protobuf::RepeatedField<double>& c) {
    return c.empty() ? Cell() : Cell(DoubleArray(c));
  };
  // clang-format off
  return {key.sweep, key.model_id, v.mode, key.run, v.status, m.error(),
          common::ErrorSignature(m.error()), key.worker, Num(m.ms()), Bool(m.has_accuracy()),
          Num(m.rmse_device()), Num(m.rmse_reference()), Num(m.rmse_ratio()),
          Num(m.max_abs_err()), Num(m.cosine()), Num(m.rmse_vs_declared()), Num(m.max_rel_err()),
          Bool(m.allclose()), std::to_string(m.graph_breaks()),
          reasons.empty() ? Cell() : Cell(TextArray(reasons)),
          std::to_string(m.device_segments()), std::to_string(m.graph_nodes()),
          Num(m.compile_ms()), Num(m.compile_wall_ms()), Num(m.first_run_ms()),
          curve(m.loss_reference()), curve(m.loss_device()), curve(m.loss_declared()),
          curve(m.loss_band()), Num(m.max_loss_gap_ratio()), Num(m.grad_rmse_ratio()),
          m.grad_worst_param(), Bool(m.audited()),
          m.suspects().empty() ? Cell() : Cell(SuspectsJson(m.suspects())),
          m.unchecked().empty() ? Cell() : Cell(UncheckedJson(m.unchecked())),
          perf[0], perf[1], perf[2], perf[3], perf[4], perf[5], perf[6], perf[7], perf[8],
          perf[9], perf[10]};
  // clang-format on
}

constexpr std::array<const char*, 21> kRunColumns = {
    "sweep_id",  "model_id", "run",     "worker_id", "distinct_ops", "native_ops", "opcov_ratio",
    "total_ms",  "peak_device_bytes",   "ops",       "op_calls",     "op_ms",      "op_native",
    "tiny_config", "call_ratio", "family", "arch",   "task",         "config_hash", "timing_names",
    "timing_ms"};

// A model_runs row: the model's run with its op use and timings as parallel arrays.
std::array<Cell, 21> RunRow(const RowKey& key, const pb::ModelResult& res) {
  std::vector<std::string> ops;
  std::string calls = "{", ms = "{", native = "{";
  for (int k = 0; k < res.ops_size(); ++k) {
    const auto& op = res.ops(k);
    ops.push_back(op.op());
    const char* sep = k ? "," : "";
    calls += sep + std::to_string(op.calls());
    ms += sep + Num(op.ms());
    native += std::string(sep) + (op.native() ? "t" : "f");
  }
  // Sorted by name: the map's order is unspecified, the stored one is not.
  const std::map<std::string, double> timings(res.timings_ms().begin(), res.timings_ms().end());
  std::vector<std::string> timing_names;
  std::string timing_ms = "{";
  for (const auto& [name, t] : timings) {
    timing_ms += (timing_names.empty() ? "" : ",") + Num(t);
    timing_names.push_back(name);
  }
  return {key.sweep, key.model_id, key.run, key.worker, std::to_string(res.distinct_ops()),
          std::to_string(res.native_ops()), Num(res.opcov_ratio()), Num(res.total_ms()),
          std::to_string(res.peak_device_bytes()), TextArray(ops), calls + "}", ms + "}",
          native + "}",
          res.tiny_config_json().empty() ? Cell() : Cell(res.tiny_config_json()),
          Num(res.call_ratio()), res.family(), res.arch(), res.task(), res.config_hash(),
          TextArray(timing_names), timing_ms + "}"};
}

// COPY of the fresh results (one row per mode) and their model_runs rows.
void StoreResults(pqxx::transaction_base& w, int64_t sweep_id, int64_t worker_id,
                  const std::vector<const pb::ModelResult*>& fresh, const JobRows& jobs) {
  std::vector<std::array<Cell, kResultWidth>> result_rows;
  std::vector<std::array<Cell, 21>> run_rows;
  for (const pb::ModelResult* res : fresh) {
    const RowKey key{std::to_string(sweep_id), res->model_id(),
                     std::to_string(jobs.at(res->job_id()).run), std::to_string(worker_id)};
    for (const auto& m : res->modes()) result_rows.push_back(ResultRow(key, m));
    run_rows.push_back(RunRow(key, *res));
  }
  Copy<kResultWidth>(w, "results", kResultColumns, result_rows);
  Copy<21>(w, "model_runs", kRunColumns, run_rows);
}

// Marks the fresh results' jobs done and adds them to the shard's tallies. Returns the models
// whose primary run has a non-pass mode: the candidates for new failures against the baseline.
std::vector<std::string> MarkDone(pqxx::transaction_base& w, int64_t shard_id,
                                  int64_t worker_id,
                                  const std::vector<const pb::ModelResult*>& fresh,
                                  const JobRows& jobs) {
  std::vector<int64_t> done_ids;
  int primary = 0;
  std::vector<std::string> failing;
  for (const pb::ModelResult* res : fresh) {
    done_ids.push_back(res->job_id());
    if (jobs.at(res->job_id()).run != 1) continue;
    ++primary;
    if (std::any_of(res->modes().begin(), res->modes().end(),
                    [](const pb::ModeVerdict& m) { return StoredVerdict(m).status != "pass"; })) {
      failing.push_back(res->model_id());
    }
  }
  if (!done_ids.empty()) {
    w.exec_prepared("mark_done", IdArray(done_ids), shard_id, static_cast<int>(done_ids.size()),
                    primary, static_cast<int>(failing.size()), worker_id);
  }
  return failing;
}

// New failures vs the baseline become regressions, each with two confirmation runs (runs 2 and
// 3) in their own shards, one priority above the sweep's.
void QueueConfirmations(pqxx::transaction_base& w, int64_t sweep_id, const SweepInfo& sweep,
                        const std::vector<std::string>& failing) {
  pqxx::result reg = w.exec_params(R"(
    INSERT INTO regressions (sweep_id, model_id, mode, baseline_status, status)
    SELECT $1, n.model_id, n.mode, b.status, n.status
    FROM results n JOIN results b
      ON b.sweep_id = $2 AND b.model_id = n.model_id AND b.mode = n.mode AND b.run = 1
    WHERE n.sweep_id = $1 AND n.run = 1 AND n.model_id = ANY($3::text[])
      AND b.status = 'pass' AND n.status <> 'pass'
    ON CONFLICT DO NOTHING
    RETURNING model_id)",
                                   sweep_id, sweep.baseline, TextArray(failing));
  std::set<std::string> flipped;
  for (const auto& row : reg) flipped.insert(row[0].c_str());
  for (const auto& model : flipped) {
    for (int run = 2; run <= 3; ++run) {
      pqxx::result sh = w.exec_params(
          "INSERT INTO shards (sweep_id, priority, jobs_total) VALUES ($1, $2, 1) "
          "RETURNING shard_id",
          sweep_id, sweep.priority + 1);
      w.exec_params("INSERT INTO jobs (sweep_id, model_id, run, shard_id) VALUES ($1, $2, $3, $4)",
                    sweep_id, model, run, sh[0][0].as<int64_t>());
    }
  }
}

// Regressions whose confirmation runs are all in settle: deterministic when the three runs agree
// on each mode's status, else flaky.
//
// Runs 2 and 3 sit in separate shards, so two workers may report them at once. Each report
// first locks the model's regressions rows (models in sorted order, so two reports cannot
// deadlock), then checks in a new statement: the second report to get the lock waits for the
// first to commit, and its check (a new snapshot, READ COMMITTED) sees both runs done. Without
// the lock, each would see only its own run done and the regression stayed `pending`.
void SettleConfirmations(pqxx::transaction_base& w, int64_t sweep_id,
                         const std::vector<const pb::ModelResult*>& fresh, const JobRows& jobs) {
  std::set<std::string> confirmed;
  for (const pb::ModelResult* res : fresh) {
    if (jobs.at(res->job_id()).run > 1) confirmed.insert(res->model_id());
  }
  for (const auto& model : confirmed) SettleConfirmation(w, sweep_id, model);
}

}  // namespace

void SettleConfirmation(pqxx::transaction_base& w, int64_t sweep_id, const std::string& model) {
  w.exec_params("SELECT 1 FROM regressions WHERE sweep_id = $1 AND model_id = $2 FOR UPDATE",
                sweep_id, model);
  w.exec_params(R"(
    WITH seen AS (
      SELECT g.mode, count(*) AS runs, count(DISTINCT r.status) AS statuses
      FROM regressions g JOIN results r
        ON r.sweep_id = g.sweep_id AND r.model_id = g.model_id AND r.mode = g.mode
      WHERE g.sweep_id = $1 AND g.model_id = $2 AND r.status <> 'lost'
      GROUP BY g.mode)
    UPDATE regressions g SET confirmation = CASE WHEN s.statuses = 1 THEN 'deterministic'
                                                 ELSE 'flaky' END
    FROM seen s
    WHERE g.sweep_id = $1 AND g.model_id = $2 AND g.mode = s.mode AND s.runs >= 2
      AND NOT EXISTS (
        SELECT 1 FROM jobs j WHERE j.sweep_id = $1 AND j.model_id = $2 AND j.run > 1
          AND NOT j.done))",
                sweep_id, model);
}

VerdictText StoredVerdict(const pb::ModeVerdict& v) {
  return {proto::ModeName(v.mode()), proto::VerdictName(v.status())};
}

void PrepareReportStatements(pqxx::connection& c) {
  c.prepare("jobs_of", R"(
    SELECT job_id, model_id, run, done FROM jobs
    WHERE shard_id = $1 AND job_id = ANY($2::bigint[]))");
  // Marks a report's jobs done and adds them to their shard's tallies ($2: the shard, whose
  // row the report already holds through "renew"); its worker ($6), having stored results, has
  // no failed leases in a row (NoteLeaseEnd's `produced`, in the same round trip).
  c.prepare("mark_done", R"(
    WITH d AS (UPDATE jobs SET done = true WHERE job_id = ANY($1::bigint[])),
    good AS (UPDATE workers SET failures = 0, failing_since = NULL
             WHERE worker_id = $6 AND failures > 0)
    UPDATE shards SET jobs_done = jobs_done + $3, primary_done = primary_done + $4,
                      primary_failed = primary_failed + $5, lease_results = lease_results + $3
    WHERE shard_id = $2)");
}

int FinishLeasedShard(pqxx::transaction_base& txn, int64_t shard_id, int64_t sweep_id,
                      bool release) {
  pqxx::result left =
      txn.exec_params("SELECT count(*) FROM jobs WHERE shard_id = $1 AND NOT done", shard_id);
  const int jobs_left = left[0][0].as<int>();
  if (jobs_left == 0 || SweepState(txn, sweep_id) == "cancelled") {
    txn.exec_params("UPDATE shards SET state = 'done', lease_token = NULL WHERE shard_id = $1",
                    shard_id);
  } else {
    txn.exec_params(R"(
      UPDATE shards SET state = 'queued', lease_token = NULL, worker_id = NULL,
             expiries = expiries + CASE WHEN $2 THEN 0 ELSE 1 END
      WHERE shard_id = $1)",
                    shard_id, release);
  }
  SettleSweep(txn, sweep_id);
  return jobs_left;
}

absl::StatusOr<pb::ReportResultsResponse> Store::ReportResults(const pb::ReportResultsRequest& r) {
  return impl_->Run("ReportResults", [&]() -> absl::StatusOr<pb::ReportResultsResponse> {
    pqxx::work w(*impl_->conn);
    // A retried report (its answer was lost, or two copies race) gets the first one's answer,
    // even when that one finished the shard and the token is no longer current.
    auto earlier = BeginRequest(w, "ReportResults", r.request_id(), r);
    if (!earlier.ok()) return earlier.status();
    if (*earlier) {
      pb::ReportResultsResponse replay;
      if (!replay.ParseFromString(**earlier)) return absl::DataLossError("request_id: stored answer unreadable");
      replay.set_replayed(true);
      return replay;
    }
    pqxx::result s =
        w.exec_prepared("renew", r.shard_id(), r.lease_token(), impl_->opts.lease_ttl_s);
    if (s.empty()) return StaleToken(w, r.shard_id());
    const int64_t sweep_id = s[0][0].as<int64_t>();
    auto sweep = impl_->Sweep(w, sweep_id);
    if (!sweep.ok()) return sweep.status();
    const JobRows jobs = JobsOf(w, r);
    pb::ReportResultsResponse out;
    auto fresh = FreshResults(r, jobs, sweep->modes, out);
    if (!fresh.ok()) return fresh.status();
    StoreResults(w, sweep_id, r.worker_id(), *fresh, jobs);
    const std::vector<std::string> failing = MarkDone(w, r.shard_id(), r.worker_id(), *fresh, jobs);
    if (sweep->baseline > 0) {
      if (!failing.empty()) QueueConfirmations(w, sweep_id, *sweep, failing);
      SettleConfirmations(w, sweep_id, *fresh, jobs);
    }
    // Confirmation shards were queued above, so the sweep cannot be settled too early.
    if (r.finish()) out.set_jobs_left(FinishLeasedShard(w, r.shard_id(), sweep_id, true));
    out.set_accepted(static_cast<int>(fresh->size()));
    EndRequest(w, "ReportResults", r.request_id(), out);
    w.commit();
    return out;
  });
}

absl::StatusOr<pb::FinishShardResponse> Store::FinishShard(const pb::FinishShardRequest& r) {
  return impl_->Run("FinishShard", [&]() -> absl::StatusOr<pb::FinishShardResponse> {
    pqxx::work w(*impl_->conn);
    pqxx::result s = w.exec_params(R"(
      SELECT sweep_id, worker_id, lease_results FROM shards
      WHERE shard_id = $1 AND lease_token = $2 AND state = 'leased'
      FOR UPDATE)",
                                   r.shard_id(), r.lease_token());
    if (s.empty()) return StaleToken(w, r.shard_id());
    // A shard given back without a single result is a failed lease of its worker (one whose
    // runner cannot start gives back every shard it takes).
    if (r.release() && !s[0][1].is_null()) {
      NoteLeaseEnd(w, impl_->opts, s[0][1].as<int64_t>(), s[0][2].as<int>() > 0, nullptr);
    }
    const int jobs_left = FinishLeasedShard(w, r.shard_id(), s[0][0].as<int64_t>(), r.release());
    w.commit();
    pb::FinishShardResponse out;
    out.set_jobs_left(jobs_left);
    return out;
  });
}

}  // namespace ts::store
