#include "services/worker/worker.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "proto/names.h"
#include "services/common/field_limits.h"
#include "services/common/grpc_status.h"
#include "services/common/http_server.h"
#include "services/common/jitter.h"
#include "services/common/metrics.h"
#include "services/common/random.h"
#include "services/common/tls.h"
#include "services/worker/runner_client.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::worker {
namespace {

namespace pb = ::touchstone::v1;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool Retryable(grpc::StatusCode c) {
  return c == grpc::StatusCode::UNAVAILABLE || c == grpc::StatusCode::DEADLINE_EXCEEDED ||
         c == grpc::StatusCode::RESOURCE_EXHAUSTED || c == grpc::StatusCode::ABORTED;
}

bool IsHexDigest(const std::string& s) {
  if (s.size() < 8 || s.size() > 128) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

int64_t RssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    in.ignore(4096, '\n');
  }
  return 0;
}

}  // namespace

struct Worker::Impl {
  WorkerOptions opts;
  std::unique_ptr<pb::Scheduler::Stub> stub;
  std::unique_ptr<RunnerClient> runner;
  int64_t worker_id = 0;
  double heartbeat_s = 10;

  std::atomic<bool> draining{false};
  std::mutex mu;
  std::condition_variable cv;
  std::optional<std::pair<int64_t, std::string>> lease;  // shard, token (for the heartbeat)
  std::atomic<bool> lease_lost{false};
  std::atomic<bool> shard_cancelled{false};  // the shard's sweep was cancelled
  std::atomic<int64_t> job_in_flight{0};     // the job the runner is on (0: none), heartbeated
  bool stop_heartbeat = false;
  std::thread heartbeat;

  common::MetricsRegistry reg;
  prometheus::Family<prometheus::Counter>& verdicts = reg.CounterFamily(
      "touchstone_worker_verdicts_total", "Mode verdicts produced, by mode and status");
  prometheus::Histogram& model_seconds =
      reg.Histogram("touchstone_worker_model_duration_seconds", "Wall time per model, all modes",
                    common::ModelSecondsBuckets());
  prometheus::Counter& shards = reg.Counter("touchstone_worker_shards_total", "Shards leased");
  prometheus::Counter& retries = reg.Counter("touchstone_worker_rpc_retries_total",
                                             "RPCs retried while the scheduler was unavailable");
  prometheus::Counter& leases_lost = reg.Counter(
      "touchstone_worker_leases_lost_total", "Leases refused as stale; the shard was dropped");
  prometheus::Counter& strings_clamped = reg.Counter(
      "touchstone_worker_strings_clamped_total",
      "Strings of model records cut to the scheduler's limits (NULs replaced, long errors cut)");
  prometheus::Family<prometheus::Gauge>& rss = reg.GaugeFamily(
      "touchstone_worker_rss_bytes", "Resident memory of the worker and of its runner child");
  prometheus::Gauge& rss_worker = rss.Add({{"process", "worker"}});
  prometheus::Gauge& rss_runner = rss.Add({{"process", "runner"}});
  prometheus::Gauge& runner_restarts = reg.Gauge(
      "touchstone_worker_runner_restarts", "Runner children replaced after a crash or timeout");
  std::unique_ptr<common::HttpServer> http;

  // The long poll in flight, if any: Drain() cancels it (guarded by call_mu).
  std::mutex call_mu;
  grpc::ClientContext* long_poll = nullptr;
  void CancelLongPoll() {
    std::lock_guard<std::mutex> l(call_mu);
    if (long_poll != nullptr) long_poll->TryCancel();
  }

