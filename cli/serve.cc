#include "cli/serve.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/usage.h"
#include "services/cluster/local_cluster.h"

namespace ts::cli {
namespace {

std::atomic<bool> stop_requested{false};

}  // namespace

std::string ServingLine(const cluster::LocalCluster& c) {
  return "serving: grpc=" + c.target() + " http=127.0.0.1:" + std::to_string(c.http_port()) +
         " tokens=" + c.token_file();
}

namespace {

struct ServeFlags {
  cluster::LocalClusterOptions options;
};

int Serve(const ServeFlags& f) {
  cluster::LocalClusterOptions co = f.options;
  co.workers = 0;
  co.log_prefix = "touchstone serve";
  // A flag, not a blocked mask: the services we spawn must not inherit blocked signals.
  struct sigaction sa {};
  sa.sa_handler = [](int) { stop_requested = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  co.interrupted = &stop_requested;
  auto cluster = cluster::LocalCluster::Start(co);
  if (!cluster.ok()) return Fail(std::string(cluster.status().message()));
  std::printf("%s\n", ServingLine(**cluster).c_str());
  std::fflush(stdout);
  // Restarts the scheduler if it dies, until a signal.
  while (!stop_requested) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (absl::Status st = (*cluster)->Supervise(); !st.ok()) {
      return Fail(std::string(st.message()));
    }
  }
  std::fprintf(stderr, "touchstone serve: stopping\n");
  absl::Status st = (*cluster)->Stop();
  if (!st.ok()) return Fail(std::string(st.message()));
  return 0;
}

}  // namespace

void AddServeCommand(flags::Command& root) {
  auto f = std::make_shared<ServeFlags>();
  flags::Command& c =
      root.Add("serve",
               "the scheduler without workers over stored sweeps, for the query commands, release "
               "tooling and the HTTP pages",
               [f] { return Serve(*f); });
  c.Option("--state-dir", &f->options.state_dir, "DIR",
           "the embedded database of this state folder")
      .Dir();
  c.Option("--db", &f->options.db_url, "URL", "an existing PostgreSQL database instead")
      .Excludes("--state-dir");
  c.Option("--lease-ttl", &f->options.lease_ttl_s, "S", "the scheduler's lease time").Positive();
  c.Notes("prints 'serving: grpc=HOST:PORT http=HOST:PORT tokens=FILE'; Ctrl-C stops");
}

}  // namespace ts::cli
