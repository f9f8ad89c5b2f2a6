// Sweeps: creation (filter checks, the stratified sample, shards packed by expected duration),
// settings, settling, progress and kept summaries, cancel, ListResults.
#include <openssl/sha.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <queue>
#include <set>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "proto/names.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

// Every mode (proto/touchstone/v1/result.proto), by name: a sweep's default.
std::vector<std::string> AllModeNames() {
  std::vector<std::string> names;
  for (auto m : proto::AllModes()) names.push_back(proto::ModeName(m));
  return names;
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

using Names = google::protobuf::RepeatedPtrField<std::string>;

// Names in the filter must exist: a typo selects nothing silently otherwise.
absl::Status CheckNames(pqxx::transaction_base& w, const char* field, const char* column,
                        const Names& values) {
  if (values.empty()) return absl::OkStatus();
  std::vector<std::string> v(values.begin(), values.end());
  pqxx::result found = w.exec_params(std::string("SELECT DISTINCT ") + column +
                                         " FROM models WHERE " + column + " = ANY($1::text[])",
                                     TextArray(v));
  std::set<std::string> have;
  for (const auto& row : found) have.insert(row[0].c_str());
  for (size_t i = 0; i < v.size(); ++i) {
    if (!have.count(v[i])) {
      return absl::InvalidArgumentError(std::string("filter.") + field + "[" + std::to_string(i) +
                                        "]: no model in the catalog has " + column + " '" + v[i] +
                                        "'");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFilter(pqxx::transaction_base& w, const pb::SweepFilter& f) {
  if (auto st = CheckNames(w, "tasks", "task", f.tasks()); !st.ok()) return st;
  if (auto st = CheckNames(w, "families", "family", f.families()); !st.ok()) return st;
  if (auto st = CheckNames(w, "archs", "arch", f.archs()); !st.ok()) return st;
  return CheckNames(w, "model_ids", "model_id", f.model_ids());
}

absl::Status CheckBaseline(pqxx::transaction_base& w, int64_t baseline_sweep_id) {
  if (baseline_sweep_id <= 0) return absl::OkStatus();
  // FOR SHARE: a concurrent prune of the baseline waits for this sweep to exist, and then
  // sees it running and keeps the baseline.
  pqxx::result b =
      w.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1 FOR SHARE", baseline_sweep_id);
  if (b.empty()) {
    return absl::InvalidArgumentError("baseline_sweep_id: no sweep " +
                                      std::to_string(baseline_sweep_id));
  }
  if (std::string(b[0][0].c_str()) == "pruned") {
    return absl::FailedPreconditionError("baseline_sweep_id: sweep " +
                                         std::to_string(baseline_sweep_id) +
                                         " was pruned; its results are gone");
  }
  return absl::OkStatus();
}

// The profile (by content) and the sweep row; returns the sweep_id.
int64_t InsertSweep(pqxx::transaction_base& w, const pb::CreateSweepRequest& r) {
  const auto& f = r.filter();
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
                        model_timeout_s, audit_ops)
    VALUES ($1, $2, $3::jsonb, $4, $5, $6::text[], $7, NULLIF($8, 0), $9, $10)
    RETURNING sweep_id)",
                                  r.name(), p[0][0].as<int64_t>(), filter.dump(), r.sample(),
                                  static_cast<int64_t>(r.seed()), TextArray(modes), r.priority(),
                                  r.baseline_sweep_id(),
                                  r.model_timeout_s() > 0 ? r.model_timeout_s() : 300.0,
                                  r.audit_ops());
  return sw[0][0].as<int64_t>();
}

constexpr int kHistorySweeps = 3;  // done sweeps whose timings pack a new sweep's shards

// The models the filter selects, each with its expected duration in ms: its own mean over the
// newest kHistorySweeps done sweeps, else its class's (arch) there, else 1 s. Ordered by
// model_id.
//
// The sample (r.sample() > 0) is stratified by task: within each task the models are ranked by
// md5(model_id || seed), and each model's rank divided by its task's size is its `frac`; the
// first `sample` models by (frac, md5) are taken. So every task gets about its share, and ties
// between tasks go by the seeded hash.

pqxx::result SelectModels(pqxx::transaction_base& w, const pb::CreateSweepRequest& r) {
  const auto& f = r.filter();
  std::string where = "true";
  auto cond = [&](const char* column, const Names& v) {
    if (v.empty()) return;
    where += std::string(" AND m.") + column + " = ANY(" +
             w.quote(TextArray(std::vector<std::string>(v.begin(), v.end()))) + "::text[])";
  };
  cond("task", f.tasks());
  cond("family", f.families());
  cond("arch", f.archs());
  cond("model_id", f.model_ids());
  const std::string seed = w.quote(std::to_string(r.seed()));
  // Timing history from the newest few done sweeps only, named by id so that the planner
  // reads just their partitions: the cost of a CreateSweep does not grow with the sweeps kept.
  std::string recent;
  for (const auto& row : w.exec(R"(
      SELECT sweep_id FROM sweeps WHERE state = 'done'
      ORDER BY sweep_id DESC LIMIT )" + std::to_string(kHistorySweeps))) {
    recent += (recent.empty() ? "" : ", ") + std::string(row[0].c_str());
  }
  const std::string in_recent = recent.empty() ? "false" : "mr.sweep_id IN (" + recent + ")";
  std::string sql = R"(
    WITH sel AS (
      SELECT m.model_id, m.arch,
             row_number() OVER (PARTITION BY m.task ORDER BY md5(m.model_id || )" + seed + R"())
               ::float8 / count(*) OVER (PARTITION BY m.task) AS frac
      FROM models m WHERE )" + where + R"(),
    picked AS (SELECT * FROM sel ORDER BY frac, md5(model_id || )" + seed + R"() )" +
                    (r.sample() > 0 ? "LIMIT " + std::to_string(r.sample()) : "") + R"(),
    hist AS (SELECT mr.model_id, avg(mr.total_ms) AS ms FROM model_runs mr
             WHERE )" + in_recent + R"( AND mr.run = 1 AND mr.total_ms > 0
               AND mr.model_id IN (SELECT model_id FROM picked) GROUP BY mr.model_id),
    arch_hist AS (SELECT m.arch, avg(h.ms) AS ms FROM hist h JOIN models m USING (model_id)
                  GROUP BY m.arch)
    SELECT p.model_id, coalesce(h.ms, a.ms, 1000.0)
    FROM picked p LEFT JOIN hist h USING (model_id) LEFT JOIN arch_hist a USING (arch)
    ORDER BY p.model_id)";
  return w.exec(sql);
}

