// Scheduler throughput with fake workers (DESIGN.md §8): W worker threads, each with its own
// gRPC channel to an in-process scheduler over loopback, lease a shard, report a realistic
// result per model (3 modes, op list, loss curve) in one batch, finish, repeat. Also the store's
// raw ingest rate (rows/s through ReportResults' COPY path) without gRPC, and the time to prune
// the throughput sweep (Store::PruneSweeps).
//
//   build/bench/scheduler_bench [--workers 64] [--models 20000] [--shard 32] [--db-threads 4]
//                               [--lease-threads 2] [--separate-finish] [--start idle|burst]
//                               [--hold-first-ms N] [--schedulers N] [--idle-s S] [--db URL]
//                               [--long-poll-ms N] [--lease-batch 8]
//                               (default: a private PostgreSQL under /tmp)
//
// --schedulers N: N schedulers on the one database (issue 13), fake worker w on scheduler
// w % N; the sweep is created through the first. Lease latencies are the clients', across all.
//
// --start idle (default): the fleet is up and polling an empty queue, as touchstone-worker does
// (LeaseShard, then sleep retry_after_ms +-50%, common::Jittered), when the sweep is created:
// the nightly case. The fake workers all start polling at the same instant; like
// touchstone-workers started together, the jitter takes them out of phase within a few polls.
// --start burst: the sweep exists and every worker asks for its first shard at the same
// instant: the worst case for the lease tail.
// --start reconnect: the sweep exists and the whole fleet has just lost the scheduler (a
// restart): each worker's first call waits touchstone-worker's first retry backoff
// (common::BackoffWithJitter(0, 0.1, 2.0): 50-100 ms), as a real one would.
// Either way the clock starts with the sweep's first lease opportunity, and the lease
// latencies counted are those of calls made after it.
// --idle-s S (idle start): how long the fleet polls the empty queue before the sweep is created
// (default 2); the leasing statements the first scheduler ran over that time, per second, are
// the idle cost (issue 14: <= 100/s for 1,000 idle workers).
// --long-poll-ms N (idle start): the idle fleet long-polls as touchstone-worker does (LeaseShard
// with wait_ms N, asked again at once when it ends); a call held when the sweep is created is
// timed from the creation. Workers left without a shard then wait out their poll before they
// see the queue dry, so the sweep's time includes up to N ms of tail.
// --hold-first-ms N: each fake worker waits N ms after its first lease before reporting it, as
// a real worker does while it runs the shard's first models (seconds); every later shard is
// still reported at once. It separates the burst's own cost from that of the first reports.
//
// Prints Markdown for bench/RESULTS.md.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench/fake_fleet.h"
#include "services/common/flags.h"
#include "services/common/http_server.h"
#include "services/scheduler/scheduler.h"
#include "services/store/embedded_postgres.h"
#include "services/store/store.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace {

namespace pb = ::touchstone::v1;
using ts::bench::Clock;
using ts::bench::FakeResult;
using ts::bench::FakeWorker;
using ts::bench::FleetOptions;
using ts::bench::FleetRun;
using ts::bench::Ms;
using ts::bench::Registered;
using ts::bench::StartClock;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void Upsert(pb::Scheduler::Stub* stub, int models, int offset, const std::string& prefix) {
  for (int base = 0; base < models; base += 2000) {
    pb::UpsertModelsRequest up;
    for (int i = base; i < std::min(models, base + 2000); ++i) {
      auto* m = up.add_models();
      m->set_id(prefix + std::to_string(offset + i));
      m->set_task(i % 3 ? "text-generation" : "text-classification");
      m->set_arch(i % 3 ? "LlamaForCausalLM" : "BertForSequenceClassification");
      m->set_family(i % 3 ? "llama" : "bert");
      m->set_config_json(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32})");
    }
    grpc::ClientContext ctx;
    pb::UpsertModelsResponse r;
    grpc::Status st = stub->UpsertModels(&ctx, up, &r);
    if (!st.ok()) {
      std::fprintf(stderr, "UpsertModels: %s\n", st.error_message().c_str());
      std::exit(1);
    }
  }
}

