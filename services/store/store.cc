#include "services/store/store.h"

#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "services/common/error_signature.h"
#include "services/store/pg_status.h"
#include "proto/names.h"

namespace ts::store {

namespace {

using Cell = std::optional<std::string>;

std::string Num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// PostgreSQL array literals: {"a","b\"c"} and {1.5,NaN}.
std::string TextArray(const std::vector<std::string>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char c : v[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}
template <typename It, typename F>
std::string Array(It begin, It end, F f) {
  std::string out = "{";
  for (It it = begin; it != end; ++it) {
    if (it != begin) out += ',';
    out += f(*it);
  }
  return out + "}";
}
std::string DoubleArray(const google::protobuf::RepeatedField<double>& v) {
  return Array(v.begin(), v.end(), [](double d) { return Num(d); });
}
std::string IdArray(const std::vector<int64_t>& v) {
  return Array(v.begin(), v.end(), [](int64_t d) { return std::to_string(d); });
}
std::string Sha256Hex(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  std::string out;
  char buf[3];
  for (unsigned char c : d) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    out += buf;
  }
  return out;
}

std::string NewToken() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

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

// Every mode (proto/touchstone/v1/result.proto), by name: a sweep's default.
std::vector<std::string> AllModeNames() {
  std::vector<std::string> names;
  for (auto m : proto::AllModes()) names.push_back(proto::ModeName(m));
  return names;
}

std::vector<std::string> ParseTextArray(const pqxx::field& f) {
  std::vector<std::string> out;
  if (f.is_null()) return out;
  pqxx::array_parser p = f.as_array();
  for (auto e = p.get_next(); e.first != pqxx::array_parser::done; e = p.get_next()) {
    if (e.first == pqxx::array_parser::string_value) out.push_back(e.second);
  }
  return out;
}

}  // namespace

struct SweepInfo {
  std::vector<std::string> modes;
  double model_timeout_s = 300;
  uint64_t seed = 0;
  int priority = 0;
  int64_t baseline = 0;
  pb::Profile profile;
};

struct Store::Impl {
  StoreOptions opts;
  std::unique_ptr<pqxx::connection> conn;
  std::map<int64_t, SweepInfo> sweeps;  // sweeps never change after creation

  absl::Status Ensure() {
    if (conn && conn->is_open()) return absl::OkStatus();
    conn.reset();
    try {
      std::string url = opts.url;
      url += (url.find('?') == std::string::npos ? "?" : "&");
      url += "connect_timeout=" + std::to_string(std::max(1, static_cast<int>(opts.connect_timeout_s)));
      conn = std::make_unique<pqxx::connection>(url);
      if (opts.generic_plans) {
        pqxx::nontransaction n(*conn);
        n.exec("SET plan_cache_mode = force_generic_plan");
      }
      Prepare();
      return absl::OkStatus();
    } catch (...) {
      conn.reset();
      return StatusFromCurrentException("connect");
    }
  }

  void Prepare() {
    // One statement, in autocommit, leases a shard for each of several known workers ($1 ids,
    // $2 tokens, pairwise) and lists each shard's pending jobs: a lease costs one round trip.
    // Every known worker's slot has at least one row (null shard: the queue ran out; null job:
    // a shard with nothing left to run); unknown workers have none.
    conn->prepare("lease_jobs", R"(
      WITH who AS (
        SELECT * FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS w(worker_id, token, slot)),
      known AS (
        SELECT who.worker_id, who.token, who.slot, row_number() OVER (ORDER BY who.slot) AS rn
        FROM who JOIN workers USING (worker_id)),
      picked AS (
        SELECT shard_id, row_number() OVER () AS rn FROM (
          SELECT shard_id FROM shards WHERE state = 'queued'
          ORDER BY priority DESC, shard_id LIMIT (SELECT count(*) FROM known)
          FOR UPDATE SKIP LOCKED) q),
      leased AS (
        UPDATE shards s SET state = 'leased', attempt = s.attempt + 1, lease_token = known.token,
               lease_expires = now() + make_interval(secs => $3), worker_id = known.worker_id
        FROM picked JOIN known USING (rn)
        WHERE s.shard_id = picked.shard_id
        RETURNING s.shard_id, s.sweep_id, s.attempt, known.slot)
      SELECT k.slot, l.shard_id, l.sweep_id, l.attempt,
             j.job_id, j.model_id, j.run, m.arch, m.task, m.config::text
      FROM known k
      LEFT JOIN leased l ON l.slot = k.slot
      LEFT JOIN jobs j ON j.shard_id = l.shard_id AND NOT j.done
      LEFT JOIN models m ON m.model_id = j.model_id
      ORDER BY k.slot, j.job_id)");
    conn->prepare("renew", R"(
      UPDATE shards SET lease_expires = now() + make_interval(secs => $3)
      WHERE shard_id = $1 AND lease_token = $2 AND state = 'leased'
      RETURNING sweep_id)");
    conn->prepare("jobs_of", R"(
      SELECT job_id, model_id, run, done FROM jobs
      WHERE shard_id = $1 AND job_id = ANY($2::bigint[]))");
    // Marks a report's jobs done and adds them to their shard's tallies ($2: the shard, whose
    // row the report already holds through "renew").
    conn->prepare("mark_done", R"(
      WITH d AS (UPDATE jobs SET done = true WHERE job_id = ANY($1::bigint[]))
      UPDATE shards SET jobs_done = jobs_done + $3, primary_done = primary_done + $4,
                        primary_failed = primary_failed + $5
      WHERE shard_id = $2)");
  }

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

  absl::StatusOr<SweepInfo> Sweep(pqxx::transaction_base& txn, int64_t sweep_id) {
    auto it = sweeps.find(sweep_id);
    if (it != sweeps.end()) return it->second;
    pqxx::result r = txn.exec_params(R"(
      SELECT s.modes, s.model_timeout_s, s.seed, s.priority, coalesce(s.baseline_sweep, 0),
             p.name, p.sha, p.body
      FROM sweeps s JOIN profiles p USING (profile_id) WHERE s.sweep_id = $1)",
                                     sweep_id);
    if (r.empty()) return absl::NotFoundError("sweep_id: no sweep " + std::to_string(sweep_id));
    SweepInfo s;
    s.modes = ParseTextArray(r[0][0]);
    s.model_timeout_s = r[0][1].as<double>();
    s.seed = static_cast<uint64_t>(r[0][2].as<int64_t>());
    s.priority = r[0][3].as<int>();
    s.baseline = r[0][4].as<int64_t>();
    s.profile.set_name(r[0][5].c_str());
    s.profile.set_sha(r[0][6].c_str());
    s.profile.set_body(r[0][7].c_str());
    sweeps[sweep_id] = s;
    return s;
  }

