// Internal to the scheduler: the state shared by its RPC handlers (scheduler_rpc.cc), its ticker
// (scheduler_tick.cc) and its start-up and shutdown (scheduler.cc). Not part of the library's API.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "services/common/grpc_status.h"
#include "services/common/http_server.h"
#include "services/common/metrics.h"
#include "services/scheduler/alert_delivery.h"
#include "services/scheduler/query_service.h"
#include "services/scheduler/scheduler.h"
#include "services/scheduler/store_pool.h"
#include "services/scheduler/validate.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {

using Clock = std::chrono::steady_clock;

struct Metrics {
  common::MetricsRegistry reg;
  prometheus::Family<prometheus::Gauge>& shards = reg.GaugeFamily(
      "touchstone_scheduler_shards", "Shards of running sweeps by state (queue depth and leases held)");
  prometheus::Gauge& shards_queued = shards.Add({{"state", "queued"}});
  prometheus::Gauge& shards_leased = shards.Add({{"state", "leased"}});
  prometheus::Gauge& jobs_pending = reg.Gauge(
      "touchstone_scheduler_jobs_pending", "Jobs without a result in queued or leased shards");
  prometheus::Gauge& sweeps_running =
      reg.Gauge("touchstone_scheduler_sweeps_running", "Sweeps not yet done");
  prometheus::Gauge& workers_alive = reg.Gauge("touchstone_scheduler_workers_alive",
                                               "Workers heard from within three lease TTLs");
  prometheus::Gauge& workers_quarantined = reg.Gauge(
      "touchstone_scheduler_workers_quarantined",
      "Workers quarantined for ending too many leases in a row without a result");
  prometheus::Gauge& alerts_open = reg.Gauge(
      "touchstone_scheduler_alerts_open",
      "Open regression alerts, counted after each summary and detection pass");
  prometheus::Gauge& db_up =
      reg.Gauge("touchstone_scheduler_db_up", "1 when the last database check succeeded");
  prometheus::Gauge& lease_calls_open = reg.Gauge(
      "touchstone_scheduler_lease_calls_open",
      "LeaseShard calls received and not yet answered (waiting or being served)");
  prometheus::Counter& report_yields = reg.Counter(
      "touchstone_scheduler_report_yields_total",
      "Reports that held their database work back behind a backlog of LeaseShard calls");
  prometheus::Counter& leases = reg.Counter("touchstone_scheduler_leases_total", "Shards leased");
  prometheus::Counter& lease_statements = reg.Counter(
      "touchstone_scheduler_lease_statements_total",
      "Leasing statements run (each serves a batch of LeaseShard calls)");
  prometheus::Counter& idle_answers = reg.Counter(
      "touchstone_scheduler_lease_idle_answers_total",
      "LeaseShard calls answered 'nothing queued' from memory, without a statement");
  prometheus::Gauge& lease_calls_parked = reg.Gauge(
      "touchstone_scheduler_lease_calls_parked",
      "LeaseShard long polls held while nothing is queued (wait_ms)");
  prometheus::Family<prometheus::Counter>& lease_events = reg.CounterFamily(
      "touchstone_scheduler_lease_events_total",
      "Leases that expired, shards split, models recorded lost after their workers were lost");
  prometheus::Counter& expired = lease_events.Add({{"event", "expired"}});
  prometheus::Counter& split = lease_events.Add({{"event", "split"}});
  prometheus::Counter& lost = lease_events.Add({{"event", "lost"}});
  prometheus::Counter& graced = lease_events.Add({{"event", "graced"}});
  prometheus::Counter& quarantined_workers = lease_events.Add({{"event", "worker_quarantined"}});
  prometheus::Family<prometheus::Counter>& results = reg.CounterFamily(
      "touchstone_scheduler_results_total", "Mode verdicts stored, by mode and status");
  prometheus::Family<prometheus::Histogram>& rpc = reg.HistogramFamily(
      "touchstone_scheduler_rpc_duration_seconds",
      "RPC latency from hand-off to the database pool to the answer, by method and code");
  prometheus::Histogram& model_seconds =
      reg.Histogram("touchstone_scheduler_model_duration_seconds",
                    "Per-model run time reported by workers", common::ModelSecondsBuckets());
  prometheus::Family<prometheus::Gauge>& open_regressions = reg.GaugeFamily(
      "touchstone_open_regressions",
      "Regression alerts not resolved (open or acknowledged) holding models of the task, by "
      "task and severity; drift warnings excluded");
  prometheus::Gauge& quarantined =
      reg.Gauge("touchstone_quarantined", "Models and modes in quarantine (flaky history)");
  prometheus::Family<prometheus::Counter>& schedule_runs = reg.CounterFamily(
      "touchstone_scheduler_schedule_runs_total",
      "Due times of schedules this scheduler handled, by outcome (started, skipped, failed)");
};