// An unlabelled counter or gauge from a scheduler's /metrics; -1 when absent.
double MetricValue(int http_port, const std::string& name) {
  auto m = ts::common::HttpGet(http_port, "/metrics");
  if (!m.ok()) return -1;
  const std::string key = "\n" + name + " ";
  const size_t at = m->body.find(key);
  if (at == std::string::npos) return -1;
  return std::stod(m->body.substr(at + key.size()));
}

struct BenchArgs {
  int workers = 64, models = 20000, shard = 32, db_threads = 4, lease_threads = 2, lease_batch = 8;
  bool separate_finish = false;
  std::string start = "idle";  // idle | burst | reconnect
  int hold_first_ms = 0;
  int schedulers = 1;
  double idle_s = 2;
  int long_poll_ms = 0;
  std::string db;
  bool burst() const { return start != "idle"; }
  bool reconnect() const { return start == "reconnect"; }
};

// Declares the flags and parses them: nullopt when the arguments are good, else the exit code
// (the help or the error printed).
std::optional<int> Parse(int argc, char** argv, BenchArgs& a) {
  ts::flags::Program p("scheduler_bench",
                       "scheduler throughput with fake workers over loopback gRPC, the store's "
                       "raw ingest rate and the prune of the throughput sweep");
  p.Option("--workers", &a.workers, "N", "fake workers, one gRPC channel each").Min(1);
  p.Option("--models", &a.models, "N", "models in the sweep").Min(1);
  p.Option("--shard", &a.shard, "N", "models per shard").Min(1);
  p.Option("--db-threads", &a.db_threads, "N", "the scheduler's database threads").Min(1);
  p.Option("--lease-threads", &a.lease_threads, "N", "the scheduler's lease threads").Min(1);
  p.Option("--lease-batch", &a.lease_batch, "N", "the scheduler's lease batch").Min(1);
  p.Flag("--separate-finish", &a.separate_finish,
         "close each shard with FinishShard, not the last ReportResults");
  p.Option("--start", &a.start, "idle|burst|reconnect", "how the fleet meets the sweep")
      .Choices({"idle", "burst", "reconnect"});
  p.Option("--hold-first-ms", &a.hold_first_ms, "N",
           "each worker holds its first shard this long before reporting")
      .Min(0);
  p.Option("--schedulers", &a.schedulers, "N", "schedulers on the one database").Min(1);
  p.Option("--idle-s", &a.idle_s, "S", "(idle start) the fleet polls this long first").Min(1);
  p.Option("--long-poll-ms", &a.long_poll_ms, "N", "(idle start) the idle fleet long-polls")
      .Range(0, 60000);
  p.Option("--db", &a.db, "URL", "an existing database (default: a private PostgreSQL in /tmp)");
  return p.Parse(argc, argv);
}

bool CreateSweep(pb::Scheduler::Stub& admin, const pb::CreateSweepRequest& cs,
                 pb::CreateSweepResponse* created) {
  grpc::ClientContext ctx;
  const auto t = Clock::now();
  grpc::Status st = admin.CreateSweep(&ctx, cs, created);
  if (!st.ok()) {
    std::fprintf(stderr, "CreateSweep: %s\n", st.error_message().c_str());
    return false;
  }
  std::fprintf(stderr, "created sweep of %lld models in %lld shards in %.0f ms\n",
               static_cast<long long>(created->models()), static_cast<long long>(created->shards()),
               Ms(Clock::now() - t));
  return true;
}

// What the idle fleet costs the first scheduler, per second (issue 14).
struct IdleCost {
  double statements_per_s = -1, polls_per_s = -1, calls_per_s = -1;
};