// The sweep's shards and primary jobs, ready to COPY.
struct Packing {
  int64_t models = 0;
  int64_t shards = 0;
  std::vector<std::array<Cell, 6>> shard_rows;
  std::vector<std::array<Cell, 4>> job_rows;
};

// Longest-first onto the least-loaded shard, at most shard_max_models each; enough shards that
// none expects more than shard_target_s.
Packing PackShards(pqxx::transaction_base& w, const pqxx::result& sel,
                   const pb::CreateSweepRequest& r, int64_t sweep_id) {
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
  Packing out;
  out.models = static_cast<int64_t>(models.size());
  // Never more shards than models: an empty shard would only be leased to be closed.
  const int64_t k = std::min<int64_t>(
      std::max<int64_t>(1, out.models),
      std::max<int64_t>({1, (out.models + max_models - 1) / max_models,
                         static_cast<int64_t>(std::ceil(total_ms / target_ms))}));
  out.shards = k;
  std::vector<int64_t> shard_ids;
  for (const auto& row :
       w.exec_params("SELECT nextval('shards_shard_id_seq') FROM generate_series(1, $1)", k)) {
    shard_ids.push_back(row[0].as<int64_t>());
  }
  const std::string id = std::to_string(sweep_id);
  using Slot = std::tuple<double, int64_t, int>;  // load, index, count
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> heap;
  for (int64_t i = 0; i < k; ++i) heap.emplace(0.0, i, 0);
  std::vector<double> load(static_cast<size_t>(k), 0.0);
  std::vector<int> members(static_cast<size_t>(k), 0);
  for (const auto& [ms, model] : models) {
    auto [l, idx, count] = heap.top();
    heap.pop();
    load[static_cast<size_t>(idx)] = l + ms;
    ++members[static_cast<size_t>(idx)];
    out.job_rows.push_back({id, model, "1", std::to_string(shard_ids[static_cast<size_t>(idx)])});
    if (count + 1 < max_models) heap.emplace(l + ms, idx, count + 1);
  }
  for (size_t i = 0; i < static_cast<size_t>(k); ++i) {
    const std::string n_jobs = std::to_string(members[i]);
    out.shard_rows.push_back({std::to_string(shard_ids[i]), id, std::to_string(r.priority()),
                              Num(load[i]), n_jobs, n_jobs});
  }
  return out;
}