using common::Role;

struct Scheduler::Impl final : public ::touchstone::v1::Scheduler::CallbackService {
  SchedulerOptions opts;
  std::shared_ptr<const common::TokenSet> tokens;  // shared with HTTP (and the Query service)
  store::StoreOptions store_opts;
  std::unique_ptr<StorePool> pool;        // reports, upserts, sweep creation
  std::unique_ptr<StorePool> lease_pool;  // register, lease, heartbeat: never behind a report
  std::unique_ptr<StorePool> query_pool;  // progress and results queries: never behind one either
  std::unique_ptr<QueryService> query;    // touchstone.v1.Query, on query_pool
  std::atomic<bool> summarizing{false};   // a SummarizeDoneSweeps task is queued or running
  // touchstone_open_regressions' label sets ever set (task, severity), so that one that drops
  // out is set to 0; touched only by the summarizing task.
  std::set<std::pair<std::string, std::string>> regression_labels;
  void SetRegressionGauges(store::Store& q);
  std::unique_ptr<AlertDelivery> delivery;  // Alertmanager, when configured
  std::atomic<bool> delivering{false};      // a delivery round is queued or running
  std::atomic<bool> scheduling{false};      // a StartDueSchedules task is queued or running
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<common::HttpServer> http;
  int grpc_port = 0;
  Metrics metrics;
  std::mutex mu;
  std::map<int64_t, Clock::time_point> workers_seen;
  std::atomic<bool> db_ok{false};
  // Whether the current leases got their start-up grace since the scheduler started or the
  // database was last out (ticker only): expiry waits for it.
  bool leases_graced = false;
  Clock::time_point last_forget;  // ticker only: the last ForgetOldRequests
  double GraceSeconds() const {
    return opts.startup_grace_s > 0 ? opts.startup_grace_s : std::max(10.0, 2 * opts.lease_ttl_s);
  }
  // Idle polls. Once a leasing statement (or the ticker's queue count) found no queued shard,
  // LeaseShard answers workers this scheduler knows with "nothing" from memory for
  // IdleWindow(), unless a write that may queue work ran here since (queue_epoch moved): 1,000
  // idle workers cost about one statement a second rather than two thousand. Work queued
  // through another scheduler is seen within IdleWindow().
  double TickSeconds() const {
    return opts.tick_s > 0 ? opts.tick_s : std::min(1.0, opts.lease_ttl_s / 4);
  }
  // At least two ticks, so that the ticker's queue counts keep it from lapsing while idle.
  std::chrono::duration<double> IdleWindow() const {
    return std::chrono::duration<double>(std::max(1.0, 2 * TickSeconds()));
  }
  std::mutex idle_mu;
  uint64_t queue_epoch = 0;             // bumped after each write that may queue shards
  uint64_t empty_epoch = ~uint64_t{0};  // the epoch at which the queue was last seen empty
  Clock::time_point empty_at;
  uint64_t QueueEpoch() {
    std::lock_guard<std::mutex> l(idle_mu);
    return queue_epoch;
  }
  void QueueMayHaveWork() {
    std::lock_guard<std::mutex> l(idle_mu);
    ++queue_epoch;
  }
  // The queue was empty for a look that began at `epoch`; kept only if nothing moved since.
  void QueueSeenEmpty(uint64_t epoch) {
    std::lock_guard<std::mutex> l(idle_mu);
    if (epoch != queue_epoch) return;
    empty_epoch = epoch;
    empty_at = Clock::now();
  }
  bool QueueKnownEmpty() {
    std::lock_guard<std::mutex> l(idle_mu);
    return empty_epoch == queue_epoch && Clock::now() - empty_at < IdleWindow();
  }
  // Workers whose last leasing statement here found nothing for them: only they are answered
  // from memory. A worker that got a shard asks the database again, so that the retry of a
  // call whose answer was lost gets its shard back (request_id) rather than "nothing".
  std::set<int64_t> idle_workers;  // guarded by mu
  bool IdleWorker(int64_t worker_id) {
    std::lock_guard<std::mutex> l(mu);
    return idle_workers.count(worker_id) > 0;
  }
  void SetIdle(int64_t worker_id, bool idle) {
    std::lock_guard<std::mutex> l(mu);
    if (idle) {
      idle_workers.insert(worker_id);
    } else {
      idle_workers.erase(worker_id);
    }
  }
  std::thread ticker;
  std::mutex tick_mu;
  std::condition_variable tick_cv;
  bool stopping = false;
  std::atomic<bool> shut{false};
  // LeaseShard calls waiting for a lease thread. Whichever thread comes free serves up to
  // LeaseBatch() of them with one leasing statement, so a burst of workers asking at once (a
  // new sweep, a scheduler restart) waits for a few statements instead of one each.
  struct LeaseWaiter {
    int64_t worker_id;
    std::string request_id;  // "" when the call carried none
    pb::LeaseShardResponse* resp;
    grpc::ServerUnaryReactor* reactor;
    Clock::time_point t0;          // arrival; for a woken long poll, its wake (the latency
                                   // histogram times the service, not the wait)
    Clock::time_point wait_until;  // a long poll's end (arrival + wait_ms)
    bool long_poll;                // wait_ms > 0
    grpc::CallbackServerContext* ctx;
  };
  // Long polls. A call with wait_ms that would be answered "nothing queued" is parked here
  // instead (guarded by lease_mu). The ticker serves them again when its count finds queued
  // shards (work queued here or through another scheduler: within one tick), CreateSweep
  // wakes them at once, and a parked call is answered "nothing" with
  // retry_after_ms 0 when its wait ends (or its client went away). So 1,000 idle workers cost
  // one call each per wait and the ticker's one count a tick, instead of 2,000 calls a second.
  static constexpr uint32_t kMaxWaitMs = 60000;
  std::vector<LeaseWaiter> parked;
  bool parking_closed = false;  // Shutdown: answer at once
  // Parks `w` unless parking is closed; false: the caller answers it.
  bool Park(const LeaseWaiter& w) {
    std::lock_guard<std::mutex> l(lease_mu);
    if (parking_closed) return false;
    parked.push_back(w);
    metrics.lease_calls_parked.Set(static_cast<double>(parked.size()));
    return true;
  }
  // Parked calls back to the leasing queue (queued shards were seen).
  void WakeParked();
  // Answers "nothing" to parked calls whose wait ended or whose client left; all of them
  // (and no more parking) when `closing`.
  void EndParked(bool closing);