// Lets every worker settle into its polling rhythm, then measures the idle fleet for idle_s.
IdleCost MeasureIdle(const BenchArgs& a, int http_port, FleetRun& run) {
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double st0 = MetricValue(http_port, "touchstone_scheduler_lease_statements_total");
  const double idle0 = MetricValue(http_port, "touchstone_scheduler_lease_idle_answers_total");
  const int64_t calls0 = run.idle_calls.load();
  const auto t = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(a.idle_s));
  const double span = std::chrono::duration<double>(Clock::now() - t).count();
  IdleCost c;
  c.statements_per_s =
      (MetricValue(http_port, "touchstone_scheduler_lease_statements_total") - st0) / span;
  c.calls_per_s = static_cast<double>(run.idle_calls.load() - calls0) / span;
  c.polls_per_s =
      (MetricValue(http_port, "touchstone_scheduler_lease_idle_answers_total") - idle0) / span;
  return c;
}

// One GetSweep's latency in ms; -1 when it failed or (with `done`) the sweep is not done.
double TimeGetSweep(pb::Scheduler::Stub& admin, int64_t sweep_id, bool done = false) {
  pb::GetSweepRequest g;
  g.set_sweep_id(sweep_id);
  pb::SweepProgress p;
  grpc::ClientContext ctx;
  const auto t = Clock::now();
  if (!admin.GetSweep(&ctx, g, &p).ok() || (done && p.state() != "done")) return -1;
  return Ms(Clock::now() - t);
}

// The store's raw ingest rate: one connection, batches of 1000 results, no gRPC.
struct Ingest {
  int64_t rows = 0;
  double seconds = 0;
};

absl::StatusOr<Ingest> RawIngest(ts::store::Store& store, pb::Scheduler::Stub& admin,
                                 pb::CreateSweepRequest ci) {
  const int ingest_models = 10000;
  Upsert(&admin, ingest_models, 0, "bench/ingest");
  ci.set_shard_max_models(1000);
  for (int i = 0; i < ingest_models; ++i) {
    ci.mutable_filter()->add_model_ids("bench/ingest" + std::to_string(i));
  }
  pb::CreateSweepResponse ic;
  {
    grpc::ClientContext ctx;
    if (grpc::Status st = admin.CreateSweep(&ctx, ci, &ic); !st.ok()) {
      return absl::InternalError("CreateSweep: " + st.error_message());
    }
  }
  pb::RegisterWorkerRequest r;
  r.set_name("ingest");
  auto reg = store.RegisterWorker(r);
  if (!reg.ok()) return reg.status();
  Ingest out;
  for (;;) {
    auto l = store.LeaseShard(reg->worker_id());
    if (!l.ok() || !l->has_shard()) break;
    pb::ReportResultsRequest rep;
    rep.set_worker_id(reg->worker_id());
    rep.set_shard_id(l->shard_id());
    rep.set_lease_token(l->lease_token());
    for (const auto& j : l->jobs()) *rep.add_results() = FakeResult(j);
    const auto t = Clock::now();
    auto rr = store.ReportResults(rep);
    out.seconds += std::chrono::duration<double>(Clock::now() - t).count();
    if (rr.ok()) out.rows += static_cast<int64_t>(rr->accepted()) * 4;  // 3 modes + model_runs
    pb::FinishShardRequest f;
    f.set_worker_id(reg->worker_id());
    f.set_shard_id(l->shard_id());
    f.set_lease_token(l->lease_token());
    (void)store.FinishShard(f);
  }
  return out;
}

// Retention: the seconds to prune the throughput sweep (its 3 results rows and 1 model_runs row
// per model); -1 when nothing was pruned.
double PruneSweep(ts::store::Store& store, int64_t sweep_id) {
  ts::store::PruneRequest pr;
  pr.sweep_ids = {sweep_id};
  const auto t = Clock::now();
  auto p = store.PruneSweeps(pr);
  if (p.ok() && p->pruned.size() == 1)
    return std::chrono::duration<double>(Clock::now() - t).count();
  std::fprintf(stderr, "prune: %s\n", p.ok() ? "nothing pruned" : p.status().ToString().c_str());
  return -1;
}