// Regressions settled deterministic / flaky (the regressions table holds only the sweep's
// new failures: small).
void Confirmations(pqxx::transaction_base& w, int64_t sweep_id, pb::SweepProgress* out) {
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
void CountFromTables(pqxx::transaction_base& w, int64_t sweep_id, pb::SweepProgress* out) {
  // One statement, so one snapshot: a report commits its results and marks its jobs done
  // together, and the counts below agree with each other while reports keep landing.
  pqxx::result j = w.exec_params(R"(
    SELECT count(*) FILTER (WHERE run = 1), count(*), count(*) FILTER (WHERE done),
           (SELECT count(*) FROM model_runs WHERE sweep_id = $1 AND run = 1),
           (SELECT count(DISTINCT model_id) FROM results
            WHERE sweep_id = $1 AND run = 1 AND status NOT IN ('pass', 'lost'))
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

}  // namespace

// A running sweep's counts: its shards' tallies, summed (O(shards), not O(models)).
void SumTallies(pqxx::transaction_base& w, int64_t sweep_id, pb::SweepProgress* out) {
  pqxx::result t = w.exec_params(R"(
    SELECT coalesce(sum(primary_total), 0), coalesce(sum(jobs_total), 0),
           coalesce(sum(jobs_done), 0), coalesce(sum(primary_done), 0),
           coalesce(sum(primary_failed), 0),
           count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'leased')
    FROM shards WHERE sweep_id = $1)",
                                 sweep_id);
  out->set_models_expected(t[0][0].as<int64_t>());
  out->set_jobs_total(t[0][1].as<int64_t>());
  out->set_jobs_done(t[0][2].as<int64_t>());
  out->set_models_recorded(t[0][3].as<int64_t>());
  out->set_failures(t[0][4].as<int64_t>());
  out->set_shards_queued(t[0][5].as<int64_t>());
  out->set_shards_leased(t[0][6].as<int64_t>());
  Confirmations(w, sweep_id, out);
}

absl::StatusOr<SweepInfo> Store::Impl::Sweep(pqxx::transaction_base& txn, int64_t sweep_id) {
  auto it = sweeps.find(sweep_id);
  if (it != sweeps.end()) return it->second;
  pqxx::result r = txn.exec_params(R"(
    SELECT s.modes, s.model_timeout_s, s.seed, s.priority, coalesce(s.baseline_sweep, 0),
           p.name, p.sha, p.body, s.audit_ops
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
  s.audit_ops = r[0][8].as<bool>();
  sweeps[sweep_id] = s;
  return s;
}

std::string SweepState(pqxx::transaction_base& txn, int64_t sweep_id) {
  pqxx::result r = txn.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1", sweep_id);
  return r.empty() ? "" : r[0][0].c_str();
}

int SettleSweep(pqxx::transaction_base& txn, int64_t sweep_id) {
  pqxx::result r = txn.exec_params(R"(
    UPDATE sweeps SET state = 'done', finished_at = now()
    WHERE sweep_id = $1 AND state = 'running' AND NOT EXISTS (
      SELECT 1 FROM shards WHERE sweep_id = $1 AND state IN ('queued', 'leased'))
    RETURNING sweep_id)",
                                   sweep_id);
  return static_cast<int>(r.size());
}

std::string SummaryJson(const pb::SweepProgress& p) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(p, &json, o);  // cannot fail: no Any
  return json;
}

absl::Status ParseSummary(const pqxx::field& summary, int64_t sweep_id, pb::SweepProgress* out) {
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(summary.c_str(), out, o).ok()) {
    return absl::DataLossError("sweeps.summary of sweep " + std::to_string(sweep_id) +
                               ": not a SweepProgress");
  }
  return absl::OkStatus();
}