  size_t LeaseBatch() const { return static_cast<size_t>(std::max(1, opts.lease_batch)); }
  // A call's waiter. Its wait is at most one lease TTL, so that a held worker is heard from
  // within the TTLs that count it alive.
  LeaseWaiter Waiter(const pb::LeaseShardRequest& req, pb::LeaseShardResponse* resp,
                     grpc::ServerUnaryReactor* reactor, grpc::CallbackServerContext* ctx) const {
    const Clock::time_point now = Clock::now();
    const uint32_t wait = std::min({req.wait_ms(), kMaxWaitMs,
                                    static_cast<uint32_t>(std::max(0.0, opts.lease_ttl_s) * 1000)});
    return {req.worker_id(), req.request_id(), resp, reactor, now,
            now + std::chrono::milliseconds(wait), wait > 0, ctx};
  }
  // How long a worker told "nothing queued" waits before asking again (+-50% on its side).
  static constexpr int kIdleRetryMs = 500;
  std::mutex lease_mu;
  std::deque<LeaseWaiter> lease_waiters;
  // LeaseShard calls not answered yet, waiting or being served (guarded by lease_mu). While
  // there are more than the lease threads can serve at once, a report thread holds its database
  // work back for up to kReportYield: a worker waiting for its shard sits idle, a report a few
  // milliseconds late costs nothing, and on a small machine the reports' PostgreSQL work is
  // what the leases compete with. Seen when a fleet asks at once (a new sweep, a restart).
  size_t lease_calls_open = 0;
  std::condition_variable lease_calls_cv;
  static constexpr auto kReportYield = std::chrono::milliseconds(20);