// Server-side LeaseShard latency (hand-off to the DB pool to the answer) from /metrics: the
// smallest bucket bound holding 99% of the calls.
std::string ServerLeaseP99(int http_port) {
  auto m = ts::common::HttpGet(http_port, "/metrics");
  if (!m.ok()) return "n/a";
  std::vector<std::pair<double, double>> buckets;  // le, cumulative count
  std::istringstream in(m->body);
  std::string line;
  const std::string key =
      "touchstone_scheduler_rpc_duration_seconds_bucket{code=\"OK\",method=\"LeaseShard\",le=\"";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t q = line.find('"', key.size());
    const std::string le = line.substr(key.size(), q - key.size());
    const double count = std::stod(line.substr(line.rfind(' ') + 1));
    buckets.emplace_back(le == "+Inf" ? 1e9 : std::stod(le), count);
  }
  if (buckets.empty()) return "n/a";
  const double total = buckets.back().second;
  for (const auto& [le, c] : buckets) {
    if (c < 0.99 * total) continue;
    return le >= 1e9 ? std::string("above the largest bucket")
                     : "<= " + std::to_string(static_cast<int>(le * 1000 + 0.5)) + " ms";
  }
  return "n/a";
}

// Everything the table prints.
struct Figures {
  double secs = 0;  // the sweep, from its first lease opportunity to the last worker's end
  IdleCost idle;
  std::vector<double> progress_ms;  // GetSweep every 250 ms while it ran
  double final_progress_ms[2] = {-1, -1};
  Ingest ingest;
  double prune_s = -1;
  std::string server_p99 = "n/a";
  int64_t sweep_models = 0;
};

void PrintTable(const BenchArgs& a, const FleetRun& run, const Figures& f) {
  std::printf("| metric | value | target |\n|---|---|---|\n");
  std::printf(
      "| fake workers / shard size / db + lease threads | %d / %d / %d + %d | 64 workers |\n",
      a.workers, a.shard, a.db_threads, a.lease_threads);
  std::printf(
      "| schedulers on the database (LeaseShard p99 in the scheduler: the first's) | %d | |\n",
      a.schedulers);
  std::printf("| start | %s | |\n",
              a.reconnect() ? "reconnect (first call after the worker's first retry backoff)"
              : a.burst()   ? "burst (every worker at the same instant)"
                            : "idle (the fleet polling when the sweep is created)");
  if (a.hold_first_ms > 0) {
    std::printf("| first shard held before reporting | %d ms | |\n", a.hold_first_ms);
  }
  std::printf("| shard closed by | %s | |\n", !a.separate_finish
                                                  ? "the last ReportResults (finish=true)"
                                                  : "a separate FinishShard");
  if (f.idle.statements_per_s >= 0) {
    std::printf(
        "| idle fleet (%.0f s before the sweep): **leasing statements/s** (first scheduler) "
        "| **%.1f** (%.0f LeaseShard calls/s, %.0f answered 'nothing' from memory) | <= 100 |\n",
        a.idle_s, f.idle.statements_per_s, f.idle.calls_per_s, f.idle.polls_per_s);
  }
  std::printf("| model results stored | %lld in %.2f s | |\n",
              static_cast<long long>(run.results.load()), f.secs);
  std::printf("| **throughput** | **%.0f model results/s** | >= 10,000 |\n",
              static_cast<double>(run.results.load()) / f.secs);
  std::printf("| LeaseShard p50 / p99 | %.2f / **%.2f ms** | p99 <= 20 ms |\n",
              Percentile(run.lease_ms, 0.5), Percentile(run.lease_ms, 0.99));
  std::printf(
      "| LeaseShard p50 / p99 after each worker's first lease (without the start) | %.2f / %.2f ms "
      "| |\n",
      Percentile(run.later_lease_ms, 0.5), Percentile(run.later_lease_ms, 0.99));
  std::printf("| RegisterWorker p50 / p99 (before the clock starts) | %.2f / %.2f ms | |\n",
              Percentile(run.register_ms, 0.5), Percentile(run.register_ms, 0.99));
  std::printf(
      "| LeaseShard p99 in the scheduler (pool hand-off to answer, histogram bucket) | %s | |\n",
      f.server_p99.c_str());
  std::printf("| ReportResults p50 / p99 | %.2f / %.2f ms | |\n", Percentile(run.report_ms, 0.5),
              Percentile(run.report_ms, 0.99));
  if (!run.finish_ms.empty()) {
    std::printf("| FinishShard p50 / p99 | %.2f / %.2f ms | |\n", Percentile(run.finish_ms, 0.5),
                Percentile(run.finish_ms, 0.99));
  }
  std::printf(
      "| GetSweep every 250 ms while it runs: calls, p50 / max | %zu, %.1f / %.1f ms | |\n",
      f.progress_ms.size(), Percentile(f.progress_ms, 0.5),
      f.progress_ms.empty() ? 0.0 : *std::max_element(f.progress_ms.begin(), f.progress_ms.end()));
  std::printf(
      "| GetSweep of the finished sweep: first call (final counts and duplicate check, "
      "unless the ticker took them) / next | %.1f / %.1f ms | |\n",
      f.final_progress_ms[0], f.final_progress_ms[1]);
  std::printf(
      "| **ingest** (one connection, 1000-result COPY batches) | **%.0f rows/s** (%lld rows in "
      "%.2f s) | >= 20,000 |\n",
      static_cast<double>(f.ingest.rows) / f.ingest.seconds, static_cast<long long>(f.ingest.rows),
      f.ingest.seconds);
  std::printf(
      "| prune of the throughput sweep (%lld models: tombstone, rows, 2 partitions) | %.2f s | |\n",
      static_cast<long long>(f.sweep_models), f.prune_s);
}

