#include "services/cluster/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "services/common/auth.h"
#include "services/common/http_server.h"
#include "services/common/process.h"
#include "services/store/embedded_postgres.h"

namespace ts::cluster {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxRestarts = 20;
// Below this much free space PostgreSQL cannot start a WAL segment (16 MiB) or extend a table
// for long: the data folder counts as full.
constexpr int64_t kLowSpaceBytes = int64_t{32} << 20;

// Bytes an unprivileged writer may still use on the file system holding `dir`; -1: unknown.
int64_t FreeBytes(const std::string& dir) {
  std::error_code ec;
  const fs::space_info s = fs::space(dir, ec);
  return ec ? -1 : static_cast<int64_t>(s.available);
}

std::string Mib(int64_t bytes) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return o.str();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

LocalCluster::LocalCluster(LocalClusterOptions opts) : opts_(std::move(opts)) {}

LocalCluster::~LocalCluster() { (void)Stop(); }

std::string LocalCluster::EmbeddedDataDir(const std::string& state_dir) {
  return (fs::absolute(state_dir) / "pg" / "data").string();
}

std::string LocalCluster::ReferencesDir(const std::string& state_dir) {
  return (fs::absolute(state_dir) / "refs").string();
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(LocalClusterOptions opts) {
  if (opts.workers < 0) return absl::InvalidArgumentError("workers: must be >= 0");
  std::error_code ec;
  fs::create_directories(fs::path(opts.state_dir) / "logs", ec);
  if (ec) return absl::InvalidArgumentError("state folder " + opts.state_dir + ": " + ec.message());
  if (opts.bin_dir.empty()) opts.bin_dir = common::SelfDir();
  std::unique_ptr<LocalCluster> c(new LocalCluster(std::move(opts)));
  c->state_ = fs::absolute(c->opts_.state_dir).string();
  // On an error the cluster is destroyed here, which stops what was started.
  if (auto st = c->StartDatabase(); !st.ok()) return st;
  if (auto st = c->StartScheduler(); !st.ok()) return st;
  return c;
}

absl::Status LocalCluster::StartDatabase() {
  db_url_ = opts_.db_url;
  if (!db_url_.empty()) return absl::OkStatus();
  store::EmbeddedPostgresOptions po;
  po.data_dir = EmbeddedDataDir(state_);
  po.fast_unsafe = opts_.fast_unsafe;
  Notice("starting embedded PostgreSQL under " + po.data_dir);
  auto pg = store::EmbeddedPostgres::Start(po);
  if (!pg.ok()) return pg.status();
  pg_ = std::move(*pg);
  db_url_ = pg_->url();
  return absl::OkStatus();
}

absl::Status LocalCluster::StartScheduler() {
  // Tokens of the private services: the scheduler reads them all, each worker its `worker`
  // line, the caller's SweepDriver gets the admin one.
  token_file_ = state_ + "/tokens";
  auto tokens = common::LoadOrMakeTokensFile(token_file_);
  if (!tokens.ok()) return tokens.status();
  token_ = (*tokens)[common::Role::kAdmin];
  worker_token_ = (*tokens)[common::Role::kWorker];
  reader_token_ = (*tokens)[common::Role::kReader];
  port_file_ = state_ + "/scheduler.ports";
  std::error_code ec;
  fs::remove(port_file_, ec);
  // argv[4] is the listen address: port 0 at first, the port it got on every restart.
  scheduler_.argv = {opts_.bin_dir + "/touchstone-scheduler",
                     "--db",
                     db_url_,
                     "--listen",
                     "127.0.0.1:0",
                     "--http-port",
                     "0",
                     "--token-file",
                     token_file_,
                     "--port-file",
                     port_file_,
                     "--lease-ttl",
                     std::to_string(opts_.lease_ttl_s)};
  scheduler_.log = state_ + "/logs/scheduler.log";
  if (auto st = Launch(&scheduler_); !st.ok()) return st;
  if (auto st = WaitForScheduler(); !st.ok()) return st;
  return absl::OkStatus();
}

absl::Status LocalCluster::WaitForScheduler() {
  int grpc_port = 0;
  for (int i = 0; i < 1200; ++i) {
    if (fs::exists(port_file_)) {
      auto j = nlohmann::json::parse(ReadAll(port_file_), nullptr, false);
      if (!j.is_discarded()) {
        grpc_port = j.value("grpc_port", 0);
        http_port_ = j.value("http_port", 0);
      }
    }
    if (grpc_port != 0) {
      target_ = "127.0.0.1:" + std::to_string(grpc_port);
      return absl::OkStatus();
    }
    const bool interrupted = opts_.interrupted != nullptr && opts_.interrupted->load();
    if (common::WaitFor(scheduler_.pid, 0).exited) {
      scheduler_.pid = -1;
      return absl::UnavailableError("the scheduler did not start; see " + scheduler_.log);
    }
    if (interrupted) {
      return absl::UnavailableError("the scheduler did not start; see " + scheduler_.log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError("the scheduler did not report its port in 60 s; see " +
                                     scheduler_.log);
}

absl::Status LocalCluster::Launch(Service* s) {
  common::SpawnOptions o;
  o.log_path = s->log;
  // Their own process group: a terminal's Ctrl-C reaches only the owner, which then stops the
  // workers (they drain and release their shards) before the scheduler.
  o.new_process_group = true;
  auto pid = common::Spawn(s->argv, o);
  if (!pid.ok()) return pid.status();
  s->pid = *pid;
  return absl::OkStatus();
}

absl::Status LocalCluster::StartWorkers() {
  const std::string name = "sweep-" + std::to_string(::getpid());
  for (int i = 0; i < opts_.workers; ++i) {
    const std::string n = std::to_string(i);
    Service w;
    w.argv = {opts_.bin_dir + "/touchstone-worker",
              "--scheduler",
              target_,
              "--token-file",
              token_file_,
              "--name",
              name + "/w" + n,
              "--state-dir",
              state_ + "/workers/w" + n,
              "--http-port",
              "-1",
              "--references-dir",
              ReferencesDir(state_),
              "--references",
              opts_.references};
    w.log = state_ + "/logs/worker-" + n + ".log";
    if (auto st = Launch(&w); !st.ok()) return st;
    workers_.push_back(std::move(w));
  }
  return absl::OkStatus();
}

std::string LocalCluster::DiskFull() const {
  if (pg_ == nullptr) return "";
  const int64_t free = FreeBytes(pg_->data_dir());
  if (free < 0 || free >= kLowSpaceBytes) return "";
  return "the embedded PostgreSQL's data folder " + pg_->data_dir() + " is full (" + Mib(free) +
         " free): free space there and the sweep carries on; every committed result is kept";
}

absl::Status LocalCluster::Supervise() {
  // The embedded PostgreSQL first: the services cannot do anything without it.
  if (pg_ != nullptr && !pg_->Alive()) {
    // A full disk stopped it (a WAL write failing is a PANIC): starting it again cannot work
    // until there is space. Wait for it, saying so once; Follow's limit on a scheduler that
    // cannot answer ends the wait with an error if nobody frees any.
    if (const std::string full = DiskFull(); !full.empty()) {
      if (!waiting_for_space_ && opts_.notices != nullptr) {
        std::fprintf(opts_.notices, "\n%s: %s\n", opts_.log_prefix.c_str(), full.c_str());
      }
      waiting_for_space_ = true;
      return absl::OkStatus();
    }
    waiting_for_space_ = false;
    ++db_restarts_;
    if (opts_.notices != nullptr) {
      std::fprintf(opts_.notices,
                   "\n%s: the embedded PostgreSQL under %s stopped; restarting it (crash "
                   "recovery keeps every committed result)\n",
                   opts_.log_prefix.c_str(), pg_->data_dir().c_str());
    }
    if (db_restarts_ > kMaxRestarts) {
      return absl::UnavailableError("the embedded PostgreSQL keeps dying; see " +
                                    pg_->data_dir() + "/server.log");
    }
    if (auto st = pg_->RecoverAfterCrash(); !st.ok()) {
      return absl::UnavailableError("the embedded PostgreSQL stopped and cannot start again: " +
                                    std::string(st.message()));
    }
  }
  std::vector<Service*> services = {&scheduler_};
  for (auto& w : workers_) services.push_back(&w);
  for (Service* s : services) {
    if (s->pid <= 0) continue;
    const common::ExitInfo e = common::WaitFor(s->pid, 0);
    if (!e.exited) continue;
    ++s->restarts;
    if (opts_.notices != nullptr) {
      std::fprintf(opts_.notices, "\n%s: %s exited (code %d, signal %d); restarting\n",
                   opts_.log_prefix.c_str(), s->argv[0].c_str(), e.code, e.signal);
    }
    // Same port as before, so that the workers reconnect to it.
    if (s == &scheduler_) scheduler_.argv[4] = target_;
    if (s->restarts > kMaxRestarts || !Launch(s).ok()) {
      s->pid = -1;
      return absl::UnavailableError(s->argv[0] + " keeps dying; see " + s->log);
    }
  }
  return absl::OkStatus();
}

std::string LocalCluster::Diagnose() const {
  if (std::string full = DiskFull(); !full.empty()) return full;
  if (pg_ != nullptr && !pg_->Alive()) return "the embedded PostgreSQL is down";
  if (scheduler_.pid <= 0) return "the scheduler is not running";
  int alive = 0;
  for (const auto& w : workers_) alive += w.pid > 0 && ::kill(w.pid, 0) == 0 ? 1 : 0;
  if (opts_.workers > 0 && alive == 0) return "no worker is alive";
  auto health = common::HttpGet(http_port_, "/healthz");
  if (!health.ok()) return "the scheduler does not answer on its HTTP port";
  if (health->status != 200) return "the scheduler cannot reach its database";
  return std::to_string(alive) + " workers alive; the models in flight are still running (see " +
         state_ + "/logs)";
}

absl::Status LocalCluster::RestartScheduler(double grace_s) {
  if (scheduler_.pid > 0) {
    if (grace_s > 0) {
      common::Stop(scheduler_.pid, grace_s);
    } else {
      ::kill(scheduler_.pid, SIGKILL);
      common::WaitFor(scheduler_.pid, 30);
    }
    scheduler_.pid = -1;
  }
  ++scheduler_.restarts;
  scheduler_.argv[4] = target_;
  std::error_code ec;
  fs::remove(port_file_, ec);
  if (auto st = Launch(&scheduler_); !st.ok()) return st;
  return WaitForScheduler();
}

void LocalCluster::StopWorkers() {
  for (auto& w : workers_) {
    if (w.pid > 0) ::kill(w.pid, SIGTERM);
  }
  for (auto& w : workers_) {
    if (w.pid <= 0) continue;
    if (!common::WaitFor(w.pid, 30).exited) common::Stop(w.pid, 1);
    w.pid = -1;
  }
}

absl::Status LocalCluster::Stop() {
  StopWorkers();
  if (scheduler_.pid > 0) common::Stop(scheduler_.pid, 15);
  scheduler_.pid = -1;
  absl::Status st;
  if (pg_ != nullptr) {
    st = pg_->Stop();
    pg_.reset();
  }
  return st;
}

int LocalCluster::worker_restarts() const {
  int n = 0;
  for (const auto& w : workers_) n += w.restarts;
  return n;
}

std::vector<pid_t> LocalCluster::worker_pids() const {
  std::vector<pid_t> pids;
  for (const auto& w : workers_) pids.push_back(w.pid);
  return pids;
}

void LocalCluster::Notice(const std::string& text) const {
  if (opts_.notices == nullptr) return;
  std::fprintf(opts_.notices, "%s: %s\n", opts_.log_prefix.c_str(), text.c_str());
}

}  // namespace ts::cluster