  // Marks the sweep done when none of its shards is queued or leased. Its final counts are
  // taken later, off the report path (Progress, SummarizeDoneSweeps).
  int SettleSweep(pqxx::transaction_base& txn, int64_t sweep_id) {
    pqxx::result r = txn.exec_params(R"(
      UPDATE sweeps SET state = 'done', finished_at = now()
      WHERE sweep_id = $1 AND state = 'running' AND NOT EXISTS (
        SELECT 1 FROM shards WHERE sweep_id = $1 AND state IN ('queued', 'leased'))
      RETURNING sweep_id)",
                                     sweep_id);
    return static_cast<int>(r.size());
  }

  // sweeps.summary: the SweepProgress itself in protobuf's JSON (field names as in the proto),
  // its state being the one the counts were taken in (done, or cancelled for a pruned sweep).
  static std::string SummaryJson(const pb::SweepProgress& p) {
    google::protobuf::util::JsonPrintOptions o;
    o.preserve_proto_field_names = true;
    o.always_print_primitive_fields = true;
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(p, &json, o);  // cannot fail: no Any
    return json;
  }

  // The sweep's progress counts, read in `w`'s snapshot:
  //   done or pruned: the counts kept in sweeps.summary. A done sweep's are taken from the
  //     tables (duplicate check included) by the first call after it settled, or by the
  //     scheduler's ticker (SummarizeDoneSweeps), and kept: nothing writes to a done sweep;
  //   running: the shards' tallies, summed (O(shards), not O(models));
  //   cancelled (late reports may still land): counted from the tables.
  absl::StatusOr<pb::SweepProgress> Progress(pqxx::transaction_base& w, int64_t sweep_id) {
    pqxx::result s = w.exec_params(R"(
      SELECT state, extract(epoch FROM coalesce(finished_at, now()) - created_at), summary::text
      FROM sweeps WHERE sweep_id = $1)",
                                   sweep_id);
    if (s.empty()) return absl::NotFoundError("sweep_id: no sweep " + std::to_string(sweep_id));
    pb::SweepProgress out;
    out.set_sweep_id(sweep_id);
    out.set_state(s[0][0].c_str());
    out.set_elapsed_s(s[0][1].as<double>());
    if (!s[0][2].is_null()) {
      google::protobuf::util::JsonParseOptions o;
      o.ignore_unknown_fields = true;
      if (!google::protobuf::util::JsonStringToMessage(s[0][2].c_str(), &out, o).ok()) {
        return absl::DataLossError("sweeps.summary of sweep " + std::to_string(sweep_id) +
                                   ": not a SweepProgress");
      }
      out.set_sweep_id(sweep_id);  // identity and state from the row, counts from the summary
      out.set_state(s[0][0].c_str());
      out.set_elapsed_s(s[0][1].as<double>());
      return out;
    }
    if (out.state() != "running") {
      CountFromTables(w, sweep_id, &out);
      if (out.state() == "done") {
        w.exec_params("UPDATE sweeps SET summary = $2::jsonb WHERE sweep_id = $1 AND summary IS NULL",
                      sweep_id, SummaryJson(out));
      }
      return out;
    }
    pqxx::result t = w.exec_params(R"(
      SELECT coalesce(sum(primary_total), 0), coalesce(sum(jobs_total), 0),
             coalesce(sum(jobs_done), 0), coalesce(sum(primary_done), 0),
             coalesce(sum(primary_failed), 0),
             count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'leased')
      FROM shards WHERE sweep_id = $1)",
                                   sweep_id);
    out.set_models_expected(t[0][0].as<int64_t>());
    out.set_jobs_total(t[0][1].as<int64_t>());
    out.set_jobs_done(t[0][2].as<int64_t>());
    out.set_models_recorded(t[0][3].as<int64_t>());
    out.set_failures(t[0][4].as<int64_t>());
    out.set_shards_queued(t[0][5].as<int64_t>());
    out.set_shards_leased(t[0][6].as<int64_t>());
    Confirmations(w, sweep_id, &out);
    return out;
  }

  // Regressions settled deterministic / flaky (the regressions table holds only the sweep's
  // new failures: small).
  static void Confirmations(pqxx::transaction_base& w, int64_t sweep_id, pb::SweepProgress* out) {
    pqxx::result g = w.exec_params(R"(
      SELECT count(DISTINCT model_id) FILTER (WHERE confirmation = 'deterministic'),
             count(DISTINCT model_id) FILTER (WHERE confirmation = 'flaky')
      FROM regressions WHERE sweep_id = $1)",
                                   sweep_id);
    out->set_confirmed_deterministic(g[0][0].as<int64_t>());
    out->set_confirmed_flaky(g[0][1].as<int64_t>());
  }

  // The counts taken from the jobs, results and model_runs themselves (O(models)), with the
  // duplicate check: once after a sweep is done (then kept), and for cancelled sweeps.
  static void CountFromTables(pqxx::transaction_base& w, int64_t sweep_id, pb::SweepProgress* out) {
    // One statement, so one snapshot: a report commits its results and marks its jobs done
    // together, and the counts below agree with each other while reports keep landing.
    pqxx::result j = w.exec_params(R"(
      SELECT count(*) FILTER (WHERE run = 1), count(*), count(*) FILTER (WHERE done),
             (SELECT count(*) FROM model_runs WHERE sweep_id = $1 AND run = 1),
             (SELECT count(DISTINCT model_id) FROM results
              WHERE sweep_id = $1 AND run = 1 AND status <> 'pass')
      FROM jobs WHERE sweep_id = $1)",
                                   sweep_id);
    out->set_models_expected(j[0][0].as<int64_t>());
    out->set_jobs_total(j[0][1].as<int64_t>());
    out->set_jobs_done(j[0][2].as<int64_t>());
    out->set_models_recorded(j[0][3].as<int64_t>());
    out->set_failures(j[0][4].as<int64_t>());
    pqxx::result sh = w.exec_params(R"(
      SELECT count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'leased')
      FROM shards WHERE sweep_id = $1)",
                                    sweep_id);
    out->set_shards_queued(sh[0][0].as<int64_t>());
    out->set_shards_leased(sh[0][1].as<int64_t>());
    Confirmations(w, sweep_id, out);
    // Results per (model, mode) beyond the first, over primary runs, and models with more than
    // one primary model_runs row. Both must be 0.
    pqxx::result d = w.exec_params(R"(
      SELECT (SELECT count(*) - count(DISTINCT (model_id, mode)) FROM results
              WHERE sweep_id = $1 AND run = 1)
           + (SELECT count(*) - count(DISTINCT model_id) FROM model_runs
              WHERE sweep_id = $1 AND run = 1))",
                                   sweep_id);
    out->set_duplicates(d[0][0].as<int64_t>());
  }

  // Detaches (CONCURRENTLY: the parent table is never locked against other sweeps' reports)
  // and drops one of a pruned sweep's partitions. Each step is idempotent, and a detach that
  // was cut off half-way (pg_inherits.inhdetachpending) is finalized.
  void DropPartition(const std::string& parent, int64_t sweep_id) {
    const std::string name = parent + "_" + std::to_string(sweep_id);
    pqxx::nontransaction n(*conn);  // DETACH ... CONCURRENTLY cannot run in a transaction
    pqxx::result r = n.exec_params(
        "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = to_regclass($1)", name);
    if (!r.empty()) {
      n.exec("ALTER TABLE " + parent + " DETACH PARTITION " + name +
             (r[0][0].as<bool>() ? " FINALIZE" : " CONCURRENTLY"));
    }
    n.exec("DROP TABLE IF EXISTS " + name);
  }

  // Why a token check failed: NOT_FOUND for no such shard, FAILED_PRECONDITION otherwise.
  absl::Status StaleToken(pqxx::transaction_base& txn, int64_t shard_id) {
    pqxx::result r = txn.exec_params("SELECT state FROM shards WHERE shard_id = $1", shard_id);
    if (r.empty()) return absl::NotFoundError("shard_id: no shard " + std::to_string(shard_id));
    return absl::FailedPreconditionError(
        "lease_token: not the current lease of shard " + std::to_string(shard_id) + " (shard is " +
        r[0][0].c_str() + "; the lease expired or the shard finished): drop the shard");
  }

  // Closes a leased shard whose row this transaction holds: done when every job has a result,
  // else back to the queue (`release`: without counting an expiry). Returns the jobs left.
  int Finish(pqxx::transaction_base& txn, int64_t shard_id, int64_t sweep_id, bool release) {
    pqxx::result left =
        txn.exec_params("SELECT count(*) FROM jobs WHERE shard_id = $1 AND NOT done", shard_id);
    const int jobs_left = left[0][0].as<int>();
    pqxx::result st = txn.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1", sweep_id);
    const bool cancelled = !st.empty() && std::string(st[0][0].c_str()) == "cancelled";
    if (jobs_left == 0 || cancelled) {
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

  // Records `crash` for every mode of a job whose shard lost its worker too often.
  void RecordLost(pqxx::transaction_base& txn, int64_t sweep_id, int64_t shard_id,
                  int64_t job_id, const std::string& model_id, int run, int lost,
                  const std::vector<std::string>& modes) {
    const std::string error = "the worker running this model was lost " + std::to_string(lost) +
                              " times (shard " + std::to_string(shard_id) +
                              "); recorded as crash without a verdict from the model";
    std::vector<std::array<Cell, 7>> rows;
    for (const auto& m : modes) {
      rows.push_back({std::to_string(sweep_id), model_id, m, std::to_string(run), "crash", error,
                      common::ErrorSignature(error)});
    }
    Copy<7>(txn, "results",
            {"sweep_id", "model_id", "mode", "run", "status", "error", "error_signature"}, rows);
    txn.exec_params(R"(
      INSERT INTO model_runs (sweep_id, model_id, run) VALUES ($1, $2, $3)
      ON CONFLICT DO NOTHING)",
                    sweep_id, model_id, run);
    txn.exec_params("UPDATE jobs SET done = true WHERE job_id = $1", job_id);
    const int primary = run == 1 ? 1 : 0;  // a crash is a failure
    txn.exec_params(R"(
      UPDATE shards SET jobs_done = jobs_done + 1, primary_done = primary_done + $2,
                        primary_failed = primary_failed + $2
      WHERE shard_id = $1)",
                    shard_id, primary);
  }
};

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

