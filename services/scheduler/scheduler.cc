#include "services/scheduler/scheduler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>

#include "services/common/grpc_status.h"
#include "services/common/http_server.h"
#include "services/common/metrics.h"
#include "services/common/tls.h"
#include "services/scheduler/alert_delivery.h"
#include "services/scheduler/query_service.h"
#include "services/scheduler/store_pool.h"
#include "services/scheduler/validate.h"
#include "proto/names.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

using Clock = std::chrono::steady_clock;
using common::Role;

// The role each method needs; admin may call them all (services/common/auth.h).
constexpr std::pair<std::string_view, Role> kMethodRoles[] = {
    {"RegisterWorker", Role::kWorker}, {"LeaseShard", Role::kWorker},
    {"Heartbeat", Role::kWorker},      {"ReportResults", Role::kWorker},
    {"FinishShard", Role::kWorker},    {"GetSweep", Role::kReader},
    {"ListResults", Role::kReader},    {"UpsertModels", Role::kAdmin},
    {"CreateSweep", Role::kAdmin},     {"CancelSweep", Role::kAdmin}};

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
  prometheus::Gauge& db_up =
      reg.Gauge("touchstone_scheduler_db_up", "1 when the last database check succeeded");
  prometheus::Gauge& lease_calls_open = reg.Gauge(
      "touchstone_scheduler_lease_calls_open",
      "LeaseShard calls received and not yet answered (waiting or being served)");
  prometheus::Counter& report_yields = reg.Counter(
      "touchstone_scheduler_report_yields_total",
      "Reports that held their database work back behind a backlog of LeaseShard calls");
  prometheus::Counter& leases = reg.Counter("touchstone_scheduler_leases_total", "Shards leased");
  prometheus::Family<prometheus::Counter>& lease_events = reg.CounterFamily(
      "touchstone_scheduler_lease_events_total",
      "Leases that expired, shards split, models recorded crash after lost workers");
  prometheus::Counter& expired = lease_events.Add({{"event", "expired"}});
  prometheus::Counter& split = lease_events.Add({{"event", "split"}});
  prometheus::Counter& crashed = lease_events.Add({{"event", "crashed"}});
  prometheus::Family<prometheus::Counter>& results = reg.CounterFamily(
      "touchstone_scheduler_results_total", "Mode verdicts stored, by mode and status");
  prometheus::Family<prometheus::Histogram>& rpc = reg.HistogramFamily(
      "touchstone_scheduler_rpc_duration_seconds",
      "RPC latency from hand-off to the database pool to the answer, by method and code");
  prometheus::Histogram& model_seconds =
      reg.Histogram("touchstone_scheduler_model_duration_seconds",
                    "Per-model run time reported by workers", common::ModelSecondsBuckets());
};

}  // namespace

std::optional<Role> SchedulerMethodRole(std::string_view method) {
  for (const auto& [name, role] : kMethodRoles) {
    if (name == method) return role;
  }
  return std::nullopt;
}