// A private PostgreSQL under /tmp (as the figures in bench/RESULTS.md were taken: no fsync).
absl::StatusOr<std::unique_ptr<ts::store::EmbeddedPostgres>> PrivateDatabase(std::string* tmpdir) {
  char tmpl[] = "/tmp/ts-bench-pg-XXXXXX";
  if (!::mkdtemp(tmpl)) return absl::InternalError("mkdtemp failed");
  *tmpdir = tmpl;
  ts::store::EmbeddedPostgresOptions po;
  po.data_dir = *tmpdir + "/data";
  po.fast_unsafe = true;
  return ts::store::EmbeddedPostgres::Start(po);
}

// The fleet against the sweep: threads started, the idle cost measured (idle start), the sweep
// created, followed by a progress client until every worker is done. False when the sweep could
// not be created.
bool RunFleet(const BenchArgs& a, const std::vector<std::string>& targets, int http_port,
              pb::Scheduler::Stub& admin, const pb::CreateSweepRequest& cs,
              pb::CreateSweepResponse* created, FleetRun& run, Figures& f) {
  if (a.burst() && !CreateSweep(admin, cs, created)) return false;
  // Every fake worker registers first (and builds its result templates). Burst: the clock
  // starts when the last one has, and all of them ask for a shard at that instant. Idle: they
  // poll the empty queue; the clock starts once the sweep exists.
  Registered registered(a.workers, StartClock{&run, a.burst()});
  const FleetOptions fleet{a.long_poll_ms, a.separate_finish, a.hold_first_ms, a.reconnect()};
  std::vector<std::thread> threads;
  for (int w = 0; w < a.workers; ++w) {
    threads.emplace_back(
        [&, w] { FakeWorker(fleet, targets[w % a.schedulers], w, registered, run); });
  }
  if (!a.burst()) {
    f.idle = MeasureIdle(a, http_port, run);
    run.create_at = Clock::now().time_since_epoch().count();
    if (!CreateSweep(admin, cs, created)) std::exit(1);  // the fleet would poll for ever
    run.t0 = Clock::now();
    run.started = true;
  }
  // A progress client (the sweep command's, a dashboard) polling GetSweep every 250 ms while
  // the sweep runs, then once more when it is done.
  std::atomic<bool> all_joined{false};
  std::thread progress([&] {
    while (!all_joined) {
      if (double ms = TimeGetSweep(admin, created->sweep_id()); ms >= 0)
        f.progress_ms.push_back(ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  for (auto& t : threads) t.join();
  f.secs = std::chrono::duration<double>(Clock::now() - run.t0).count();
  all_joined = true;
  progress.join();
  // The first call after the end takes the final counts from the tables (duplicate check
  // included) unless the scheduler's ticker got there first; later calls read them back.
  for (double& ms : f.final_progress_ms) ms = TimeGetSweep(admin, created->sweep_id(), true);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  BenchArgs a;
  if (auto rc = Parse(argc, argv, a)) return *rc;
  std::unique_ptr<ts::store::EmbeddedPostgres> pg;
  std::string tmpdir;
  if (a.db.empty()) {
    auto p = PrivateDatabase(&tmpdir);
    if (!p.ok()) {
      std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
      return 1;
    }
    pg = std::move(*p);
    a.db = pg->url();
  }
  ts::scheduler::SchedulerOptions so;
  so.db_url = a.db;
  so.db_threads = a.db_threads;
  so.lease_threads = a.lease_threads;
  so.lease_batch = a.lease_batch;
  so.http_port = 0;  // read the server-side RPC histograms at the end
  std::vector<std::unique_ptr<ts::scheduler::Scheduler>> scheds;
  std::vector<std::string> targets;
  for (int i = 0; i < a.schedulers; ++i) {
    auto sc = ts::scheduler::Scheduler::Start(so);
    if (!sc.ok()) {
      std::fprintf(stderr, "%s\n", sc.status().ToString().c_str());
      return 1;
    }
    targets.push_back("127.0.0.1:" + std::to_string((*sc)->grpc_port()));
    scheds.push_back(std::move(*sc));
  }
  const int http_port = scheds[0]->http_port();  // the sweep's creation, progress and /metrics
  grpc::ChannelArguments big;
  big.SetMaxSendMessageSize(64 << 20);
  auto admin = pb::Scheduler::NewStub(
      grpc::CreateCustomChannel(targets[0], grpc::InsecureChannelCredentials(), big));
  Upsert(admin.get(), a.models, 0, "bench/m");
  pb::CreateSweepRequest cs;
  cs.set_name("bench");
  cs.mutable_profile()->set_name("bench");
  cs.mutable_profile()->set_body("{\"name\": \"bench\"}");
  cs.set_shard_max_models(a.shard);
  cs.set_shard_target_s(1e9);  // pack by count only
  pb::CreateSweepResponse created;
  FleetRun run;
  Figures f;
  if (!RunFleet(a, targets, http_port, *admin, cs, &created, run, f)) return 1;
  f.sweep_models = created.models();

  ts::store::StoreOptions sto;
  sto.url = a.db;
  auto store = ts::store::Store::Connect(sto);
  if (!store.ok()) return 1;
  auto ingest = RawIngest(**store, *admin, cs);
  if (!ingest.ok()) {
    std::fprintf(stderr, "%s\n", ingest.status().ToString().c_str());
    return 1;
  }
  f.ingest = *ingest;
  f.prune_s = PruneSweep(**store, created.sweep_id());
  f.server_p99 = ServerLeaseP99(http_port);
  for (auto& sc : scheds) sc->Shutdown();
  PrintTable(a, run, f);
  pg.reset();
  std::error_code ec;
  if (!tmpdir.empty()) std::filesystem::remove_all(tmpdir, ec);
  return 0;
}
