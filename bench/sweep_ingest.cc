// Sweep ingest through the store, as workers would report: see the header.
#include "bench/sweep_ingest.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "services/store/store.h"

namespace ts::bench {

namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

absl::StatusOr<std::unique_ptr<store::Store>> Connect(const std::string& url) {
  store::StoreOptions so;
  so.url = url;
  return store::Store::Connect(so);
}

// What the reporting threads share.
struct Tally {
  std::mutex mu;
  absl::Status error;
  int64_t models = 0, reruns = 0, reports = 0;
  std::vector<double> report_ms;
};

// One fake worker: lease, report the shard's records with finish, until the queue is empty.
void ReportUntilEmpty(store::Store& st, int64_t worker_id, const RecordGenerator& gen,
                      int64_t records_as, Tally& t) {
  std::vector<double> my_ms;
  int64_t models = 0, reruns = 0;
  absl::Status error;
  for (;;) {
    auto lease = st.LeaseShard(worker_id);
    if (!lease.ok()) {
      error = lease.status();
      break;
    }
    if (!lease->has_shard()) break;
    pb::ReportResultsRequest rep;
    rep.set_worker_id(worker_id);
    rep.set_shard_id(lease->shard_id());
    rep.set_lease_token(lease->lease_token());
    rep.set_finish(true);
    for (const pb::Job& j : lease->jobs()) {
      const CatalogEntry* e = gen.Find(j.model_id());
      if (e == nullptr) {
        error = absl::FailedPreconditionError("job " + std::to_string(j.job_id()) + ": model '" +
                                              j.model_id() + "' is not in --catalog");
        break;
      }
      pb::ModelResult r = gen.Make(*e, records_as, j.run());
      r.set_job_id(j.job_id());
      *rep.add_results() = std::move(r);
      (j.run() == 1 ? models : reruns) += 1;
    }
    if (!error.ok()) break;
    const auto a = Clock::now();
    auto done = st.ReportResults(rep);
    my_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
    if (!done.ok()) {
      error = done.status();
      break;
    }
  }
  std::lock_guard<std::mutex> l(t.mu);
  if (t.error.ok()) t.error = error;
  t.models += models;
  t.reruns += reruns;
  t.reports += static_cast<int64_t>(my_ms.size());
  t.report_ms.insert(t.report_ms.end(), my_ms.begin(), my_ms.end());
}

// Runs `connections` fake workers until the queue is empty, then one more pass for shards that
// the last reports queued (confirmation reruns) after another worker had found it empty.
absl::Status Drain(const IngestOptions& opts, const RecordGenerator& gen, int64_t sweep_id,
                   Tally& t) {
  const int64_t records_as = opts.records_as_sweep > 0 ? opts.records_as_sweep : sweep_id;
  std::vector<std::unique_ptr<store::Store>> stores;
  std::vector<int64_t> workers;
  for (int i = 0; i < std::max(1, opts.connections); ++i) {
    auto st = Connect(opts.db_url);
    if (!st.ok()) return st.status();
    pb::RegisterWorkerRequest reg;
    reg.set_name("query-bench-ingest-" + std::to_string(i));
    auto w = (*st)->RegisterWorker(reg);
    if (!w.ok()) return w.status();
    workers.push_back(w->worker_id());
    stores.push_back(std::move(*st));
  }
  std::vector<std::thread> threads;
  for (size_t i = 0; i < stores.size(); ++i) {
    threads.emplace_back([&, i] { ReportUntilEmpty(*stores[i], workers[i], gen, records_as, t); });
  }
  for (auto& th : threads) th.join();
  if (!t.error.ok()) return t.error;
  ReportUntilEmpty(*stores[0], workers[0], gen, records_as, t);
  return t.error;
}

// The ticker's steps, then the checks that the sweep ended as a real one does.
absl::StatusOr<IngestStats> Settle(const std::string& url, int64_t sweep_id, const Tally& t,
                                   Clock::time_point t0) {
  auto st = Connect(url);
  if (!st.ok()) return st.status();
  if (auto e = (*st)->ExpireLeases(); !e.ok()) return e.status();
  // A scheduler's ticker may be summarizing the same sweep at this moment (query_bench runs
  // one): its insert wins and ours fails ALREADY_EXISTS once it has committed; then look again.
  absl::StatusOr<int> summarized = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    summarized = (*st)->SummarizeDoneSweeps(1000);
    if (summarized.ok() || summarized.status().code() != absl::StatusCode::kAlreadyExists) break;
  }
  if (!summarized.ok()) return summarized.status();
  auto p = (*st)->GetSweep(sweep_id);
  if (!p.ok()) return p.status();
  IngestStats out;
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string id = "sweep " + std::to_string(sweep_id);
  if (p->state() != "done") {
    return absl::FailedPreconditionError(id + " is '" + p->state() + "' after the ingest");
  }
  if (p->models_recorded() != p->models_expected() || p->duplicates() != 0) {
    return absl::FailedPreconditionError(id + ": " + std::to_string(p->models_recorded()) + " of " +
                                         std::to_string(p->models_expected()) +
                                         " models recorded, " + std::to_string(p->duplicates()) +
                                         " duplicates");
  }
  out.sweep_id = sweep_id;
  out.models = t.models;
  out.reruns = t.reruns;
  out.reports = t.reports;
  out.report_p50_ms = Percentile(t.report_ms, 0.5);
  out.report_p99_ms = Percentile(t.report_ms, 0.99);
  out.deterministic = p->confirmed_deterministic();
  out.flaky = p->confirmed_flaky();
  return out;
}

}  // namespace

absl::StatusOr<int64_t> UpsertCatalog(const std::string& db_url,
                                      const std::vector<CatalogEntry>& catalog) {
  auto st = Connect(db_url);
  if (!st.ok()) return st.status();
  int64_t n = 0;
  for (size_t base = 0; base < catalog.size(); base += 5000) {
    pb::UpsertModelsRequest up;
    for (size_t i = base; i < std::min(catalog.size(), base + 5000); ++i) {
      *up.add_models() = catalog[i].model;
    }
    auto r = (*st)->UpsertModels(up);
    if (!r.ok()) return r.status();
    n += r->inserted() + r->updated();
  }
  return n;
}

absl::StatusOr<IngestStats> IngestSweep(const IngestOptions& opts,
                                        const pb::CreateSweepRequest& req,
                                        const RecordGenerator& gen) {
  auto st = Connect(opts.db_url);
  if (!st.ok()) return st.status();
  auto created = (*st)->CreateSweep(req);
  if (!created.ok()) return created.status();
  const auto t0 = Clock::now();
  Tally t;
  if (auto s = Drain(opts, gen, created->sweep_id(), t); !s.ok()) return s;
  return Settle(opts.db_url, created->sweep_id(), t, t0);
}

absl::StatusOr<IngestStats> ResumeSweep(const IngestOptions& opts, int64_t sweep_id,
                                        const RecordGenerator& gen) {
  auto st = Connect(opts.db_url);
  if (!st.ok()) return st.status();
  const auto t0 = Clock::now();
  // The interrupted fill's leases run out within the lease TTL (30 s); expiry requeues them.
  for (int i = 0; i < 40; ++i) {
    if (auto e = (*st)->ExpireLeases(); !e.ok()) return e.status();
    auto p = (*st)->GetSweep(sweep_id);
    if (!p.ok()) return p.status();
    if (p->shards_leased() == 0) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  Tally t;
  if (auto s = Drain(opts, gen, sweep_id, t); !s.ok()) return s;
  return Settle(opts.db_url, sweep_id, t, t0);
}

}  // namespace ts::bench