  // One RPC, retried with backoff while retryable. Draining gives up retrying after 60 s.
  // wait_s: a long poll's wait, added to the deadline; the call is cancelled by Drain().
  template <typename Req, typename Resp>
  grpc::Status Call(grpc::Status (pb::Scheduler::Stub::*method)(grpc::ClientContext*, const Req&,
                                                                Resp*),
                    const Req& req, Resp* resp, bool retry = true, double wait_s = 0) {
    const auto start = Clock::now();
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int>((opts.rpc_timeout_s + wait_s) * 1000)));
      if (!opts.token.empty()) ctx.AddMetadata("authorization", "Bearer " + opts.token);
      if (wait_s > 0) {
        std::lock_guard<std::mutex> l(call_mu);
        if (draining) return grpc::Status(grpc::StatusCode::CANCELLED, "draining");
        long_poll = &ctx;
      }
      grpc::Status st = (stub.get()->*method)(&ctx, req, resp);
      if (wait_s > 0) {
        std::lock_guard<std::mutex> l(call_mu);
        long_poll = nullptr;
      }
      if (st.ok() || !retry || !Retryable(st.error_code())) return st;
      if (draining && Clock::now() - start > std::chrono::seconds(60)) return st;
      retries.Increment();
      // 0.05-0.1 s, then doubling to 1-2 s: workers that lost the scheduler together (a
      // restart, a network blip) come back spread over half the step, not in one burst.
      std::this_thread::sleep_for(std::chrono::duration<double>(common::BackoffWithJitter(attempt, 0.1, 2.0)));
    }
  }

  void HeartbeatLoop() {
    std::unique_lock<std::mutex> l(mu);
    while (!stop_heartbeat) {
      cv.wait_for(l, std::chrono::duration<double>(heartbeat_s), [&] { return stop_heartbeat; });
      if (stop_heartbeat || !lease) continue;
      pb::HeartbeatRequest hb;
      hb.set_worker_id(worker_id);
      hb.set_shard_id(lease->first);
      hb.set_lease_token(lease->second);
      hb.set_job_id(job_in_flight);
      l.unlock();
      pb::HeartbeatResponse resp;
      grpc::Status st = Call(&pb::Scheduler::Stub::Heartbeat, hb, &resp, /*retry=*/false);
      if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
          st.error_code() == grpc::StatusCode::NOT_FOUND) {
        lease_lost = true;
      }
      if (st.ok() && resp.drain()) shard_cancelled = true;  // this shard only, not the worker
      l.lock();
    }
  }

  void SleepUnlessDraining(double s) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, std::chrono::duration<double>(s), [&] { return draining.load(); });
  }

  // Writes the profile once per digest; the runner child reads it from there.
  absl::StatusOr<std::string> ProfileFile(const pb::Profile& p) {
    // The digest names a file: only hex is taken (a scheduler bug or a hostile peer could send
    // "../x"), and no digest means no cache (a name per body would collide).
    if (!IsHexDigest(p.sha())) {
      return absl::InvalidArgumentError("profile.sha: want 8 to 128 hex digits, got '" +
                                        p.sha().substr(0, 80) + "'");
    }
    const fs::path path = fs::path(opts.state_dir) / "profiles" / p.sha();
    const std::string file = path.string() + ".json";
    if (fs::exists(file)) return file;
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    const std::string tmp = file + ".tmp";
    {
      std::ofstream out(tmp);
      out << p.body();
      if (!out) return absl::InternalError("cannot write " + tmp);
    }
    fs::rename(tmp, file, ec);
    if (ec) return absl::InternalError("rename " + tmp + ": " + ec.message());
    return file;
  }

  // Sends the batch; false when the lease is gone (stale token).
  bool Flush(const pb::LeaseShardResponse& l, std::vector<pb::ModelResult>* batch,
             bool finish = false) {
    if (batch->empty()) return true;
    pb::ReportResultsRequest req;
    req.set_finish(finish);
    req.set_worker_id(worker_id);
    req.set_shard_id(l.shard_id());
    req.set_lease_token(l.lease_token());
    // One id per report, kept across its retries: a report whose answer was lost is answered
    // from the store instead of being refused as stale after it finished the shard.
    req.set_request_id(common::RandomHex(16));
    for (auto& r : *batch) *req.add_results() = std::move(r);
    batch->clear();
    pb::ReportResultsResponse resp;
    grpc::Status st = Call(&pb::Scheduler::Stub::ReportResults, req, &resp);
    if (st.ok()) return true;
    if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      leases_lost.Increment();
      lease_lost = true;
      return false;
    }
    std::fprintf(stderr, "touchstone-worker: report refused: %s\n", st.error_message().c_str());
    lease_lost = true;  // do not finish a shard whose results were not stored
    return false;
  }

  void RunShard(const pb::LeaseShardResponse& l) {
    shards.Increment();
    lease_lost = false;
    shard_cancelled = false;
    {
      std::lock_guard<std::mutex> g(mu);
      lease = std::make_pair(l.shard_id(), l.lease_token());
    }
    std::set<std::string> modes(l.modes().begin(), l.modes().end());
    auto profile = ProfileFile(l.profile());
    if (!profile.ok()) {
      // The shard goes back below (release); pause so that a full disk is not a busy loop.
      std::fprintf(stderr, "touchstone-worker: %s\n", profile.status().ToString().c_str());
      SleepUnlessDraining(5);
    }
    std::vector<pb::ModelResult> batch;
    auto last_report = Clock::now();
    bool all_run = true;
    int ran = 0;
    for (const auto& job : l.jobs()) {
      if (draining || lease_lost || shard_cancelled || !profile.ok()) {
        all_run = false;
        break;
      }
      JobSpec spec;
      spec.job_id = job.job_id();
      spec.model_id = job.model_id();
      spec.arch = job.arch();
      spec.modes = modes;
      spec.seed = job.seed();
      spec.timeout_s = l.model_timeout_s() > 0 ? l.model_timeout_s() : 300;
      spec.audit_ops = l.audit_ops();
      spec.weights_dir = opts.weights_dir;
      spec.config = nlohmann::json::parse(job.config_json(), nullptr, false);
      const auto t0 = Clock::now();
      job_in_flight = job.job_id();
      auto result = runner->RunJob(*profile, spec);
      job_in_flight = 0;
      if (!result.ok()) {
        // The runner itself cannot start: a worker problem, not the model's. Give the shard
        // back and pause.
        std::fprintf(stderr, "touchstone-worker: %s\n", result.status().ToString().c_str());
        all_run = false;
        SleepUnlessDraining(5);
        break;
      }
      ++ran;
      model_seconds.Observe(std::chrono::duration<double>(Clock::now() - t0).count());
      // The record comes whole from the runner child; the worker adds the job's identity.
      pb::ModelResult& record = batch.emplace_back(std::move(*result));
      record.set_job_id(job.job_id());
      record.set_model_id(job.model_id());
      record.set_run(job.run());
      // One model's runaway error text costs that text, not the report (field_limits.h).
      if (int cut = common::ClampStrings(&record); cut > 0) strings_clamped.Increment(cut);
      for (const auto& v : record.modes()) {
        verdicts.Add({{"mode", proto::ModeName(v.mode())}, {"status", proto::VerdictName(v.status())}})
            .Increment();
      }
      runner_restarts.Set(runner->restarts());
      if (static_cast<int>(batch.size()) >= opts.report_batch ||
          Clock::now() - last_report > std::chrono::duration<double>(opts.report_interval_s)) {
        if (!Flush(l, &batch)) break;
        last_report = Clock::now();
      }
    }
    if (!lease_lost && all_run && !batch.empty()) {
      Flush(l, &batch, /*finish=*/true);  // the last report closes the shard
    } else if (!lease_lost && Flush(l, &batch)) {
      pb::FinishShardRequest f;
      f.set_worker_id(worker_id);
      f.set_shard_id(l.shard_id());
      f.set_lease_token(l.lease_token());
      f.set_release(!all_run);
      pb::FinishShardResponse fr;
      const grpc::Status st = Call(&pb::Scheduler::Stub::FinishShard, f, &fr);
      // Said once per shard given back, so that an operator (and tests/slurm_e2e.sh) can tell a
      // drained hand-back from a lease left to expire.
      if (st.ok() && !all_run) {
        std::fprintf(stderr,
                     "touchstone-worker: shard %lld handed back (%s): %d of %d models run and "
                     "reported, %lld left for another worker\n",
                     static_cast<long long>(l.shard_id()),
                     draining ? "draining" : shard_cancelled ? "sweep cancelled" : "worker problem",
                     ran, l.jobs_size(), static_cast<long long>(fr.jobs_left()));
      }
    }
    std::lock_guard<std::mutex> g(mu);
    lease.reset();
  }
};

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    impl_->stop_heartbeat = true;
  }
  impl_->cv.notify_all();
  if (impl_->heartbeat.joinable()) impl_->heartbeat.join();
  if (impl_->http) impl_->http->Stop();
}

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(const WorkerOptions& opts) {
  if (opts.runner_path.empty() || !fs::exists(opts.runner_path)) {
    return absl::InvalidArgumentError("runner: no touchstone-runner at '" + opts.runner_path + "'");
  }
  if (opts.state_dir.empty()) return absl::InvalidArgumentError("state_dir: required");
  std::error_code ec;
  fs::create_directories(opts.state_dir, ec);
  if (ec) return absl::InvalidArgumentError("state_dir: " + ec.message());
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  if (impl->opts.name.empty()) {
    char host[256] = "host";
    ::gethostname(host, sizeof(host) - 1);
    impl->opts.name = std::string(host) + "/" + std::to_string(::getpid());
  }
  impl->runner = std::make_unique<RunnerClient>(
      RunnerOptions{opts.runner_path, opts.state_dir + "/runner.log"});
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // Reconnect within a second of the scheduler coming back, however long it was away: gRPC's
  // own backoff (1 s x 1.6 per attempt) would leave a worker deaf for ~10 s after a 6 s outage,
  // longer than the start-up grace a restarted scheduler gives its leases.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto channel = common::MakeChannel(opts.scheduler, opts.tls_ca_file, args);
  if (!channel.ok()) return channel.status();
  impl->stub = pb::Scheduler::NewStub(*channel);
  if (opts.http_port >= 0) {
    Impl* raw = impl.get();
    common::HttpServerOptions ho;
    ho.host = opts.http_host;
    ho.port = opts.http_port;  // /metrics and /healthz only: open (http_server.h)
    auto http = common::HttpServer::Start(
        ho, {{"/metrics", raw->reg.Handler([raw] {
                raw->rss_worker.Set(static_cast<double>(RssBytes(::getpid())));
                raw->rss_runner.Set(
                    raw->runner->pid() > 0 ? static_cast<double>(RssBytes(raw->runner->pid())) : 0.0);
              })},
             {"/healthz", [](const std::string&) {
                return common::HttpResponse{200, "text/plain", "ok\n"};
              }}});
    if (!http.ok()) return http.status();
    impl->http = std::move(*http);
  }
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

int Worker::http_port() const { return impl_->http ? impl_->http->port() : -1; }

void Worker::Drain() {
  {
    // Under call_mu: a long poll either sees draining before it starts or is cancelled here.
    std::lock_guard<std::mutex> l(impl_->call_mu);
    impl_->draining = true;
  }
  impl_->CancelLongPoll();
  impl_->cv.notify_all();
}

absl::Status Worker::Run() {
  Impl& w = *impl_;
  pb::RegisterWorkerRequest reg;
  reg.set_name(w.opts.name);
  reg.set_version("touchstone-worker/1");
  reg.set_slots(1);
  pb::RegisterWorkerResponse rr;
  for (;;) {
    grpc::Status st = w.Call(&pb::Scheduler::Stub::RegisterWorker, reg, &rr);
    if (st.ok()) break;
    if (w.draining) return absl::OkStatus();
    if (!Retryable(st.error_code())) return common::FromGrpcStatus(st);
  }
  w.worker_id = rr.worker_id();
  w.heartbeat_s = rr.heartbeat_interval_s() > 0 ? rr.heartbeat_interval_s() : 10;
  w.heartbeat = std::thread([&w] { w.HeartbeatLoop(); });
  while (!w.draining) {
    pb::LeaseShardRequest lq;
    lq.set_worker_id(w.worker_id);
    lq.set_request_id(common::RandomHex(16));  // kept across this call's retries
    const double wait_s = std::clamp(w.opts.long_poll_s, 0.0, 60.0);
    lq.set_wait_ms(static_cast<uint32_t>(wait_s * 1000));
    pb::LeaseShardResponse lease;
    const auto asked = Clock::now();
    grpc::Status st = w.Call(&pb::Scheduler::Stub::LeaseShard, lq, &lease, /*retry=*/true, wait_s);
    if (!st.ok()) {
      if (w.draining) break;
      if (!Retryable(st.error_code())) return common::FromGrpcStatus(st);
      continue;
    }
    if (lease.quarantined()) {
      std::fprintf(stderr,
                   "touchstone-worker: quarantined by the scheduler (too many leases in a row "
                   "lost or given back without a result); asking again in %d ms\n",
                   lease.retry_after_ms());
      w.SleepUnlessDraining(lease.retry_after_ms() / 1000.0);
      continue;
    }
    if (!lease.has_shard()) {
      // A long poll that was held (the scheduler may hold it less than asked: at most a lease
      // TTL): ask again at once. One answered "0" at once (a scheduler shutting down) still
      // waits below: never a busy loop.
      if (wait_s > 0 && lease.retry_after_ms() == 0 &&
          Clock::now() - asked > std::chrono::duration<double>(std::min(wait_s / 2, 0.5))) {
        continue;
      }
      const double wait = lease.retry_after_ms() > 0
                              ? std::min(w.opts.idle_poll_s, lease.retry_after_ms() / 1000.0)
                              : w.opts.idle_poll_s;
      // +-50%: workers started together drift out of phase within a few polls, so a new
      // sweep is met by leases spread over the poll period rather than all at once.
      w.SleepUnlessDraining(common::Jittered(wait, 0.5));
      continue;
    }
    w.RunShard(lease);
  }
  return absl::OkStatus();
}

}  // namespace ts::worker