struct Scheduler::Impl final : public ::touchstone::v1::Scheduler::CallbackService {
  SchedulerOptions opts;
  std::shared_ptr<const common::TokenSet> tokens;  // shared with HTTP (and the Query service)
  store::StoreOptions store_opts;
  std::unique_ptr<StorePool> pool;        // reports, upserts, sweep creation
  std::unique_ptr<StorePool> lease_pool;  // register, lease, heartbeat: never behind a report
  std::unique_ptr<StorePool> query_pool;  // progress and results queries: never behind one either
  std::unique_ptr<QueryService> query;    // touchstone.v1.Query, on query_pool
  std::atomic<bool> summarizing{false};   // a SummarizeDoneSweeps task is queued or running
  std::unique_ptr<AlertDelivery> delivery;  // Alertmanager, when configured
  std::atomic<bool> delivering{false};      // a delivery round is queued or running
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<common::HttpServer> http;
  int grpc_port = 0;
  Metrics metrics;
  std::mutex mu;
  std::map<int64_t, Clock::time_point> workers_seen;
  std::atomic<bool> db_ok{false};
  std::thread ticker;
  std::mutex tick_mu;
  std::condition_variable tick_cv;
  bool stopping = false;
  std::atomic<bool> shut{false};
  // LeaseShard calls waiting for a lease thread. Whichever thread comes free serves up to
  // kLeaseBatch of them with one leasing statement, so a burst of workers asking at once (a
  // new sweep, a scheduler restart) waits for a few statements instead of one each.
  struct LeaseWaiter {
    int64_t worker_id;
    pb::LeaseShardResponse* resp;
    grpc::ServerUnaryReactor* reactor;
    Clock::time_point t0;
  };
  static constexpr size_t kLeaseBatch = 8;
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
    const bool queued = on->Submit([this, method, req, resp, reactor, fn, t0](store::Store* s) {
      Answer(reactor, method,
             s ? fn(*s, *req, resp)
               : absl::UnavailableError(std::string(method) + ": database unreachable; retry"),
             t0);
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
                                           pb::RegisterWorkerResponse* resp) override {
    return Handle(lease_pool.get(), "RegisterWorker", ctx, req, resp, [this](store::Store& s, const auto& r, auto* out) {
      absl::Status st = Assign(s.RegisterWorker(r), out);
      if (st.ok()) Seen(out->worker_id());
      return st;
    });
  }

  grpc::ServerUnaryReactor* LeaseShard(grpc::CallbackServerContext* ctx,
                                       const pb::LeaseShardRequest* req,
                                       pb::LeaseShardResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (absl::Status st = Admit(ctx, "LeaseShard", *req); !st.ok()) {
      reactor->Finish(common::ToGrpcStatus(st));
      return reactor;
    }
    {
      std::lock_guard<std::mutex> l(lease_mu);
      lease_waiters.push_back({req->worker_id(), resp, reactor, Clock::now()});
      metrics.lease_calls_open.Set(static_cast<double>(++lease_calls_open));
    }
    if (!lease_pool->Submit([this](store::Store* s) { ServeLeases(s); })) {
      // Queue full: answer now unless a lease thread has already taken this call.
      bool mine = false;
      {
        std::lock_guard<std::mutex> l(lease_mu);
        for (auto it = lease_waiters.begin(); it != lease_waiters.end(); ++it) {
          if (it->reactor == reactor) {
            lease_waiters.erase(it);
            mine = true;
            break;
          }
        }
      }
      if (mine) {
        LeaseCallsAnswered(1);
        reactor->Finish(QueueFull());
      }
    }
    return reactor;
  }

  // One lease-pool task per LeaseShard call; a task finding the queue already served is a no-op.
  void ServeLeases(store::Store* s) {
    std::vector<LeaseWaiter> batch;
    {
      std::lock_guard<std::mutex> l(lease_mu);
      while (!lease_waiters.empty() && batch.size() < kLeaseBatch) {
        batch.push_back(lease_waiters.front());
        lease_waiters.pop_front();
      }
    }
    if (batch.empty()) return;
    std::vector<int64_t> ids;
    for (const auto& b : batch) ids.push_back(b.worker_id);
    absl::StatusOr<std::vector<absl::StatusOr<pb::LeaseShardResponse>>> answers =
        s ? s->LeaseShards(ids)
          : absl::UnavailableError("LeaseShard: database unreachable; retry");

    for (size_t i = 0; i < batch.size(); ++i) {
      absl::Status st = answers.ok() ? (*answers)[i].status() : answers.status();
      if (st.ok()) {
        *batch[i].resp = std::move(*(*answers)[i]);
        Seen(batch[i].worker_id);
        if (batch[i].resp->has_shard()) metrics.leases.Increment();
      }
      Answer(batch[i].reactor, "LeaseShard", st, batch[i].t0);
    }
    LeaseCallsAnswered(batch.size());
  }

  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const pb::HeartbeatRequest* req,
                                      pb::HeartbeatResponse* resp) override {
    return Handle(lease_pool.get(), "Heartbeat", ctx, req, resp, [this](store::Store& s, const auto& r, auto* out) {
      Seen(r.worker_id());
      return Assign(s.Heartbeat(r), out);
    });
  }

