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
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "proto/names.h"
#include "services/common/http_server.h"
#include "services/common/jitter.h"
#include "services/scheduler/scheduler.h"
#include "services/store/embedded_postgres.h"
#include "services/store/store.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace {

namespace pb = ::touchstone::v1;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// What a real worker sends for one model: three modes, ~28 ops, a 5-step loss curve.
pb::ModelResult BuildFakeResult(const pb::Job& j) {
  pb::ModelResult m;
  m.set_job_id(j.job_id());
  m.set_model_id(j.model_id());
  m.set_run(j.run());
  for (pb::Mode mode : ts::proto::AllModes()) {
    auto* v = m.add_modes();
    v->set_mode(mode);
    v->set_status(j.job_id() % 17 == 0 ? pb::VERDICT_FAIL_ACCURACY : pb::VERDICT_PASS);
    if (v->status() != pb::VERDICT_PASS) v->set_error("rmse_ratio 2.31 > 1.5 (device 0.0123 vs ref 0.0053)");
    v->set_ms(20.5);
    v->set_rmse_device(1e-4);
    v->set_rmse_reference(1e-4);
    v->set_rmse_ratio(1.0);
    v->set_cosine(0.99999);
    if (mode == pb::MODE_COMPILE) {
      v->set_graph_breaks(1);
      v->add_break_reasons("data-dependent op aten::nonzero");
      v->set_device_segments(2);
      v->set_compile_ms(120);
    }
    if (mode == pb::MODE_TRAIN) {
      for (int s = 0; s < 5; ++s) {
        v->add_loss_reference(6.2 - 0.1 * s);
        v->add_loss_device(6.2 - 0.1 * s);
      }
    }
  }
  for (int k = 0; k < 28; ++k) {
    auto* op = m.add_ops();
    op->set_op("aten::op_" + std::to_string(k));
    op->set_calls(12);
    op->set_ms(0.25);
    op->set_native(k % 9 != 0);
  }
  m.set_distinct_ops(28);
  m.set_native_ops(24);
  m.set_opcov_ratio(24.0 / 28);
  m.set_total_ms(70);
  return m;
}

// Built once per fake worker (passing and failing variants) and stamped with each job's ids, so
// the fake workers spend their CPU on the wire rather than on building strings.
pb::ModelResult FakeResult(const pb::Job& j) {
  thread_local pb::ModelResult pass_template, fail_template;
  thread_local bool ready = false;
  if (!ready) {
    pb::Job p, f;
    p.set_job_id(1);
    f.set_job_id(17);
    pass_template = BuildFakeResult(p);
    fail_template = BuildFakeResult(f);
    ready = true;
  }
  pb::ModelResult m = j.job_id() % 17 == 0 ? fail_template : pass_template;
  m.set_job_id(j.job_id());
  m.set_model_id(j.model_id());
  m.set_run(j.run());
  return m;
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

}  // namespace

