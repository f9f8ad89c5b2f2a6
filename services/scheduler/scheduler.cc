#include "services/scheduler/scheduler.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "services/common/field_limits.h"
#include "services/common/tls.h"
#include "services/scheduler/dashboard_http.h"
#include "services/scheduler/scheduler_impl.h"

namespace ts::scheduler {
namespace {

// The role each method needs; admin may call them all (services/common/auth.h).
constexpr std::pair<std::string_view, Role> kMethodRoles[] = {
    {"RegisterWorker", Role::kWorker}, {"LeaseShard", Role::kWorker},
    {"Heartbeat", Role::kWorker},      {"ReportResults", Role::kWorker},
    {"FinishShard", Role::kWorker},    {"GetSweep", Role::kReader},
    {"ListResults", Role::kReader},    {"UpsertModels", Role::kAdmin},
    {"CreateSweep", Role::kAdmin},     {"CancelSweep", Role::kAdmin},
    {"AddSchedule", Role::kAdmin},     {"ListSchedules", Role::kAdmin},
    {"RemoveSchedule", Role::kAdmin},  {"SetScheduleEnabled", Role::kAdmin}};

// The host of "HOST:PORT", "[V6]:PORT" or "unix:PATH" ("" for a unix socket: local).
std::string HostOf(const std::string& address) {
  if (address.rfind("unix:", 0) == 0) return "";
  if (!address.empty() && address[0] == '[') return address.substr(1, address.find(']') - 1);
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

bool IsLoopback(const std::string& host) {
  return host.empty() || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Open mode (no tokens) is for one machine: a listener others can reach needs tokens, or the
// operator's explicit --insecure.
absl::Status CheckExposure(const SchedulerOptions& opts) {
  if (!opts.tokens.open() || opts.insecure) return absl::OkStatus();
  const auto refuse = [](const std::string& field, const std::string& value) {
    return absl::InvalidArgumentError(
        field + ": '" + value +
        "' is not a loopback address and no tokens are configured, so "
        "anyone who reaches it could create and cancel sweeps; give tokens (--token-file) or "
        "--insecure");
  };
  if (!IsLoopback(HostOf(opts.listen))) return refuse("listen", opts.listen);
  if (opts.http_port >= 0 && !IsLoopback(opts.http_host))
    return refuse("http_host", opts.http_host);
  return absl::OkStatus();
}

}  // namespace

std::optional<Role> SchedulerMethodRole(std::string_view method) {
  for (const auto& [name, role] : kMethodRoles) {
    if (name == method) return role;
  }
  return std::nullopt;
}

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

using Impl = Scheduler::Impl;

absl::Status CheckOptions(const SchedulerOptions& opts) {
  if (opts.db_url.empty()) return absl::InvalidArgumentError("db: a database URL is required");
  if (!(opts.lease_ttl_s > 0)) return absl::InvalidArgumentError("lease_ttl_s: must be > 0");
  return CheckExposure(opts);
}

// Alertmanager delivery (alert_delivery.h); none without alertmanager_url.
absl::StatusOr<std::unique_ptr<AlertDelivery>> MakeDelivery(const SchedulerOptions& opts) {
  if (opts.alertmanager_url.empty()) return std::unique_ptr<AlertDelivery>();
  AlertmanagerOptions ao;
  ao.url = opts.alertmanager_url;
  ao.dashboard_url = opts.dashboard_url;
  ao.resend_s = opts.alert_resend_s;
  ao.retry_max_s = std::max(ao.retry_min_s, opts.alert_retry_max_s);
  return AlertDelivery::Create(ao);
}

store::StoreOptions StoreOptionsOf(const SchedulerOptions& opts) {
  store::StoreOptions so;
  so.url = opts.db_url;
  so.lease_ttl_s = opts.lease_ttl_s;
  so.split_after_expiries = opts.split_after_expiries;
  so.max_lost_leases = opts.max_lost_leases;
  so.quarantine_after = opts.quarantine_after;
  so.quarantine_window_s = opts.quarantine_window_s;
  so.quarantine_s = opts.quarantine_s;
  so.perf_threshold = opts.perf_threshold;
  return so;
}

// The database may still be starting (or restarting): waits up to wait_s for it while it is
// UNAVAILABLE, then migrates.
absl::Status WaitAndMigrate(const store::StoreOptions& so, double wait_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait_s);
  for (;;) {
    absl::Status st;
    auto s = store::Store::Connect(so);
    if (s.ok()) {
      st = (*s)->Migrate();
      if (st.ok()) return st;
    } else {
      st = s.status();
    }
    if (st.code() != absl::StatusCode::kUnavailable || Clock::now() > deadline) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

// The three database pools and the Query service on the query pool.
void StartPools(Impl* impl) {
  const SchedulerOptions& opts = impl->opts;
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
}

absl::Status StartGrpc(Impl* impl, const std::shared_ptr<grpc::ServerCredentials>& creds) {
  grpc::EnableDefaultHealthCheckService(true);  // grpc.health.v1, answered without a token
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(impl->opts.listen, creds, &impl->grpc_port);
  builder.RegisterService(impl);
  builder.RegisterService(impl->query.get());
  builder.SetMaxReceiveMessageSize(common::kMaxRequestBytes);
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->grpc_port == 0) {
    return absl::UnavailableError("grpc: cannot listen on " + impl->opts.listen);
  }
  return absl::OkStatus();
}

// /metrics, /healthz (503 while the database is unreachable) and the web dashboard
// (dashboard_http.h), which reads through the Query service in process.
absl::Status StartHttp(Impl* impl) {
  const SchedulerOptions& opts = impl->opts;
  common::HttpServerOptions ho;
  ho.host = opts.http_host;
  ho.port = opts.http_port;
  ho.tokens = impl->tokens;
  // One certificate for both ports: with TLS on, the dashboard (its login token), /metrics
  // and /healthz are HTTPS too.
  ho.tls_cert_file = opts.tls_cert_file;
  ho.tls_key_file = opts.tls_key_file;
  ConfigureDashboardServer(&ho);
  DashboardOptions dash;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  dash.channel = impl->server->InProcessChannel(args);
  dash.tokens = impl->tokens;
  if (!opts.chart_js.empty()) dash.chart_js = opts.chart_js;
  auto http = common::HttpServer::Start(
      ho,
      {{"/metrics", impl->metrics.reg.Handler()},
       {"/healthz",
        [impl](const std::string&) {
          return impl->db_ok ? common::HttpResponse{200, "text/plain", "ok\n"}
                             : common::HttpResponse{503, "text/plain", "database unreachable\n"};
        }}},
      DashboardRoutes(dash));
  if (!http.ok()) return http.status();
  impl->http = std::move(*http);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Start(const SchedulerOptions& opts) {
  if (auto st = CheckOptions(opts); !st.ok()) return st;
  auto creds = common::MakeServerCredentials(opts.tls_cert_file, opts.tls_key_file);
  if (!creds.ok()) return creds.status();
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->tokens = std::make_shared<const common::TokenSet>(opts.tokens);
  if (opts.tokens.open()) {
    std::fprintf(stderr,
                 "touchstone-scheduler: no tokens configured: every caller may call "
                 "every method (open mode)\n");
  }
  auto delivery = MakeDelivery(opts);
  if (!delivery.ok()) return delivery.status();
  impl->delivery = std::move(*delivery);
  impl->store_opts = StoreOptionsOf(opts);
  if (auto st = WaitAndMigrate(impl->store_opts, opts.db_wait_s); !st.ok()) return st;
  impl->db_ok = true;
  StartPools(impl.get());
  if (auto st = StartGrpc(impl.get(), *creds); !st.ok()) return st;
  if (opts.http_port >= 0) {
    if (auto st = StartHttp(impl.get()); !st.ok()) return st;
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
  impl_->EndParked(/*closing=*/true);  // long polls are answered "nothing", none parks again
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  impl_->pool->Stop();
  impl_->lease_pool->Stop();
  impl_->query_pool->Stop();
}

Scheduler::~Scheduler() { Shutdown(); }

}  // namespace ts::scheduler