absl::StatusOr<std::unique_ptr<Store>> Store::Connect(const StoreOptions& opts) {
  if (opts.url.empty()) return absl::InvalidArgumentError("db url: empty");
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  if (auto st = impl->Ensure(); !st.ok()) return st;
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

absl::Status Store::Ping() {
  return impl_->Run("ping", [&]() -> absl::Status {
    pqxx::nontransaction n(*impl_->conn);
    n.exec("SELECT 1");
    return absl::OkStatus();
  });
}

absl::Status Store::Migrate() {
  return impl_->Run("migrate", [&]() -> absl::Status {
    pqxx::connection& c = *impl_->conn;
    {
      pqxx::nontransaction n(c);
      n.exec("SELECT pg_advisory_lock(736215001)");
      n.exec(R"(CREATE TABLE IF NOT EXISTS schema_migrations (
                  version int PRIMARY KEY, name text NOT NULL,
                  applied_at timestamptz NOT NULL DEFAULT now()))");
    }
    auto unlock = [&] {
      pqxx::nontransaction n(c);
      n.exec("SELECT pg_advisory_unlock(736215001)");
    };
    std::set<int> applied;
    {
      pqxx::nontransaction n(c);
      for (const auto& row : n.exec("SELECT version FROM schema_migrations")) {
        applied.insert(row[0].as<int>());
      }
    }
    const int known = Migrations().empty() ? 0 : Migrations().back().version;
    if (!applied.empty() && *applied.rbegin() > known) {
      unlock();
      return absl::FailedPreconditionError(
          "database schema version " + std::to_string(*applied.rbegin()) +
          " is newer than this build's " + std::to_string(known) + ": upgrade touchstone");
    }
    for (const auto& m : Migrations()) {
      if (applied.count(m.version)) continue;
      pqxx::work w(c);
      w.exec(m.sql);
      w.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version,
                    m.name);
      w.commit();
    }
    unlock();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<int>> Store::AppliedMigrations() {
  return impl_->Run("applied migrations", [&]() -> absl::StatusOr<std::vector<int>> {
    pqxx::nontransaction n(*impl_->conn);
    std::vector<int> out;
    for (const auto& row : n.exec("SELECT version FROM schema_migrations ORDER BY version")) {
      out.push_back(row[0].as<int>());
    }
    return out;
  });
}

absl::StatusOr<pb::RegisterWorkerResponse> Store::RegisterWorker(
    const pb::RegisterWorkerRequest& r) {
  return impl_->Run("RegisterWorker", [&]() -> absl::StatusOr<pb::RegisterWorkerResponse> {
    pqxx::work w(*impl_->conn);
    pqxx::result res = w.exec_params(
        "INSERT INTO workers (name, version, slots) VALUES ($1, $2, $3) RETURNING worker_id",
        r.name(), r.version(), std::max(1, r.slots()));
    w.commit();
    pb::RegisterWorkerResponse out;
    out.set_worker_id(res[0][0].as<int64_t>());
    out.set_lease_ttl_s(impl_->opts.lease_ttl_s);
    out.set_heartbeat_interval_s(impl_->opts.lease_ttl_s / 3);
    return out;
  });
}

absl::StatusOr<pb::LeaseShardResponse> Store::LeaseShard(int64_t worker_id) {
  auto v = LeaseShards({worker_id});
  if (!v.ok()) return v.status();
  return std::move((*v)[0]);
}

absl::StatusOr<std::vector<absl::StatusOr<pb::LeaseShardResponse>>> Store::LeaseShards(
    const std::vector<int64_t>& worker_ids) {
  using Answers = std::vector<absl::StatusOr<pb::LeaseShardResponse>>;
  return impl_->Run("LeaseShard", [&]() -> absl::StatusOr<Answers> {
    std::vector<pb::LeaseShardResponse> out(worker_ids.size());
    std::vector<bool> known(worker_ids.size(), false);
    std::vector<size_t> waiting;  // indexes into worker_ids still without a shard
    for (size_t i = 0; i < worker_ids.size(); ++i) waiting.push_back(i);
    // A leased shard whose jobs all have results (its worker died between the last report and
    // FinishShard) is closed, and its worker takes the next one.
    for (int tries = 0; tries < 8 && !waiting.empty(); ++tries) {
      std::vector<int64_t> ids;
      std::vector<std::string> tokens;
      for (size_t i : waiting) {
        ids.push_back(worker_ids[i]);
        tokens.push_back(NewToken());
      }
      std::set<size_t> leased_slots, empty_slots;
      {
        pqxx::nontransaction n(*impl_->conn);
        pqxx::result rows =
            n.exec_prepared("lease_jobs", IdArray(ids), TextArray(tokens), impl_->opts.lease_ttl_s);
        for (const auto& row : rows) {
          const size_t slot = static_cast<size_t>(row[0].as<int64_t>() - 1);
          known[waiting[slot]] = true;
          if (row[1].is_null()) continue;  // no queued shard left for this worker
          pb::LeaseShardResponse& o = out[waiting[slot]];
          if (leased_slots.insert(slot).second) {
            o.set_shard_id(row[1].as<int64_t>());
            o.set_sweep_id(row[2].as<int64_t>());
            o.set_attempt(row[3].as<int>());
            o.set_lease_token(tokens[slot]);
          }
          if (row[4].is_null()) {
            empty_slots.insert(slot);
            continue;
          }
          pb::Job* j = o.add_jobs();
          j->set_job_id(row[4].as<int64_t>());
          j->set_model_id(row[5].c_str());
          j->set_run(row[6].as<int>());
          j->set_arch(row[7].c_str());
          j->set_task(row[8].c_str());
          j->set_config_json(row[9].c_str());
        }
        for (size_t slot : leased_slots) {
          if (empty_slots.count(slot)) continue;
          pb::LeaseShardResponse& o = out[waiting[slot]];
          auto sweep = impl_->Sweep(n, o.sweep_id());
          if (!sweep.ok()) return sweep.status();
          o.set_has_shard(true);
          *o.mutable_profile() = sweep->profile;
          for (const auto& m : sweep->modes) o.add_modes(m);
          o.set_model_timeout_s(sweep->model_timeout_s);
          // Confirmation runs draw new random numbers, so a flaky defect can show itself.
          for (auto& j : *o.mutable_jobs()) j.set_seed(sweep->seed + static_cast<uint64_t>(j.run() - 1));
        }
      }  // the nontransaction ends before the next transaction on this connection
      if (empty_slots.empty()) break;
      std::vector<size_t> still;
      pqxx::work w(*impl_->conn);
      for (size_t slot : empty_slots) {
        pb::LeaseShardResponse& o = out[waiting[slot]];
        w.exec_params("UPDATE shards SET state = 'done', lease_token = NULL WHERE shard_id = $1",
                      o.shard_id());
        impl_->SettleSweep(w, o.sweep_id());
        o.Clear();
        still.push_back(waiting[slot]);
      }
      w.commit();
      waiting = std::move(still);
    }
    Answers answers;
    for (size_t i = 0; i < out.size(); ++i) {
      if (!known[i]) {
        answers.push_back(absl::NotFoundError("worker_id: no worker " + std::to_string(worker_ids[i]) +
                                              " (register first)"));
        continue;
      }
      if (!out[i].has_shard()) out[i].set_retry_after_ms(500);
      answers.push_back(std::move(out[i]));
    }
    return answers;
  });
}

absl::StatusOr<pb::HeartbeatResponse> Store::Heartbeat(const pb::HeartbeatRequest& r) {
  return impl_->Run("Heartbeat", [&]() -> absl::StatusOr<pb::HeartbeatResponse> {
    pqxx::work w(*impl_->conn);
    pqxx::result s = w.exec_prepared("renew", r.shard_id(), r.lease_token(), impl_->opts.lease_ttl_s);
    if (s.empty()) return impl_->StaleToken(w, r.shard_id());
    w.exec_params("UPDATE workers SET last_seen = now() WHERE worker_id = $1", r.worker_id());
    pqxx::result st = w.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1",
                                    s[0][0].as<int64_t>());
    w.commit();
    pb::HeartbeatResponse out;
    out.set_lease_expires_in_s(impl_->opts.lease_ttl_s);
    out.set_drain(!st.empty() && std::string(st[0][0].c_str()) == "cancelled");
    return out;
  });
}

absl::StatusOr<pb::ReportResultsResponse> Store::ReportResults(const pb::ReportResultsRequest& r) {
  return impl_->Run("ReportResults", [&]() -> absl::StatusOr<pb::ReportResultsResponse> {
    pqxx::work w(*impl_->conn);
    pqxx::result s = w.exec_prepared("renew", r.shard_id(), r.lease_token(), impl_->opts.lease_ttl_s);
    if (s.empty()) return impl_->StaleToken(w, r.shard_id());
    const int64_t sweep_id = s[0][0].as<int64_t>();
    auto sweep = impl_->Sweep(w, sweep_id);
    if (!sweep.ok()) return sweep.status();

    std::vector<int64_t> ids;
    for (const auto& res : r.results()) ids.push_back(res.job_id());
    struct JobRow {
      std::string model_id;
      int run;
      bool done;
    };
    std::map<int64_t, JobRow> jobs;
    for (const auto& row : w.exec_prepared("jobs_of", r.shard_id(), IdArray(ids))) {
      jobs[row[0].as<int64_t>()] = {row[1].c_str(), row[2].as<int>(), row[3].as<bool>()};
    }
    pb::ReportResultsResponse out;
    std::vector<const pb::ModelResult*> fresh;
    std::set<int64_t> seen;
    for (int i = 0; i < r.results_size(); ++i) {
      const pb::ModelResult& res = r.results(i);
      const std::string at = "results[" + std::to_string(i) + "]";
      auto it = jobs.find(res.job_id());
      if (it == jobs.end()) {
        return absl::InvalidArgumentError(at + ".job_id: job " + std::to_string(res.job_id()) +
                                          " is not in shard " + std::to_string(r.shard_id()));
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
      std::set<std::string> wanted(sweep->modes.begin(), sweep->modes.end());
      for (int k = 0; k < res.modes_size(); ++k) {
        const std::string& mode = proto::ModeName(res.modes(k).mode());
        if (!wanted.erase(mode)) {
          return absl::InvalidArgumentError(at + ".modes[" + std::to_string(k) +
                                            "].mode: '" + mode +
                                            "' is not a mode of this sweep, or repeated");
        }
      }
      if (!wanted.empty()) {
        return absl::InvalidArgumentError(at + ".modes: missing mode '" + *wanted.begin() + "'");
      }
      if (it->second.done || !seen.insert(res.job_id()).second) {
        out.set_duplicates(out.duplicates() + 1);
        continue;
      }
      fresh.push_back(&res);
    }
    const std::string sweep_s = std::to_string(sweep_id);
    const std::string worker_s = std::to_string(r.worker_id());
    std::vector<std::array<Cell, 22>> result_rows;
    std::vector<std::array<Cell, 14>> run_rows;
    std::vector<int64_t> done_ids;
    for (const pb::ModelResult* res : fresh) {
      const int run = jobs[res->job_id()].run;
      const std::string run_s = std::to_string(run);
      for (const auto& m : res->modes()) {
        std::vector<std::string> reasons(m.break_reasons().begin(), m.break_reasons().end());
        const std::string& mode = proto::ModeName(m.mode());
        const std::string& status = proto::VerdictName(m.status());
        const bool has_acc = mode != "train" && status != "skipped";
        const bool compile = mode == "compile";
        const bool train = mode == "train";
        result_rows.push_back({sweep_s, res->model_id(), mode, run_s, status, m.error(),
                               common::ErrorSignature(m.error()), worker_s, Num(m.ms()),
                               has_acc ? Cell(Num(m.rmse_device())) : Cell(),
                               has_acc ? Cell(Num(m.rmse_reference())) : Cell(),
                               has_acc ? Cell(Num(m.rmse_ratio())) : Cell(),
                               has_acc ? Cell(Num(m.max_abs_err())) : Cell(),
                               has_acc ? Cell(Num(m.cosine())) : Cell(),
                               compile ? Cell(std::to_string(m.graph_breaks())) : Cell(),
                               compile ? Cell(TextArray(reasons)) : Cell(),
                               compile ? Cell(std::to_string(m.device_segments())) : Cell(),
                               compile ? Cell(Num(m.compile_ms())) : Cell(),
                               compile ? Cell(Num(m.first_run_ms())) : Cell(),
                               train ? Cell(DoubleArray(m.loss_reference())) : Cell(),
                               train ? Cell(DoubleArray(m.loss_device())) : Cell(),
                               train ? Cell(Num(m.max_loss_gap_ratio())) : Cell()});
      }
      std::vector<std::string> ops;
      std::string calls = "{", ms = "{", native = "{";
      for (int k = 0; k < res->ops_size(); ++k) {
        const auto& op = res->ops(k);
        ops.push_back(op.op());
        const char* sep = k ? "," : "";
        calls += sep + std::to_string(op.calls());
        ms += sep + Num(op.ms());
        native += std::string(sep) + (op.native() ? "t" : "f");
      }
      run_rows.push_back({sweep_s, res->model_id(), run_s, worker_s,
                          std::to_string(res->distinct_ops()), std::to_string(res->native_ops()),
                          Num(res->opcov_ratio()), Num(res->total_ms()),
                          std::to_string(res->peak_device_bytes()), TextArray(ops), calls + "}",
                          ms + "}", native + "}",
                          res->tiny_config_json().empty() ? Cell() : Cell(res->tiny_config_json())});
      done_ids.push_back(res->job_id());
    }
    Copy<22>(w, "results",
             {"sweep_id", "model_id", "mode", "run", "status", "error", "error_signature",
              "worker_id", "ms", "rmse_device", "rmse_reference", "rmse_ratio", "max_abs_err",
              "cosine", "graph_breaks", "break_reasons", "device_segments", "compile_ms",
              "first_run_ms", "loss_reference", "loss_device", "max_loss_gap_ratio"},
             result_rows);
    Copy<14>(w, "model_runs",
             {"sweep_id", "model_id", "run", "worker_id", "distinct_ops", "native_ops",
              "opcov_ratio", "total_ms", "peak_device_bytes", "ops", "op_calls", "op_ms",
              "op_native", "tiny_config"},
             run_rows);
    // Primary runs stored now, and those of them with a non-pass mode: the shard's tallies,
    // and the candidates for new failures against the baseline.
    int primary = 0;
    std::vector<std::string> failing;
    for (const pb::ModelResult* res : fresh) {
      if (jobs[res->job_id()].run != 1) continue;
      ++primary;
      if (std::any_of(res->modes().begin(), res->modes().end(),
                      [](const pb::ModeVerdict& m) { return m.status() != ::touchstone::v1::VERDICT_PASS; })) {
        failing.push_back(res->model_id());
      }
    }
    if (!done_ids.empty()) {
      w.exec_prepared("mark_done", IdArray(done_ids), r.shard_id(),
                      static_cast<int>(done_ids.size()), primary, static_cast<int>(failing.size()));
    }

    // New failures vs the baseline: two confirmation runs each, in their own shards.
    if (sweep->baseline > 0) {
      if (!failing.empty()) {
        pqxx::result reg = w.exec_params(R"(
          INSERT INTO regressions (sweep_id, model_id, mode, baseline_status, status)
          SELECT $1, n.model_id, n.mode, b.status, n.status
          FROM results n JOIN results b
            ON b.sweep_id = $2 AND b.model_id = n.model_id AND b.mode = n.mode AND b.run = 1
          WHERE n.sweep_id = $1 AND n.run = 1 AND n.model_id = ANY($3::text[])
            AND b.status = 'pass' AND n.status <> 'pass'
          ON CONFLICT DO NOTHING
          RETURNING model_id)",
                                         sweep_id, sweep->baseline, TextArray(failing));
        std::set<std::string> flipped;
        for (const auto& row : reg) flipped.insert(row[0].c_str());
        for (const auto& model : flipped) {
          for (int run = 2; run <= 3; ++run) {
            pqxx::result sh = w.exec_params(
                "INSERT INTO shards (sweep_id, priority, jobs_total) VALUES ($1, $2, 1) "
                "RETURNING shard_id",
                sweep_id, sweep->priority + 1);
            w.exec_params("INSERT INTO jobs (sweep_id, model_id, run, shard_id) VALUES ($1, $2, $3, $4)",
                          sweep_id, model, run, sh[0][0].as<int64_t>());
          }
        }
      }
      // Confirmations that are complete settle their regressions.
      std::set<std::string> confirmed;
      for (const pb::ModelResult* res : fresh) {
        if (jobs[res->job_id()].run > 1) confirmed.insert(res->model_id());
      }
      for (const auto& model : confirmed) {
        w.exec_params(R"(
          UPDATE regressions g SET confirmation = CASE WHEN (
              SELECT count(DISTINCT r.status) FROM results r
              WHERE r.sweep_id = g.sweep_id AND r.model_id = g.model_id AND r.mode = g.mode) = 1
            THEN 'deterministic' ELSE 'flaky' END
          WHERE g.sweep_id = $1 AND g.model_id = $2 AND NOT EXISTS (
            SELECT 1 FROM jobs j WHERE j.sweep_id = $1 AND j.model_id = $2 AND j.run > 1
              AND NOT j.done))",
                      sweep_id, model);
      }
    }
    // Confirmation shards were queued above, so the sweep cannot be settled too early.
    if (r.finish()) out.set_jobs_left(impl_->Finish(w, r.shard_id(), sweep_id, /*release=*/true));
    w.commit();
    out.set_accepted(static_cast<int>(fresh.size()));
    return out;
  });
}

