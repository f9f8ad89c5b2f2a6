// touchstone-scheduler --db URL [--listen HOST:PORT] ...: `touchstone-scheduler --help` lists the
// flags (declared below). Tokens: --token-file (`role token` lines, mode 0600;
// services/common/auth.h), else the TOUCHSTONE_{WORKER,READER,ADMIN}_TOKEN variables, else none
// (open; logged). Serves until SIGTERM or SIGINT, then shuts down in order (scheduler.h).
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "services/common/flags.h"
#include "services/scheduler/scheduler.h"

int main(int argc, char** argv) {
  ts::scheduler::SchedulerOptions o;
  o.listen = "127.0.0.1:7300";
  std::string port_file;
  std::string token_file;
  ts::flags::Program p("touchstone-scheduler",
                       "the scheduler: leases shards of sweeps to workers, stores their results, "
                       "serves the Query API, /metrics, /healthz and the web dashboard");
  p.Option("--db", &o.db_url, "URL", "the PostgreSQL database").Required();
  p.Option("--listen", &o.listen, "HOST:PORT", "the gRPC address (port 0: a free one)");
  p.Option("--http-port", &o.http_port, "N",
           "/metrics, /healthz, the dashboard (0: free, -1: none)")
      .Range(-1, 65535);
  p.Option("--http-host", &o.http_host, "HOST",
           "the HTTP listener's address (0.0.0.0 lets Prometheus on another host scrape)");
  p.Option("--token-file", &token_file, "FILE",
           "'role token' lines (worker, reader, admin), mode 0600; a file of one bare token is an "
           "admin token. Without it: TOUCHSTONE_WORKER_TOKEN, _READER_TOKEN, _ADMIN_TOKEN")
      .File();
  p.Flag("--insecure", &o.insecure, "allow a non-loopback --listen or --http-host without tokens");
  p.Option("--tls-cert", &o.tls_cert_file, "FILE",
           "PEM certificate chain: TLS on the gRPC port and HTTPS on the HTTP port (dashboard, "
           "/metrics, /healthz)")
      .File();
  p.Option("--tls-key", &o.tls_key_file, "FILE", "... and its key").File();
  p.Option("--lease-ttl", &o.lease_ttl_s, "SECONDS", "a lease not heartbeated this long expires")
      .Positive();
  p.Option("--startup-grace", &o.startup_grace_s, "SECONDS",
           "leases run at least this long after a start or a database outage before they may "
           "expire")
      .Positive()
      .Default("max(10, 2 x lease TTL)");
  p.Option("--db-threads", &o.db_threads, "N", "database threads for reports and sweeps").Min(1);
  p.Option("--port-file", &port_file, "FILE",
           "write {\"grpc_port\": N, \"http_port\": N} there once listening")
      .File();
  p.Option("--alertmanager", &o.alertmanager_url, "http://HOST:PORT", "deliver alerts there");
  p.Option("--dashboard-url", &o.dashboard_url, "URL", "the dashboard's address in alerts");
  p.Option("--chart-js", &o.chart_js, "FILE", "the web dashboard's Chart.js")
      .File()
      .Default("Debian's /usr/share/javascript/chart.js/chart.min.js");
  p.Notes("Serves until SIGTERM or SIGINT, then shuts down in order.");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto tokens = token_file.empty() ? ts::common::TokenSet::FromEnvironment()
                                   : ts::common::TokenSet::FromFile(token_file);
  if (!tokens.ok()) {
    std::fprintf(stderr, "touchstone-scheduler: refusing to start: %s\n",
                 std::string(tokens.status().message()).c_str());
    return 2;
  }
  o.tokens = std::move(*tokens);
  // Signals are taken synchronously by this thread; block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  auto s = ts::scheduler::Scheduler::Start(o);
  if (!s.ok()) {
    std::fprintf(stderr, "touchstone-scheduler: %s\n", s.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "touchstone-scheduler: grpc on port %d, http on port %d\n",
               (*s)->grpc_port(), (*s)->http_port());
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    {
      std::ofstream out(tmp);
      out << "{\"grpc_port\": " << (*s)->grpc_port() << ", \"http_port\": " << (*s)->http_port()
          << "}\n";
    }
    std::rename(tmp.c_str(), port_file.c_str());
  }
  int sig = 0;
  sigwait(&set, &sig);
  std::fprintf(stderr, "touchstone-scheduler: signal %d, shutting down\n", sig);
  (*s)->Shutdown();
  return 0;
}