// The sweep's progress counts, read in `w`'s snapshot:
//   done or pruned: the counts kept in sweeps.summary. A done sweep's are taken from the
//     tables (duplicate check included) by the first call after it settled, or by the
//     scheduler's ticker (SummarizeDoneSweeps), and kept (unless another transaction holds
//     the sweep's row: then the next call keeps them): nothing writes to a done sweep;
//   running: the shards' tallies, summed (O(shards), not O(models));
//   cancelled (late reports may still land): counted from the tables.
// The summary holds the SweepProgress itself (proto field names); its state is the one the
// counts were taken in (done, or cancelled for a pruned sweep).
absl::StatusOr<pb::SweepProgress> Progress(pqxx::transaction_base& w, int64_t sweep_id) {
  pqxx::result s = w.exec_params(R"(
    SELECT state, extract(epoch FROM coalesce(finished_at, now()) - created_at), summary::text
    FROM sweeps WHERE sweep_id = $1)",
                                 sweep_id);
  if (s.empty()) return absl::NotFoundError("sweep_id: no sweep " + std::to_string(sweep_id));
  pb::SweepProgress out;
  if (!s[0][2].is_null()) {
    if (auto st = ParseSummary(s[0][2], sweep_id, &out); !st.ok()) return st;
  }
  // Identity and state from the row (counts, if kept, from the summary).
  out.set_sweep_id(sweep_id);
  out.set_state(s[0][0].c_str());
  out.set_elapsed_s(s[0][1].as<double>());
  if (!s[0][2].is_null()) return out;
  if (out.state() == "running") {
    SumTallies(w, sweep_id, &out);
    return out;
  }
  CountFromTables(w, sweep_id, &out);
  // Kept for the next reader, unless another transaction holds the row (keeping the sweep's
  // answers, settling it): a read never waits for a write; that one keeps the counts instead.
  if (out.state() == "done" &&
      !w.exec_params("SELECT 1 FROM sweeps WHERE sweep_id = $1 AND summary IS NULL "
                     "FOR UPDATE SKIP LOCKED",
                     sweep_id)
           .empty()) {
    w.exec_params("UPDATE sweeps SET summary = $2::jsonb WHERE sweep_id = $1", sweep_id,
                  SummaryJson(out));
  }
  return out;
}

absl::StatusOr<pb::CreateSweepResponse> CreateSweepIn(pqxx::transaction_base& w,
                                                      const pb::CreateSweepRequest& r) {
  if (auto st = CheckFilter(w, r.filter()); !st.ok()) return st;
  if (auto st = CheckBaseline(w, r.baseline_sweep_id()); !st.ok()) return st;
  const int64_t sweep_id = InsertSweep(w, r);
  const pqxx::result sel = SelectModels(w, r);
  if (sel.empty()) return absl::InvalidArgumentError("filter: selects no model");
  const Packing packed = PackShards(w, sel, r, sweep_id);
  Copy<6>(w, "shards",
          {"shard_id", "sweep_id", "priority", "estimated_ms", "jobs_total", "primary_total"},
          packed.shard_rows);
  Copy<4>(w, "jobs", {"sweep_id", "model_id", "run", "shard_id"}, packed.job_rows);
  // The partitions: made alone, then attached. CREATE TABLE ... PARTITION OF would take ACCESS
  // EXCLUSIVE on the parent: it would wait for any running reader of results (a summary being
  // kept, a long comparison) while every new reader and report queued behind it. ATTACH
  // PARTITION takes SHARE UPDATE EXCLUSIVE, which neither readers nor writers conflict with;
  // the copied indexes are attached, not rebuilt. Last, right before commit, all the same.
  const std::string id = std::to_string(sweep_id);
  for (const std::string parent : {"results", "model_runs"}) {
    w.exec("CREATE TABLE " + parent + "_" + id + " (LIKE " + parent + " INCLUDING ALL)");
    w.exec("ALTER TABLE " + parent + " ATTACH PARTITION " + parent + "_" + id + " FOR VALUES IN (" +
           id + ")");
  }
  pb::CreateSweepResponse out;
  out.set_sweep_id(sweep_id);
  out.set_models(packed.models);
  out.set_shards(packed.shards);
  return out;
}

absl::StatusOr<pb::CreateSweepResponse> Store::CreateSweep(const pb::CreateSweepRequest& r) {
  return impl_->Run("CreateSweep", [&]() -> absl::StatusOr<pb::CreateSweepResponse> {
    pqxx::work w(*impl_->conn);
    // A CreateSweep retried after an in-doubt commit answers with the sweep it made.
    auto earlier = BeginRequest(w, "CreateSweep", r.request_id(), r);
    if (!earlier.ok()) return earlier.status();
    if (*earlier) {
      pb::CreateSweepResponse replay;
      if (!replay.ParseFromString(**earlier)) {
        return absl::DataLossError("request_id: stored answer unreadable");
      }
      replay.set_replayed(true);
      return replay;
    }
    auto out = CreateSweepIn(w, r);
    if (!out.ok()) return out;
    EndRequest(w, "CreateSweep", r.request_id(), *out);
    w.commit();
    return out;
  });
}