absl::StatusOr<pb::FinishShardResponse> Store::FinishShard(const pb::FinishShardRequest& r) {
  return impl_->Run("FinishShard", [&]() -> absl::StatusOr<pb::FinishShardResponse> {
    pqxx::work w(*impl_->conn);
    pqxx::result s = w.exec_params(R"(
      SELECT sweep_id FROM shards WHERE shard_id = $1 AND lease_token = $2 AND state = 'leased'
      FOR UPDATE)",
                                   r.shard_id(), r.lease_token());
    if (s.empty()) return impl_->StaleToken(w, r.shard_id());
    const int jobs_left = impl_->Finish(w, r.shard_id(), s[0][0].as<int64_t>(), r.release());
    w.commit();
    pb::FinishShardResponse out;
    out.set_jobs_left(jobs_left);
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
      FROM (SELECT shard_id FROM shards WHERE state = 'leased' AND lease_expires < now()
            FOR UPDATE SKIP LOCKED) e
      WHERE s.shard_id = e.shard_id
      RETURNING s.shard_id, s.sweep_id, s.expiries, s.priority)");
    for (const auto& row : expired) {
      ++stats.expired;
      const int64_t shard_id = row[0].as<int64_t>();
      const int64_t sweep_id = row[1].as<int64_t>();
      const int expiries = row[2].as<int>();
      const int priority = row[3].as<int>();
      pqxx::result sweep_state =
          w.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1", sweep_id);
      if (!sweep_state.empty() && std::string(sweep_state[0][0].c_str()) == "cancelled") {
        w.exec_params("UPDATE shards SET state = 'done' WHERE shard_id = $1", shard_id);
        continue;
      }
      pqxx::result pending = w.exec_params(R"(
        UPDATE jobs SET lost_leases = lost_leases + 1 WHERE shard_id = $1 AND NOT done
        RETURNING job_id, model_id, run, lost_leases)",
                                           shard_id);
      if (pending.empty()) {
        w.exec_params("UPDATE shards SET state = 'done' WHERE shard_id = $1", shard_id);
        continue;
      }
      if (pending.size() == 1 && pending[0][3].as<int>() >= impl_->opts.max_lost_leases) {
        auto sweep = impl_->Sweep(w, sweep_id);
        if (!sweep.ok()) return sweep.status();
        impl_->RecordLost(w, sweep_id, shard_id, pending[0][0].as<int64_t>(),
                          pending[0][1].c_str(), pending[0][2].as<int>(), pending[0][3].as<int>(),
                          sweep->modes);
        w.exec_params("UPDATE shards SET state = 'done' WHERE shard_id = $1", shard_id);
        ++stats.crashed;
        continue;
      }
      if (pending.size() > 1 && expiries >= impl_->opts.split_after_expiries) {
        // This shard keeps killing workers: one shard per model finds the culprit.
        // The pending jobs' totals move with them; what was done stays with this shard.
        int primary_moved = 0;
        for (const auto& job : pending) {
          const int primary = job[2].as<int>() == 1 ? 1 : 0;
          primary_moved += primary;
          pqxx::result sh = w.exec_params(
              "INSERT INTO shards (sweep_id, priority, jobs_total, primary_total) "
              "VALUES ($1, $2, 1, $3) RETURNING shard_id",
              sweep_id, priority, primary);
          w.exec_params("UPDATE jobs SET shard_id = $1 WHERE job_id = $2",
                        sh[0][0].as<int64_t>(), job[0].as<int64_t>());
        }
        w.exec_params(R"(
          UPDATE shards SET state = 'split', jobs_total = jobs_total - $2,
                            primary_total = primary_total - $3
          WHERE shard_id = $1)",
                      shard_id, static_cast<int>(pending.size()), primary_moved);
        ++stats.split;
      }
    }
    // Sweeps whose last FinishShard raced another one settle here.
    pqxx::result running = w.exec("SELECT sweep_id FROM sweeps WHERE state = 'running'");
    for (const auto& row : running) impl_->SettleSweep(w, row[0].as<int64_t>());
    w.commit();
    return stats;
  });
}

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