  grpc::ServerUnaryReactor* ReportResults(grpc::CallbackServerContext* ctx,
                                          const pb::ReportResultsRequest* req,
                                          pb::ReportResultsResponse* resp) override {
    return Handle("ReportResults", ctx, req, resp, [this](store::Store& s, const auto& r, auto* out) {
      Seen(r.worker_id());
      YieldToLeases();
      absl::Status st = Assign(s.ReportResults(r), out);
      if (st.ok() && out->accepted() > 0) {
        for (const auto& m : r.results()) {
          for (const auto& v : m.modes()) {
            metrics.results
                .Add({{"mode", proto::ModeName(v.mode())}, {"status", proto::VerdictName(v.status())}})
                .Increment();
          }
          metrics.model_seconds.Observe(m.total_ms() / 1000.0);
        }
      }
      return st;
    });
  }

  grpc::ServerUnaryReactor* FinishShard(grpc::CallbackServerContext* ctx,
                                        const pb::FinishShardRequest* req,
                                        pb::FinishShardResponse* resp) override {
    return Handle("FinishShard", ctx, req, resp, [](store::Store& s, const auto& r, auto* out) {
      return Assign(s.FinishShard(r), out);
    });
  }

  grpc::ServerUnaryReactor* UpsertModels(grpc::CallbackServerContext* ctx,
                                         const pb::UpsertModelsRequest* req,
                                         pb::UpsertModelsResponse* resp) override {
    return Handle("UpsertModels", ctx, req, resp, [](store::Store& s, const auto& r, auto* out) {
      return Assign(s.UpsertModels(r), out);
    });
  }

  grpc::ServerUnaryReactor* CreateSweep(grpc::CallbackServerContext* ctx,
                                        const pb::CreateSweepRequest* req,
                                        pb::CreateSweepResponse* resp) override {
    return Handle("CreateSweep", ctx, req, resp, [](store::Store& s, const auto& r, auto* out) {
      return Assign(s.CreateSweep(r), out);
    });
  }

  grpc::ServerUnaryReactor* GetSweep(grpc::CallbackServerContext* ctx,
                                     const pb::GetSweepRequest* req,
                                     pb::SweepProgress* resp) override {
    return Handle(query_pool.get(), "GetSweep", ctx, req, resp, [](store::Store& s, const auto& r, auto* out) {
      return Assign(s.GetSweep(r.sweep_id()), out);
    });
  }

  grpc::ServerUnaryReactor* CancelSweep(grpc::CallbackServerContext* ctx,
                                        const pb::CancelSweepRequest* req,
                                        pb::SweepProgress* resp) override {
    return Handle(query_pool.get(), "CancelSweep", ctx, req, resp, [](store::Store& s, const auto& r, auto* out) {
      return Assign(s.CancelSweep(r.sweep_id()), out);
    });
  }