absl::StatusOr<pb::SweepProgress> Store::GetSweep(int64_t sweep_id) {
  return impl_->Run("GetSweep", [&]() -> absl::StatusOr<pb::SweepProgress> {
    pqxx::work w(*impl_->conn);
    SettleSweep(w, sweep_id);
    auto out = Progress(w, sweep_id);
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
               "SELECT s.sweep_id FROM sweeps s WHERE s.state = 'done' AND (s.summary IS NULL "
               "OR NOT EXISTS (SELECT 1 FROM sweep_facts f WHERE f.sweep_id = s.sweep_id)) "
               "ORDER BY s.sweep_id LIMIT $1",
               std::max(0, max))) {
        ids.push_back(row[0].as<int64_t>());
      }
    }
    int kept = 0;
    for (int64_t id : ids) {
      pqxx::work w(*impl_->conn);
      // Several schedulers on one database each run this: the one holding the sweep's lock
      // keeps its answers; the others skip it instead of racing it to the same rows.
      if (!w.exec_params("SELECT pg_try_advisory_xact_lock(736215002, $1::int)", id)[0][0]
               .as<bool>()) {
        continue;
      }
      ++kept;
      MaterializeSweep(w, id);   // the query answers (seconds for a full sweep)...
      auto p = Progress(w, id);  // ...then the counts, kept: the sweep's row is locked only now
      if (!p.ok()) return p.status();
      w.commit();
    }
    return kept;
  });
}

absl::StatusOr<pb::SweepProgress> Store::CancelSweep(int64_t sweep_id) {
  auto st = impl_->Run("CancelSweep", [&]() -> absl::Status {
    pqxx::work w(*impl_->conn);
    pqxx::result s =
        w.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1 FOR UPDATE", sweep_id);
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

absl::StatusOr<std::vector<pb::ResultRow>> Store::ListResults(int64_t sweep_id,
                                                              const std::string& after,
                                                              int limit) {
  return impl_->Run("ListResults", [&]() -> absl::StatusOr<std::vector<pb::ResultRow>> {
    pqxx::work w(*impl_->conn);
    const std::string state = SweepState(w, sweep_id);
    if (state.empty()) {
      return absl::NotFoundError("sweep_id: no sweep " + std::to_string(sweep_id));
    }
    if (state == "pruned") {
      return absl::FailedPreconditionError("sweep_id: sweep " + std::to_string(sweep_id) +
                                           " was pruned; its results are gone (GetSweep still "
                                           "gives its counts)");
    }
    pqxx::result rows = w.exec_params(R"(
      SELECT mr.model_id, m.task, m.arch, m.family, mr.opcov_ratio, mr.total_ms,
             (SELECT array_agg(r.mode || '=' || r.status) FROM results r
              WHERE r.sweep_id = $1 AND r.model_id = mr.model_id AND r.run = 1),
             -- A model is flaky when any of its regressed modes is; '' when none regressed
             -- (the aggregate still returns one row then, so count it).
             (SELECT CASE WHEN count(*) = 0 THEN ''
                          WHEN bool_or(g.confirmation = 'flaky') THEN 'flaky'
                          WHEN bool_or(g.confirmation = 'pending') THEN 'pending'
                          ELSE 'deterministic' END
              FROM regressions g
              WHERE g.sweep_id = $1 AND g.model_id = mr.model_id),
             -- mode -> perf, for the modes that have one (PerfJson's form).
             (SELECT jsonb_object_agg(r.mode, jsonb_build_object(
                       'device_us', r.perf_device_us, 'flops', r.perf_flops,
                       'bytes', r.perf_bytes, 'mfu', r.perf_mfu, 'launches', r.perf_launches,
                       'fallback_us', r.perf_fallback_us,
                       'transfer_bytes', r.perf_transfer_bytes,
                       'peak_device_bytes', r.perf_peak_bytes, 'top_ops', r.perf_top_ops,
                       'speedup', r.perf_speedup, 'compression', r.perf_compression))
              FROM results r
              WHERE r.sweep_id = $1 AND r.model_id = mr.model_id AND r.run = 1
                AND r.perf_device_us IS NOT NULL)
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
      if (!row[8].is_null()) {
        const auto perf = nlohmann::json::parse(row[8].c_str(), nullptr, false);
        if (perf.is_discarded() || !perf.is_object()) {
          return absl::DataLossError("results.perf_*: not an object of modes");
        }
        for (const auto& [mode, p] : perf.items()) {
          if (auto st = PerfFromJson(p, &(*r.mutable_perf())[mode]); !st.ok()) return st;
        }
      }
      out.push_back(std::move(r));
    }
    return out;
  });
}

}  // namespace ts::store