absl::StatusOr<pb::CreateSweepResponse> Store::CreateSweep(const pb::CreateSweepRequest& r) {
  return impl_->Run("CreateSweep", [&]() -> absl::StatusOr<pb::CreateSweepResponse> {
    pqxx::work w(*impl_->conn);
    const auto& f = r.filter();
    // Names in the filter must exist: a typo selects nothing silently otherwise.
    auto check = [&](const char* field, const char* column,
                     const google::protobuf::RepeatedPtrField<std::string>& values) -> absl::Status {
      if (values.empty()) return absl::OkStatus();
      std::vector<std::string> v(values.begin(), values.end());
      pqxx::result found = w.exec_params(std::string("SELECT DISTINCT ") + column +
                                             " FROM models WHERE " + column + " = ANY($1::text[])",
                                         TextArray(v));
      std::set<std::string> have;
      for (const auto& row : found) have.insert(row[0].c_str());
      for (size_t i = 0; i < v.size(); ++i) {
        if (!have.count(v[i])) {
          return absl::InvalidArgumentError(std::string("filter.") + field + "[" +
                                            std::to_string(i) + "]: no model in the catalog has " +
                                            column + " '" + v[i] + "'");
        }
      }
      return absl::OkStatus();
    };
    if (auto st = check("tasks", "task", f.tasks()); !st.ok()) return st;
    if (auto st = check("families", "family", f.families()); !st.ok()) return st;
    if (auto st = check("archs", "arch", f.archs()); !st.ok()) return st;
    if (auto st = check("model_ids", "model_id", f.model_ids()); !st.ok()) return st;
    if (r.baseline_sweep_id() > 0) {
      // FOR SHARE: a concurrent prune of the baseline waits for this sweep to exist, and then
      // sees it running and keeps the baseline.
      pqxx::result b = w.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1 FOR SHARE",
                                     r.baseline_sweep_id());
      if (b.empty()) {
        return absl::InvalidArgumentError("baseline_sweep_id: no sweep " +
                                          std::to_string(r.baseline_sweep_id()));
      }
      if (std::string(b[0][0].c_str()) == "pruned") {
        return absl::FailedPreconditionError("baseline_sweep_id: sweep " +
                                             std::to_string(r.baseline_sweep_id()) +
                                             " was pruned; its results are gone");
      }
    }
    std::vector<std::string> modes(r.modes().begin(), r.modes().end());
    if (modes.empty()) modes = AllModeNames();
    const std::string sha = Sha256Hex(r.profile().body());
    pqxx::result p = w.exec_params(R"(
      INSERT INTO profiles (name, sha, body) VALUES ($1, $2, $3)
      ON CONFLICT (sha) DO UPDATE SET name = profiles.name RETURNING profile_id)",
                                   r.profile().name(), sha, r.profile().body());
    nlohmann::json filter = {
        {"tasks", std::vector<std::string>(f.tasks().begin(), f.tasks().end())},
        {"families", std::vector<std::string>(f.families().begin(), f.families().end())},
        {"archs", std::vector<std::string>(f.archs().begin(), f.archs().end())},
        {"model_ids", f.model_ids_size()}};
    pqxx::result sw = w.exec_params(R"(
      INSERT INTO sweeps (name, profile_id, filter, sample, seed, modes, priority, baseline_sweep,
                          model_timeout_s)
      VALUES ($1, $2, $3::jsonb, $4, $5, $6::text[], $7, NULLIF($8, 0), $9) RETURNING sweep_id)",
                                    r.name(), p[0][0].as<int64_t>(), filter.dump(), r.sample(),
                                    static_cast<int64_t>(r.seed()), TextArray(modes), r.priority(),
                                    r.baseline_sweep_id(),
                                    r.model_timeout_s() > 0 ? r.model_timeout_s() : 300.0);
    const int64_t sweep_id = sw[0][0].as<int64_t>();
    const std::string id = std::to_string(sweep_id);

    // Selection (a task-stratified sample when asked) with each model's expected duration:
    // its own mean over past sweeps, else its class's, else 1 s.
    std::string where = "true";
    auto cond = [&](const char* column, const google::protobuf::RepeatedPtrField<std::string>& v) {
      if (v.empty()) return;
      where += std::string(" AND m.") + column + " = ANY(" +
               w.quote(TextArray(std::vector<std::string>(v.begin(), v.end()))) + "::text[])";
    };
    cond("task", f.tasks());
    cond("family", f.families());
    cond("arch", f.archs());
    cond("model_id", f.model_ids());
    const std::string seed = w.quote(std::to_string(r.seed()));
    std::string sql = R"(
      WITH sel AS (
        SELECT m.model_id, m.arch,
               row_number() OVER (PARTITION BY m.task ORDER BY md5(m.model_id || )" + seed + R"())
                 ::float8 / count(*) OVER (PARTITION BY m.task) AS frac
        FROM models m WHERE )" + where + R"(),
      picked AS (SELECT * FROM sel ORDER BY frac, md5(model_id || )" + seed + R"() )" +
                      (r.sample() > 0 ? "LIMIT " + std::to_string(r.sample()) : "") + R"(),
      hist AS (SELECT mr.model_id, avg(mr.total_ms) AS ms FROM model_runs mr
               WHERE mr.run = 1 AND mr.total_ms > 0
                 AND mr.model_id IN (SELECT model_id FROM picked) GROUP BY mr.model_id),
      arch_hist AS (SELECT m.arch, avg(h.ms) AS ms FROM hist h JOIN models m USING (model_id)
                    GROUP BY m.arch)
      SELECT p.model_id, coalesce(h.ms, a.ms, 1000.0)
      FROM picked p LEFT JOIN hist h USING (model_id) LEFT JOIN arch_hist a USING (arch)
      ORDER BY p.model_id)";
    pqxx::result sel = w.exec(sql);
    if (sel.empty()) return absl::InvalidArgumentError("filter: selects no model");

    // Longest-first onto the least-loaded shard, at most shard_max_models each.
    const int max_models = r.shard_max_models() > 0 ? r.shard_max_models() : 32;
    const double target_ms = (r.shard_target_s() > 0 ? r.shard_target_s() : 30.0) * 1000;
    std::vector<std::pair<double, std::string>> models;
    double total_ms = 0;
    for (const auto& row : sel) {
      models.emplace_back(row[1].as<double>(), row[0].c_str());
      total_ms += models.back().first;
    }
    std::stable_sort(models.begin(), models.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    const int64_t n = static_cast<int64_t>(models.size());
    const int64_t k = std::max<int64_t>({1, (n + max_models - 1) / max_models,
                                         static_cast<int64_t>(std::ceil(total_ms / target_ms))});
    pqxx::result ids = w.exec_params(
        "SELECT nextval('shards_shard_id_seq') FROM generate_series(1, $1)", k);
    std::vector<int64_t> shard_ids;
    for (const auto& row : ids) shard_ids.push_back(row[0].as<int64_t>());
    using Slot = std::tuple<double, int64_t, int>;  // load, index, count
    std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> heap;
    for (int64_t i = 0; i < k; ++i) heap.emplace(0.0, i, 0);
    std::vector<double> load(static_cast<size_t>(k), 0.0);
    std::vector<int> members(static_cast<size_t>(k), 0);
    std::vector<std::array<Cell, 4>> job_rows;
    for (const auto& [ms, model] : models) {
      auto [l, idx, count] = heap.top();
      heap.pop();
      load[static_cast<size_t>(idx)] = l + ms;
      ++members[static_cast<size_t>(idx)];
      job_rows.push_back({id, model, "1", std::to_string(shard_ids[static_cast<size_t>(idx)])});
      if (count + 1 < max_models) heap.emplace(l + ms, idx, count + 1);
    }
    std::vector<std::array<Cell, 6>> shard_rows;
    for (int64_t i = 0; i < k; ++i) {
      const std::string n_jobs = std::to_string(members[static_cast<size_t>(i)]);
      shard_rows.push_back({std::to_string(shard_ids[static_cast<size_t>(i)]), id,
                            std::to_string(r.priority()), Num(load[static_cast<size_t>(i)]),
                            n_jobs, n_jobs});
    }
    Copy<6>(w, "shards",
            {"shard_id", "sweep_id", "priority", "estimated_ms", "jobs_total", "primary_total"},
            shard_rows);
    Copy<4>(w, "jobs", {"sweep_id", "model_id", "run", "shard_id"}, job_rows);
    // Last, right before commit: creating a partition locks the parent table, which would stall
    // other sweeps' reports for as long as this transaction runs.
    w.exec("CREATE TABLE results_" + id + " PARTITION OF results FOR VALUES IN (" + id + ")");
    w.exec("CREATE TABLE model_runs_" + id + " PARTITION OF model_runs FOR VALUES IN (" + id + ")");
    w.commit();
    pb::CreateSweepResponse out;
    out.set_sweep_id(sweep_id);
    out.set_models(n);
    out.set_shards(k);
    return out;
  });
}