  // Pages are fetched on the query pool one at a time; the next fetch starts when a write is done.
  class ListReactor final : public grpc::ServerWriteReactor<pb::ResultPage> {
   public:
    ListReactor(Impl* impl, pb::ListResultsRequest req) : impl_(impl), req_(std::move(req)) {
      if (req_.page_size() == 0) req_.set_page_size(1000);
      Fetch();
    }
    void OnWriteDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
        return;
      }
      Fetch();
    }
    void OnDone() override { delete this; }

   private:
    void Fetch() {
      const bool queued = impl_->query_pool->Submit([this](store::Store* s) {
        if (!s) {
          Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "database unreachable; retry"));
          return;
        }
        auto rows = s->ListResults(req_.sweep_id(), after_, req_.page_size());
        if (!rows.ok()) {
          Finish(common::ToGrpcStatus(rows.status()));
          return;
        }
        if (rows->empty()) {
          Finish(grpc::Status::OK);
          return;
        }
        page_.Clear();
        for (auto& r : *rows) *page_.add_rows() = std::move(r);
        after_ = page_.rows(page_.rows_size() - 1).model_id();
        StartWrite(&page_);
      });
      if (!queued) {
        Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "database queue full; retry"));
      }
    }
    Impl* impl_;
    pb::ListResultsRequest req_;
    pb::ResultPage page_;
    std::string after_;
  };

  grpc::ServerWriteReactor<pb::ResultPage>* ListResults(
      grpc::CallbackServerContext* ctx, const pb::ListResultsRequest* req) override {
    absl::Status st = Admit(ctx, "ListResults", *req);
    if (!st.ok()) {
      struct Refuse final : grpc::ServerWriteReactor<pb::ResultPage> {
        explicit Refuse(const absl::Status& s) { Finish(common::ToGrpcStatus(s)); }
        void OnDone() override { delete this; }
      };
      return new Refuse(st);
    }
    return new ListReactor(this, *req);
  }

  void Tick(store::Store* s) {
    if (!s) {
      db_ok = false;
      metrics.db_up.Set(0);
      return;
    }
    auto e = s->ExpireLeases();
    if (e.ok()) {
      metrics.expired.Increment(e->expired);
      metrics.split.Increment(e->split);
      metrics.crashed.Increment(e->crashed);
    }
    // A done sweep's kept answers take seconds on a large sweep: off the ticker (lease expiry
    // must not wait), one at a time, on the query pool.
    if (!summarizing.exchange(true) &&
        !query_pool->Submit([this](store::Store* q) {
          // A failure shows in db_ok. Detection after the summary: a sweep that just ended is
          // summarized by one tick and detected by the same one (or, if the summary failed,
          // detection keeps the answers itself).
          if (q) {
            (void)q->SummarizeDoneSweeps();
            (void)q->DetectDoneSweeps();
          }
          summarizing = false;
        })) {
      summarizing = false;
    }
    // Alertmanager delivery: off the ticker too (a post may wait for its timeout).
    if (delivery && !delivering.exchange(true) &&
        !query_pool->Submit([this](store::Store* q) {
          if (q) (void)delivery->Round(*q, Clock::now());  // failures back off and are logged
          delivering = false;
        })) {
      delivering = false;
    }
    auto q = s->Queue();
    db_ok = e.ok() && q.ok();
    metrics.db_up.Set(db_ok ? 1 : 0);
    server->GetHealthCheckService()->SetServingStatus(db_ok);
    if (q.ok()) {
      metrics.shards_queued.Set(static_cast<double>(q->shards_queued));
      metrics.shards_leased.Set(static_cast<double>(q->shards_leased));
      metrics.jobs_pending.Set(static_cast<double>(q->jobs_pending));
      metrics.sweeps_running.Set(static_cast<double>(q->sweeps_running));
    }
    std::lock_guard<std::mutex> l(mu);
    const auto horizon = std::chrono::duration<double>(3 * opts.lease_ttl_s);
    int alive = 0;
    for (auto it = workers_seen.begin(); it != workers_seen.end();) {
      if (Clock::now() - it->second > horizon) {
        it = workers_seen.erase(it);
      } else {
        ++alive;
        ++it;
      }
    }
    metrics.workers_alive.Set(alive);
  }

  void TickLoop() {
    const double tick = opts.tick_s > 0 ? opts.tick_s : std::min(1.0, opts.lease_ttl_s / 4);
    std::unique_ptr<store::Store> s;
    std::unique_lock<std::mutex> l(tick_mu);
    while (!stopping) {
      l.unlock();
      if (!s) {
        auto c = store::Store::Connect(store_opts);
        if (c.ok()) s = std::move(*c);
      }
      Tick(s.get());
      l.lock();
      tick_cv.wait_for(l, std::chrono::duration<double>(tick), [&] { return stopping; });
    }
  }
};

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Start(const SchedulerOptions& opts) {
  if (opts.db_url.empty()) return absl::InvalidArgumentError("db: a database URL is required");
  if (!(opts.lease_ttl_s > 0)) return absl::InvalidArgumentError("lease_ttl_s: must be > 0");
  auto creds = common::MakeServerCredentials(opts.tls_cert_file, opts.tls_key_file);
  if (!creds.ok()) return creds.status();
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->tokens = std::make_shared<const common::TokenSet>(opts.tokens);
  if (opts.tokens.open()) {
    std::fprintf(stderr, "touchstone-scheduler: no tokens configured: every caller may call "
                         "every method (open mode)\n");
  }
  if (!opts.alertmanager_url.empty()) {
    AlertmanagerOptions ao;
    ao.url = opts.alertmanager_url;
    ao.dashboard_url = opts.dashboard_url;
    ao.resend_s = opts.alert_resend_s;
    ao.retry_max_s = std::max(ao.retry_min_s, opts.alert_retry_max_s);
    auto d = AlertDelivery::Create(ao);
    if (!d.ok()) return d.status();
    impl->delivery = std::move(*d);
  }
  impl->store_opts.url = opts.db_url;
  impl->store_opts.lease_ttl_s = opts.lease_ttl_s;
  impl->store_opts.split_after_expiries = opts.split_after_expiries;
  impl->store_opts.max_lost_leases = opts.max_lost_leases;

  // The database may still be starting (or restarting): wait for it, then migrate.
  const auto deadline = Clock::now() + std::chrono::duration<double>(opts.db_wait_s);
  absl::Status st;
  for (;;) {
    auto s = store::Store::Connect(impl->store_opts);
    if (s.ok()) {
      st = (*s)->Migrate();
      if (st.ok()) break;
    } else {
      st = s.status();
    }
    if (st.code() != absl::StatusCode::kUnavailable || Clock::now() > deadline) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  impl->db_ok = true;
  impl->pool = std::make_unique<StorePool>(impl->store_opts, opts.db_threads, opts.queue_limit,
                                           /*nice=*/5);
  store::StoreOptions lease_opts = impl->store_opts;
  lease_opts.generic_plans = true;  // register, lease, heartbeat: a few short statements
  impl->lease_pool = std::make_unique<StorePool>(lease_opts, opts.lease_threads, opts.queue_limit);
  impl->query_pool = std::make_unique<StorePool>(impl->store_opts, std::max(1, opts.query_threads),
                                                 opts.queue_limit);

  // Every Query method reads results: reader (or admin); those that change alerts: admin.
  impl->query = std::make_unique<QueryService>(
      impl->query_pool.get(),
      common::MakeAdmitter(impl->tokens, Role::kReader, "touchstone.v1.Query"),
      common::MakeAdmitter(impl->tokens, Role::kAdmin, "touchstone.v1.Query"));

  grpc::EnableDefaultHealthCheckService(true);  // grpc.health.v1, answered without a token
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(opts.listen, *creds, &impl->grpc_port);
  builder.RegisterService(impl.get());
  builder.RegisterService(impl->query.get());
  builder.SetMaxReceiveMessageSize(64 << 20);
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->grpc_port == 0) {
    return absl::UnavailableError("grpc: cannot listen on " + opts.listen);
  }
  if (opts.http_port >= 0) {
    Impl* raw = impl.get();
    common::HttpServerOptions ho;
    ho.port = opts.http_port;
    ho.tokens = impl->tokens;
    auto http = common::HttpServer::Start(
        ho, {{"/metrics", raw->metrics.reg.Handler()},
             {"/healthz", [raw](const std::string&) {
                return raw->db_ok ? common::HttpResponse{200, "text/plain", "ok\n"}
                                  : common::HttpResponse{503, "text/plain", "database unreachable\n"};
              }}});
    if (!http.ok()) return http.status();
    impl->http = std::move(*http);
  }
  Impl* raw = impl.get();
  impl->ticker = std::thread([raw] { raw->TickLoop(); });
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

int Scheduler::grpc_port() const { return impl_->grpc_port; }
int Scheduler::http_port() const { return impl_->http ? impl_->http->port() : -1; }

void Scheduler::Shutdown() {
  if (impl_->shut.exchange(true)) return;
  {
    std::lock_guard<std::mutex> l(impl_->tick_mu);
    impl_->stopping = true;
  }
  impl_->tick_cv.notify_all();
  if (impl_->ticker.joinable()) impl_->ticker.join();
  if (impl_->http) impl_->http->Stop();
  // In-flight RPCs are answered by the pool, which is still running; watch streams end first.
  impl_->query->Shutdown();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  impl_->pool->Stop();
  impl_->lease_pool->Stop();
  impl_->query_pool->Stop();
}

Scheduler::~Scheduler() { Shutdown(); }

}  // namespace ts::scheduler