  void LeaseCallsAnswered(size_t n) {
    std::lock_guard<std::mutex> l(lease_mu);
    lease_calls_open -= n;
    metrics.lease_calls_open.Set(static_cast<double>(lease_calls_open));
    if (lease_calls_open <= static_cast<size_t>(opts.lease_threads)) lease_calls_cv.notify_all();
  }
  void YieldToLeases() {
    std::unique_lock<std::mutex> l(lease_mu);
    const auto backlog_gone = [this] {
      return lease_calls_open <= static_cast<size_t>(opts.lease_threads);
    };
    if (backlog_gone()) return;
    metrics.report_yields.Increment();
    lease_calls_cv.wait_for(l, kReportYield, backlog_gone);
  }

  void Seen(int64_t worker_id) {
    std::lock_guard<std::mutex> l(mu);
    workers_seen[worker_id] = Clock::now();
  }

  absl::Status Auth(grpc::CallbackServerContext* ctx, const char* method) {
    return tokens->Admit(ctx, SchedulerMethodRole(method).value_or(Role::kAdmin), method);
  }

  // Validate, hand off to the pool, return; the pool thread answers.
  template <typename Req, typename Resp, typename Fn>
  grpc::ServerUnaryReactor* Handle(const char* method, grpc::CallbackServerContext* ctx,
                                   const Req* req, Resp* resp, Fn fn) {
    return Handle(pool.get(), method, ctx, req, resp, fn);
  }
  // The token and the request's shape; a refusal is answered at once.
  template <typename Req>
  absl::Status Admit(grpc::CallbackServerContext* ctx, const char* method, const Req& req) {
    absl::Status st = Auth(ctx, method);
    return st.ok() ? Validate(req) : st;
  }
  // Answers a call handed to a pool at t0, recording its latency by method and code.
  void Answer(grpc::ServerUnaryReactor* reactor, const char* method, const absl::Status& st,
              Clock::time_point t0) {
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    metrics.rpc
        .Add({{"method", method}, {"code", absl::StatusCodeToString(st.code())}}, common::LatencyBuckets())
        .Observe(secs);
    reactor->Finish(common::ToGrpcStatus(st));
  }
  static grpc::Status QueueFull() {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "scheduler database queue is full; retry with backoff");
  }

  template <typename Req, typename Resp, typename Fn>
  grpc::ServerUnaryReactor* Handle(StorePool* on, const char* method,
                                   grpc::CallbackServerContext* ctx, const Req* req, Resp* resp,
                                   Fn fn) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (absl::Status st = Admit(ctx, method, *req); !st.ok()) {
      reactor->Finish(common::ToGrpcStatus(st));
      return reactor;
    }
    const auto t0 = Clock::now();
    const bool writes = on == pool.get();
    const bool queued = on->Submit([this, method, req, resp, reactor, fn, t0, writes](store::Store* s) {
      absl::Status st = s ? fn(*s, *req, resp)
                          : absl::UnavailableError(std::string(method) + ": database unreachable; retry");
      // A sweep, a released shard or a confirmation run may have queued work: idle polls go
      // back to the database (after the commit, so a statement that missed it is not cached).
      if (writes) QueueMayHaveWork();
      Answer(reactor, method, st, t0);
    });
    if (!queued) reactor->Finish(QueueFull());
    return reactor;
  }

  template <typename T>
  static absl::Status Assign(absl::StatusOr<T> v, T* out) {
    if (!v.ok()) return v.status();
    *out = std::move(*v);
    return absl::OkStatus();
  }

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* ctx,
                                           const pb::RegisterWorkerRequest* req,
                                           pb::RegisterWorkerResponse* resp) override;
  grpc::ServerUnaryReactor* LeaseShard(grpc::CallbackServerContext* ctx,
                                       const pb::LeaseShardRequest* req,
                                       pb::LeaseShardResponse* resp) override;
  void ServeLeases(store::Store* s);
  bool ServeLeaseBatch(store::Store* s);  // false: nothing was waiting
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const pb::HeartbeatRequest* req,
                                      pb::HeartbeatResponse* resp) override;
  grpc::ServerUnaryReactor* ReportResults(grpc::CallbackServerContext* ctx,
                                          const pb::ReportResultsRequest* req,
                                          pb::ReportResultsResponse* resp) override;
  grpc::ServerUnaryReactor* FinishShard(grpc::CallbackServerContext* ctx,
                                        const pb::FinishShardRequest* req,
                                        pb::FinishShardResponse* resp) override;
  grpc::ServerUnaryReactor* UpsertModels(grpc::CallbackServerContext* ctx,
                                         const pb::UpsertModelsRequest* req,
                                         pb::UpsertModelsResponse* resp) override;
  grpc::ServerUnaryReactor* CreateSweep(grpc::CallbackServerContext* ctx,
                                        const pb::CreateSweepRequest* req,
                                        pb::CreateSweepResponse* resp) override;
  grpc::ServerUnaryReactor* GetSweep(grpc::CallbackServerContext* ctx,
                                     const pb::GetSweepRequest* req,
                                     pb::SweepProgress* resp) override;
  grpc::ServerUnaryReactor* CancelSweep(grpc::CallbackServerContext* ctx,
                                        const pb::CancelSweepRequest* req,
                                        pb::SweepProgress* resp) override;
  grpc::ServerWriteReactor<pb::ResultPage>* ListResults(
      grpc::CallbackServerContext* ctx, const pb::ListResultsRequest* req) override;
  // Schedules (schedules_rpc.cc, schedules_tick.cc).
  grpc::ServerUnaryReactor* AddSchedule(grpc::CallbackServerContext* ctx,
                                        const pb::AddScheduleRequest* req,
                                        pb::Schedule* resp) override;
  grpc::ServerUnaryReactor* ListSchedules(grpc::CallbackServerContext* ctx,
                                          const pb::ListSchedulesRequest* req,
                                          pb::ListSchedulesResponse* resp) override;
  grpc::ServerUnaryReactor* RemoveSchedule(grpc::CallbackServerContext* ctx,
                                           const pb::RemoveScheduleRequest* req,
                                           pb::RemoveScheduleResponse* resp) override;
  grpc::ServerUnaryReactor* SetScheduleEnabled(grpc::CallbackServerContext* ctx,
                                               const pb::SetScheduleEnabledRequest* req,
                                               pb::Schedule* resp) override;
  std::chrono::system_clock::time_point WallNow() const {
    return opts.clock ? opts.clock() : std::chrono::system_clock::now();
  }
  // Queues StartDueSchedules on the database pool (a sweep's creation takes seconds on a large
  // sample: never on the ticker), one at a time.
  void TickSchedules();
  // One tick (scheduler_tick.cc): the leases, the work handed to the query pool, the schedules,
  // the queue's gauges and health, the workers seen. s: null while the database is out.
  void Tick(store::Store* s);
  // Start-up grace (once after a start or an outage), then lease expiry.
  absl::StatusOr<store::ExpiryStats> TickLeases(store::Store* s);
  // Done sweeps' summaries and detection, and Alertmanager delivery, on the query pool.
  void TickOffTicker();
  // Queue gauges, db_up and gRPC health; `leases_ok`: this tick's lease expiry went through.
  void TickQueue(store::Store* s, bool leases_ok);
  // Workers not seen for 3 lease TTLs are forgotten; the rest are workers_alive.
  void TickWorkers();
  void TickLoop();

  class ListReactor;  // scheduler_rpc.cc
};

}  // namespace ts::scheduler