absl::StatusOr<pb::SweepProgress> Store::GetSweep(int64_t sweep_id) {
  return impl_->Run("GetSweep", [&]() -> absl::StatusOr<pb::SweepProgress> {
    pqxx::work w(*impl_->conn);
    impl_->SettleSweep(w, sweep_id);
    auto out = impl_->Progress(w, sweep_id);
    if (out.ok()) w.commit();
    return out;
  });
}

absl::StatusOr<int> Store::SummarizeDoneSweeps(int max) {
  return impl_->Run("SummarizeDoneSweeps", [&]() -> absl::StatusOr<int> {
    std::vector<int64_t> ids;
    {
      pqxx::nontransaction n(*impl_->conn);
      for (const auto& row : n.exec_params(
               "SELECT sweep_id FROM sweeps WHERE state = 'done' AND summary IS NULL "
               "ORDER BY sweep_id LIMIT $1",
               std::max(0, max))) {
        ids.push_back(row[0].as<int64_t>());
      }
    }
    for (int64_t id : ids) {
      pqxx::work w(*impl_->conn);
      auto p = impl_->Progress(w, id);  // counts and keeps them
      if (!p.ok()) return p.status();
      w.commit();
    }
    return static_cast<int>(ids.size());
  });
}

absl::StatusOr<pb::SweepProgress> Store::CancelSweep(int64_t sweep_id) {
  auto st = impl_->Run("CancelSweep", [&]() -> absl::Status {
    pqxx::work w(*impl_->conn);
    pqxx::result s = w.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1 FOR UPDATE",
                                   sweep_id);
    if (s.empty()) return absl::NotFoundError("sweep_id: no sweep " + std::to_string(sweep_id));
    if (std::string(s[0][0].c_str()) == "running") {
      w.exec_params(
          "UPDATE sweeps SET state = 'cancelled', finished_at = now() WHERE sweep_id = $1",
          sweep_id);
      w.exec_params("UPDATE shards SET state = 'done' WHERE sweep_id = $1 AND state = 'queued'",
                    sweep_id);
    }
    w.commit();
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return GetSweep(sweep_id);
}

absl::StatusOr<PruneResult> Store::PruneSweeps(const PruneRequest& r) {
  if (r.sweep_ids.empty() && r.older_than_s < 0 && r.keep_last < 0) {
    return absl::InvalidArgumentError(
        "sweep_ids: name the sweeps to prune, or give older_than_s or keep_last");
  }
  return impl_->Run("PruneSweeps", [&]() -> absl::StatusOr<PruneResult> {
    PruneResult out;
    // Why a finished sweep must stay. Step 2 asks again under the sweep's row lock, which a
    // CreateSweep naming it as a baseline also takes (FOR SHARE), so that answer holds.
    auto why_kept = [](pqxx::transaction_base& w, int64_t id) -> std::string {
      pqxx::result b = w.exec_params(
          "SELECT sweep_id FROM sweeps WHERE baseline_sweep = $1 AND state = 'running' LIMIT 1",
          id);
      if (!b.empty()) return "the baseline of running sweep " + std::string(b[0][0].c_str());
      pqxx::result l = w.exec_params(
          "SELECT count(*) FROM shards WHERE sweep_id = $1 AND state = 'leased'", id);
      if (l[0][0].as<int64_t>() > 0) {
        return std::string(l[0][0].c_str()) +
               " of its shards are still leased (cancelled; prune again once their workers "
               "have drained)";
      }
      return "";
    };
    // 1. Which sweeps.
    std::vector<int64_t> chosen;
    {
      pqxx::work w(*impl_->conn);
      for (size_t i = 0; i < r.sweep_ids.size(); ++i) {
        const int64_t id = r.sweep_ids[i];
        const std::string field = "sweep_ids[" + std::to_string(i) + "]";
        pqxx::result s = w.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1", id);
        if (s.empty()) return absl::NotFoundError(field + ": no sweep " + std::to_string(id));
        const std::string state = s[0][0].c_str();
        if (state == "pruned") {  // leftovers of an interrupted prune are finished below
          out.already.push_back(id);
          continue;
        }
        if (state == "running") {
          return absl::FailedPreconditionError(field + ": sweep " + std::to_string(id) +
                                               " is running; cancel it first");
        }
        if (std::string why = why_kept(w, id); !why.empty()) {
          return absl::FailedPreconditionError(field + ": sweep " + std::to_string(id) + " is " +
                                               why);
        }
        chosen.push_back(id);
      }
      if (r.older_than_s >= 0 || r.keep_last >= 0) {
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
          if (std::string why = why_kept(w, id); !why.empty()) {
            out.kept.push_back("sweep " + std::to_string(id) + ": " + why);
            continue;
          }
          chosen.push_back(id);
        }
      }
      std::sort(chosen.begin(), chosen.end());
      for (int64_t id : chosen) {
        // A done sweep's counts are kept (one row); only a cancelled one is counted.
        auto progress = impl_->Progress(w, id);
        if (!progress.ok()) return progress.status();
        pqxx::result s = w.exec_params("SELECT name FROM sweeps WHERE sweep_id = $1", id);
        out.pruned.push_back({id, s[0][0].c_str(), progress->state(), progress->models_recorded()});
      }
      w.commit();
    }
    if (r.dry_run) return out;

    // 2. Per sweep, one transaction: the tombstone with the final counts, and its rows.
    std::vector<PrunedSweep> done;
    for (const PrunedSweep& p : out.pruned) {
      pqxx::work w(*impl_->conn);
      pqxx::result s =
          w.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1 FOR UPDATE", p.sweep_id);
      const std::string state = s.empty() ? "" : s[0][0].c_str();
      if (state != "done" && state != "cancelled") continue;  // changed since step 1
      if (std::string why = why_kept(w, p.sweep_id); !why.empty()) {
        out.kept.push_back("sweep " + std::to_string(p.sweep_id) + ": " + why);
        continue;
      }
      auto progress = impl_->Progress(w, p.sweep_id);
      if (!progress.ok()) return progress.status();
      w.exec_params(
          "UPDATE sweeps SET state = 'pruned', pruned_at = now(), summary = $2::jsonb "
          "WHERE sweep_id = $1",
          p.sweep_id, Impl::SummaryJson(*progress));
      w.exec_params("DELETE FROM regressions WHERE sweep_id = $1", p.sweep_id);
      w.exec_params("DELETE FROM jobs WHERE sweep_id = $1", p.sweep_id);
      w.exec_params("DELETE FROM shards WHERE sweep_id = $1", p.sweep_id);
      w.commit();
      impl_->sweeps.erase(p.sweep_id);
      done.push_back(p);
    }
    out.pruned = std::move(done);

    // 3. Partitions of every pruned sweep that still has one: this call's, and those of an
    // earlier call that was cut off after its tombstones.
    std::vector<int64_t> left;
    {
      pqxx::nontransaction n(*impl_->conn);
      for (const auto& row : n.exec(R"(
             SELECT sweep_id FROM sweeps WHERE state = 'pruned'
               AND (to_regclass('results_' || sweep_id) IS NOT NULL
                    OR to_regclass('model_runs_' || sweep_id) IS NOT NULL)
             ORDER BY sweep_id)")) {
        left.push_back(row[0].as<int64_t>());
      }
    }
    for (int64_t id : left) {
      impl_->DropPartition("results", id);
      impl_->DropPartition("model_runs", id);
      const bool now = std::any_of(out.pruned.begin(), out.pruned.end(),
                                   [id](const PrunedSweep& p) { return p.sweep_id == id; });
      if (!now) out.completed.push_back(id);
    }
    return out;
  });
}

