#include "cli/serve.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/usage.h"
#include "services/cluster/local_cluster.h"

namespace ts::cli {
namespace {

constexpr CommandText kServe = {
    "touchstone", "touchstone serve",
    "usage: touchstone serve [--state-dir DIR | --db URL] [--lease-ttl S]\n"
    "  prints 'serving: grpc=HOST:PORT http=HOST:PORT tokens=FILE'; Ctrl-C stops\n"};

std::atomic<bool> stop_requested{false};

}  // namespace

std::string ServingLine(const cluster::LocalCluster& c) {
  return "serving: grpc=" + c.target() + " http=127.0.0.1:" + std::to_string(c.http_port()) +
         " tokens=" + c.token_file();
}

int ServeCommand(const std::vector<std::string>& args) {
  cluster::LocalClusterOptions co;
  co.workers = 0;
  co.log_prefix = "touchstone serve";
  bool state_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has = i + 1 < args.size();
    if (a == "--state-dir" && has) {
      co.state_dir = args[++i];
      state_given = true;
    } else if (a == "--db" && has) {
      co.db_url = args[++i];
    } else if (a == "--lease-ttl" && has) {
      co.lease_ttl_s = std::atof(args[++i].c_str());
      if (!(co.lease_ttl_s > 0)) return Usage(kServe, "--lease-ttl: seconds > 0");
    } else {
      return Usage(kServe, "serve: unknown argument '" + a + "'");
    }
  }
  if (state_given && !co.db_url.empty()) {
    return Usage(kServe, "serve: --state-dir and --db exclude each other");
  }
  // A flag, not a blocked mask: the services we spawn must not inherit blocked signals.
  struct sigaction sa {};
  sa.sa_handler = [](int) { stop_requested = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  co.interrupted = &stop_requested;
  auto cluster = cluster::LocalCluster::Start(co);
  if (!cluster.ok()) return Fail(kServe, std::string(cluster.status().message()));
  std::printf("%s\n", ServingLine(**cluster).c_str());
  std::fflush(stdout);
  // Restarts the scheduler if it dies, until a signal.
  while (!stop_requested) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (absl::Status st = (*cluster)->Supervise(); !st.ok()) {
      return Fail(kServe, std::string(st.message()));
    }
  }
  std::fprintf(stderr, "touchstone serve: stopping\n");
  absl::Status st = (*cluster)->Stop();
  if (!st.ok()) return Fail(kServe, std::string(st.message()));
  return 0;
}

}  // namespace ts::cli