int main(int argc, char** argv) {
  int workers = 64, models = 20000, shard = 32, db_threads = 4, lease_threads = 2, lease_batch = 8;
  bool finish_in_report = true, burst = false;
  int hold_first_ms = 0;
  bool reconnect = false;
  int schedulers = 1;
  double idle_s = 2;
  int long_poll_ms = 0;
  std::string db;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--workers" && i + 1 < argc) workers = std::atoi(argv[++i]);
    else if (a == "--models" && i + 1 < argc) models = std::atoi(argv[++i]);
    else if (a == "--shard" && i + 1 < argc) shard = std::atoi(argv[++i]);
    else if (a == "--db-threads" && i + 1 < argc) db_threads = std::atoi(argv[++i]);
    else if (a == "--lease-threads" && i + 1 < argc) lease_threads = std::atoi(argv[++i]);
    else if (a == "--lease-batch" && i + 1 < argc) lease_batch = std::atoi(argv[++i]);
    else if (a == "--separate-finish") finish_in_report = false;
    else if (a == "--db" && i + 1 < argc) db = argv[++i];
    else if (a == "--hold-first-ms" && i + 1 < argc) hold_first_ms = std::atoi(argv[++i]);
    else if (a == "--schedulers" && i + 1 < argc) schedulers = std::max(1, std::atoi(argv[++i]));
    else if (a == "--idle-s" && i + 1 < argc) idle_s = std::max(1.0, std::atof(argv[++i]));
    else if (a == "--long-poll-ms" && i + 1 < argc) long_poll_ms = std::clamp(std::atoi(argv[++i]), 0, 60000);
    else if (a == "--start" && i + 1 < argc && (std::string(argv[i + 1]) == "idle" ||
                                                std::string(argv[i + 1]) == "burst" ||
                                                std::string(argv[i + 1]) == "reconnect")) {
      const std::string m = argv[++i];
      burst = m != "idle";
      reconnect = m == "reconnect";
    }
    else {
      std::fprintf(stderr, "usage: scheduler_bench [--workers N] [--models N] [--shard N] "
                           "[--db-threads N] [--lease-threads N] [--separate-finish] "
                           "[--start idle|burst|reconnect] [--hold-first-ms N] [--schedulers N] "
                           "[--idle-s S] [--db URL] [--long-poll-ms N] [--lease-batch N]\n");
      return 2;
    }
  }
  std::unique_ptr<ts::store::EmbeddedPostgres> pg;
  std::string tmpdir;
  if (db.empty()) {
    char tmpl[] = "/tmp/ts-bench-pg-XXXXXX";
    if (!::mkdtemp(tmpl)) return 1;
    tmpdir = tmpl;
    ts::store::EmbeddedPostgresOptions po;
    po.data_dir = tmpdir + "/data";
    po.fast_unsafe = true;  // as the figures in bench/RESULTS.md were taken
    auto p = ts::store::EmbeddedPostgres::Start(po);
    if (!p.ok()) {
      std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
      return 1;
    }
    pg = std::move(*p);
    db = pg->url();
  }
  ts::scheduler::SchedulerOptions so;
  so.db_url = db;
  so.db_threads = db_threads;
  so.lease_threads = lease_threads;
  so.lease_batch = lease_batch;
  so.http_port = 0;  // read the server-side RPC histograms at the end
  std::vector<std::unique_ptr<ts::scheduler::Scheduler>> scheds;
  std::vector<std::string> targets;
  for (int i = 0; i < schedulers; ++i) {
    auto sc = ts::scheduler::Scheduler::Start(so);
    if (!sc.ok()) {
      std::fprintf(stderr, "%s\n", sc.status().ToString().c_str());
      return 1;
    }
    targets.push_back("127.0.0.1:" + std::to_string((*sc)->grpc_port()));
    scheds.push_back(std::move(*sc));
  }
  auto* sched = &scheds[0];  // the sweep's creation, progress polls and /metrics
  const std::string target = targets[0];
  grpc::ChannelArguments big;
  big.SetMaxSendMessageSize(64 << 20);
  auto admin = pb::Scheduler::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), big));
  Upsert(admin.get(), models, 0, "bench/m");
  pb::CreateSweepRequest cs;
  cs.set_name("bench");
  cs.mutable_profile()->set_name("bench");
  cs.mutable_profile()->set_body("{\"name\": \"bench\"}");
  cs.set_shard_max_models(shard);
  cs.set_shard_target_s(1e9);  // pack by count only
  pb::CreateSweepResponse created;
  auto create_sweep = [&]() -> bool {
    grpc::ClientContext ctx;
    auto t = Clock::now();
    grpc::Status st = admin->CreateSweep(&ctx, cs, &created);
    if (!st.ok()) {
      std::fprintf(stderr, "CreateSweep: %s\n", st.error_message().c_str());
      return false;
    }
    std::fprintf(stderr, "created sweep of %lld models in %lld shards in %.0f ms\n",
                 static_cast<long long>(created.models()), static_cast<long long>(created.shards()),
                 Ms(Clock::now() - t));
    return true;
  };
  if (burst && !create_sweep()) return 1;

  std::mutex mu;
  std::vector<double> lease_ms, later_lease_ms, report_ms, finish_ms;
  std::atomic<int64_t> results{0};
  std::vector<std::thread> threads;
  // Every fake worker registers first (and builds its result templates). Burst: the clock
  // starts when the last one has, and all of them ask for a shard at that instant. Idle: they
  // poll the empty queue; the clock starts once the sweep exists.
  std::vector<double> register_ms;
  std::atomic<bool> started{false};
  std::atomic<Clock::rep> create_at{0};  // when the sweep's creation began (long polls)
  std::atomic<int64_t> idle_calls{0};     // LeaseShard calls made before the sweep
  Clock::time_point t0;
  std::barrier registered(workers, [&]() noexcept {
    if (burst) {
      t0 = Clock::now();
      started = true;
    }
  });
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per fake worker
      auto stub = pb::Scheduler::NewStub(grpc::CreateCustomChannel(
          targets[w % schedulers], grpc::InsecureChannelCredentials(), args));
      pb::RegisterWorkerRequest reg;
      reg.set_name("fake-" + std::to_string(w));
      pb::RegisterWorkerResponse rr;
      bool ok = false;
      {
        grpc::ClientContext ctx;
        const auto a = Clock::now();
        ok = stub->RegisterWorker(&ctx, reg, &rr).ok();
        std::lock_guard<std::mutex> l(mu);
        register_ms.push_back(Ms(Clock::now() - a));
      }
      FakeResult(pb::Job());  // builds this worker's templates before the clock starts
      registered.arrive_and_wait();
      if (!ok) return;
      if (reconnect) {
        std::this_thread::sleep_for(
            std::chrono::duration<double>(ts::common::BackoffWithJitter(0, 0.1, 2.0)));
      }
      std::vector<double> my_lease, my_report, my_finish;
      for (;;) {
        pb::LeaseShardRequest lq;
        lq.set_worker_id(rr.worker_id());
        pb::LeaseShardResponse lease;
        const bool in_sweep = started;  // this call can find the sweep's shards
        const bool long_poll = long_poll_ms > 0 && !in_sweep;
        if (long_poll) lq.set_wait_ms(static_cast<uint32_t>(long_poll_ms));
        if (!in_sweep) ++idle_calls;
        auto a = Clock::now();
        grpc::ClientContext lctx;
        grpc::Status st = stub->LeaseShard(&lctx, lq, &lease);
        // A held call waited for the sweep: its latency counts from the sweep's creation.
        const auto from = long_poll ? std::max(a, Clock::time_point(Clock::duration(create_at.load())))
                                    : a;
        if (in_sweep || (st.ok() && lease.has_shard())) my_lease.push_back(Ms(Clock::now() - from));
        if (!st.ok()) continue;
        if (!lease.has_shard()) {
          if (in_sweep) break;  // the queue ran dry
          if (long_poll && lease.retry_after_ms() == 0) continue;  // the wait was the backoff
          std::this_thread::sleep_for(std::chrono::duration<double>(
              ts::common::Jittered(lease.retry_after_ms() / 1000.0, 0.5)));  // as touchstone-worker
          continue;
        }
        if (hold_first_ms > 0 && my_report.empty()) {  // this worker's first shard
          std::this_thread::sleep_for(std::chrono::milliseconds(hold_first_ms));
        }
        pb::ReportResultsRequest rep;
        rep.set_worker_id(rr.worker_id());
        rep.set_shard_id(lease.shard_id());
        rep.set_lease_token(lease.lease_token());
        for (const auto& j : lease.jobs()) *rep.add_results() = FakeResult(j);
        rep.set_finish(finish_in_report);
        pb::ReportResultsResponse rresp;
        a = Clock::now();
        grpc::ClientContext rctx;
        st = stub->ReportResults(&rctx, rep, &rresp);
        my_report.push_back(Ms(Clock::now() - a));
        if (st.ok()) results += rresp.accepted();
        if (finish_in_report) continue;
        pb::FinishShardRequest f;
        f.set_worker_id(rr.worker_id());
        f.set_shard_id(lease.shard_id());
        f.set_lease_token(lease.lease_token());
        pb::FinishShardResponse fr;
        a = Clock::now();
        grpc::ClientContext fctx;
        stub->FinishShard(&fctx, f, &fr);
        my_finish.push_back(Ms(Clock::now() - a));
      }
      std::lock_guard<std::mutex> l(mu);
      lease_ms.insert(lease_ms.end(), my_lease.begin(), my_lease.end());
      if (!my_lease.empty()) later_lease_ms.insert(later_lease_ms.end(), my_lease.begin() + 1, my_lease.end());
      report_ms.insert(report_ms.end(), my_report.begin(), my_report.end());
      finish_ms.insert(finish_ms.end(), my_finish.begin(), my_finish.end());
    });
  }
  double idle_statements_per_s = -1, idle_polls_per_s = -1, idle_calls_per_s = -1;
  if (!burst) {
    // Let every worker settle into its polling rhythm, measure what the idle fleet costs, then
    // create the sweep.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const int port = (*sched)->http_port();
    const double st0 = MetricValue(port, "touchstone_scheduler_lease_statements_total");
    const double idle0 = MetricValue(port, "touchstone_scheduler_lease_idle_answers_total");
    const int64_t calls0 = idle_calls.load();
    const auto a = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
    const double span = std::chrono::duration<double>(Clock::now() - a).count();
    idle_statements_per_s =
        (MetricValue(port, "touchstone_scheduler_lease_statements_total") - st0) / span;
    idle_calls_per_s = static_cast<double>(idle_calls.load() - calls0) / span;
    idle_polls_per_s =
        (MetricValue(port, "touchstone_scheduler_lease_idle_answers_total") - idle0) / span;
    create_at = Clock::now().time_since_epoch().count();
    if (!create_sweep()) return 1;
    t0 = Clock::now();
    started = true;
  }
  // A progress client (the sweep command's, a dashboard) polling GetSweep every 250 ms while
  // the sweep runs, then once more when it is done.
  std::vector<double> progress_ms;
  std::atomic<bool> all_joined{false};
  std::thread progress([&] {
    while (!all_joined) {
      pb::GetSweepRequest g;
      g.set_sweep_id(created.sweep_id());
      pb::SweepProgress p;
      grpc::ClientContext ctx;
      const auto a = Clock::now();
      if (admin->GetSweep(&ctx, g, &p).ok()) progress_ms.push_back(Ms(Clock::now() - a));
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  all_joined = true;
  progress.join();
  // The first call after the end takes the final counts from the tables (duplicate check
  // included) unless the scheduler's ticker got there first; later calls read them back.
  double final_progress_ms[2] = {-1, -1};
  for (double& ms : final_progress_ms) {
    pb::GetSweepRequest g;
    g.set_sweep_id(created.sweep_id());
    pb::SweepProgress p;
    grpc::ClientContext ctx;
    const auto a = Clock::now();
    if (admin->GetSweep(&ctx, g, &p).ok() && p.state() == "done") ms = Ms(Clock::now() - a);
  }

  // Raw ingest: one store connection, batches of 1000 results, no gRPC.
  ts::store::StoreOptions sto;
  sto.url = db;
  auto store = ts::store::Store::Connect(sto);
  if (!store.ok()) return 1;
  const int ingest_models = 10000;
  Upsert(admin.get(), ingest_models, 0, "bench/ingest");
  pb::CreateSweepRequest ci = cs;
  ci.set_shard_max_models(1000);
  for (int i = 0; i < ingest_models; ++i) ci.mutable_filter()->add_model_ids("bench/ingest" + std::to_string(i));
  pb::CreateSweepResponse ic;
  {
    grpc::ClientContext ctx;
    if (!admin->CreateSweep(&ctx, ci, &ic).ok()) return 1;
  }
  auto reg = (*store)->RegisterWorker([] {
    pb::RegisterWorkerRequest r;
    r.set_name("ingest");
    return r;
  }());
  int64_t rows = 0;
  double ingest_s = 0;
  for (;;) {
    auto l = (*store)->LeaseShard(reg->worker_id());
    if (!l.ok() || !l->has_shard()) break;
    pb::ReportResultsRequest rep;
    rep.set_worker_id(reg->worker_id());
    rep.set_shard_id(l->shard_id());
    rep.set_lease_token(l->lease_token());
    for (const auto& j : l->jobs()) *rep.add_results() = FakeResult(j);
    auto a = Clock::now();
    auto r = (*store)->ReportResults(rep);
    ingest_s += std::chrono::duration<double>(Clock::now() - a).count();
    if (r.ok()) rows += static_cast<int64_t>(r->accepted()) * 4;  // 3 mode rows + 1 model_runs row
    pb::FinishShardRequest f;
    f.set_worker_id(reg->worker_id());
    f.set_shard_id(l->shard_id());
    f.set_lease_token(l->lease_token());
    (void)(*store)->FinishShard(f);
  }
  // Retention: prune the throughput sweep (its 3 results rows and 1 model_runs row per model).
  double prune_s = -1;
  {
    ts::store::PruneRequest pr;
    pr.sweep_ids = {created.sweep_id()};
    const auto a = Clock::now();
    auto p = (*store)->PruneSweeps(pr);
    if (p.ok() && p->pruned.size() == 1) prune_s = std::chrono::duration<double>(Clock::now() - a).count();
    else std::fprintf(stderr, "prune: %s\n", p.ok() ? "nothing pruned" : p.status().ToString().c_str());
  }
  // Server-side LeaseShard latency (hand-off to the DB pool to the answer) from /metrics: the
  // smallest bucket bound holding 99% of the calls.
  std::string server_p99 = "n/a";
  if (auto m = ts::common::HttpGet((*sched)->http_port(), "/metrics"); m.ok()) {
    std::vector<std::pair<double, double>> buckets;  // le, cumulative count
    std::istringstream in(m->body);
    std::string line;
    const std::string key = "touchstone_scheduler_rpc_duration_seconds_bucket{code=\"OK\",method=\"LeaseShard\",le=\"";
    while (std::getline(in, line)) {
      if (line.rfind(key, 0) != 0) continue;
      const size_t q = line.find('"', key.size());
      const std::string le = line.substr(key.size(), q - key.size());
      const double count = std::stod(line.substr(line.rfind(' ') + 1));
      buckets.emplace_back(le == "+Inf" ? 1e9 : std::stod(le), count);
    }
    if (!buckets.empty()) {
      const double total = buckets.back().second;
      for (const auto& [le, c] : buckets) {
        if (c >= 0.99 * total) {
          server_p99 = le >= 1e9 ? std::string("above the largest bucket")
                                 : "<= " + std::to_string(static_cast<int>(le * 1000 + 0.5)) + " ms";
          break;
        }
      }
    }
  }
  for (auto& sc : scheds) sc->Shutdown();

  std::printf("| metric | value | target |\n|---|---|---|\n");
  std::printf("| fake workers / shard size / db + lease threads | %d / %d / %d + %d | 64 workers |\n",
              workers, shard, db_threads, lease_threads);
  std::printf("| schedulers on the database (LeaseShard p99 in the scheduler: the first's) | %d | |\n",
              schedulers);
  std::printf("| start | %s | |\n", reconnect ? "reconnect (first call after the worker's first retry backoff)"
                                   : burst ? "burst (every worker at the same instant)"
                                           : "idle (the fleet polling when the sweep is created)");
  if (hold_first_ms > 0) {
    std::printf("| first shard held before reporting | %d ms | |\n", hold_first_ms);
  }
  std::printf("| shard closed by | %s | |\n",
              finish_in_report ? "the last ReportResults (finish=true)" : "a separate FinishShard");
  if (idle_statements_per_s >= 0) {
    std::printf("| idle fleet (%.0f s before the sweep): **leasing statements/s** (first scheduler) "
                "| **%.1f** (%.0f LeaseShard calls/s, %.0f answered 'nothing' from memory) | <= 100 |\n",
                idle_s, idle_statements_per_s, idle_calls_per_s, idle_polls_per_s);
  }
  std::printf("| model results stored | %lld in %.2f s | |\n", static_cast<long long>(results.load()),
              secs);
  std::printf("| **throughput** | **%.0f model results/s** | >= 10,000 |\n", results / secs);
  std::printf("| LeaseShard p50 / p99 | %.2f / **%.2f ms** | p99 <= 20 ms |\n",
              Percentile(lease_ms, 0.5), Percentile(lease_ms, 0.99));
  std::printf("| LeaseShard p50 / p99 after each worker's first lease (without the start) | %.2f / %.2f ms | |\n",
              Percentile(later_lease_ms, 0.5), Percentile(later_lease_ms, 0.99));
  std::printf("| RegisterWorker p50 / p99 (before the clock starts) | %.2f / %.2f ms | |\n",
              Percentile(register_ms, 0.5), Percentile(register_ms, 0.99));
  std::printf("| LeaseShard p99 in the scheduler (pool hand-off to answer, histogram bucket) | %s | |\n",
              server_p99.c_str());
  std::printf("| ReportResults p50 / p99 | %.2f / %.2f ms | |\n",
              Percentile(report_ms, 0.5), Percentile(report_ms, 0.99));
  if (!finish_ms.empty()) {
    std::printf("| FinishShard p50 / p99 | %.2f / %.2f ms | |\n", Percentile(finish_ms, 0.5),
                Percentile(finish_ms, 0.99));
  }
  std::printf("| GetSweep every 250 ms while it runs: calls, p50 / max | %zu, %.1f / %.1f ms | |\n",
              progress_ms.size(), Percentile(progress_ms, 0.5),
              progress_ms.empty() ? 0.0 : *std::max_element(progress_ms.begin(), progress_ms.end()));
  std::printf("| GetSweep of the finished sweep: first call (final counts and duplicate check, "
              "unless the ticker took them) / next | %.1f / %.1f ms | |\n",
              final_progress_ms[0], final_progress_ms[1]);
  std::printf("| **ingest** (one connection, 1000-result COPY batches) | **%.0f rows/s** (%lld rows in %.2f s) | >= 20,000 |\n",
              rows / ingest_s, static_cast<long long>(rows), ingest_s);
  std::printf("| prune of the throughput sweep (%lld models: tombstone, rows, 2 partitions) | %.2f s | |\n",
              static_cast<long long>(created.models()), prune_s);
  pg.reset();
  std::error_code ec;
  if (!tmpdir.empty()) std::filesystem::remove_all(tmpdir, ec);
  return 0;
}