absl::StatusOr<std::vector<pb::ResultRow>> Store::ListResults(int64_t sweep_id,
                                                              const std::string& after,
                                                              int limit) {
  return impl_->Run("ListResults", [&]() -> absl::StatusOr<std::vector<pb::ResultRow>> {
    pqxx::work w(*impl_->conn);
    pqxx::result s = w.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1", sweep_id);
    if (s.empty()) return absl::NotFoundError("sweep_id: no sweep " + std::to_string(sweep_id));
    if (std::string(s[0][0].c_str()) == "pruned") {
      return absl::FailedPreconditionError("sweep_id: sweep " + std::to_string(sweep_id) +
                                           " was pruned; its results are gone (GetSweep still "
                                           "gives its counts)");
    }
    pqxx::result rows = w.exec_params(R"(
      SELECT mr.model_id, m.task, m.arch, m.family, mr.opcov_ratio, mr.total_ms,
             (SELECT array_agg(r.mode || '=' || r.status) FROM results r
              WHERE r.sweep_id = mr.sweep_id AND r.model_id = mr.model_id AND r.run = 1),
             -- A model is flaky when any of its regressed modes is; '' when none regressed
             -- (the aggregate still returns one row then, so count it).
             (SELECT CASE WHEN count(*) = 0 THEN ''
                          WHEN bool_or(g.confirmation = 'flaky') THEN 'flaky'
                          WHEN bool_or(g.confirmation = 'pending') THEN 'pending'
                          ELSE 'deterministic' END
              FROM regressions g
              WHERE g.sweep_id = mr.sweep_id AND g.model_id = mr.model_id)
      FROM model_runs mr JOIN models m USING (model_id)
      WHERE mr.sweep_id = $1 AND mr.run = 1 AND mr.model_id > $2
      ORDER BY mr.model_id LIMIT $3)",
                                      sweep_id, after, limit);
    std::vector<pb::ResultRow> out;
    for (const auto& row : rows) {
      pb::ResultRow r;
      r.set_model_id(row[0].c_str());
      r.set_task(row[1].c_str());
      r.set_arch(row[2].c_str());
      r.set_family(row[3].c_str());
      r.set_opcov_ratio(row[4].as<double>());
      r.set_total_ms(row[5].as<double>());
      for (const auto& kv : ParseTextArray(row[6])) {
        const size_t eq = kv.find('=');
        (*r.mutable_status())[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      r.set_confirmation(row[7].c_str());
      out.push_back(std::move(r));
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
    return q;
  });
}

}  // namespace ts::store
