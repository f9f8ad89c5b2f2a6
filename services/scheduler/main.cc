// touchstone-scheduler --db URL [--listen HOST:PORT] [--http-port N] [--http-host H]
//                      [--token-file F] [--insecure] [--tls-cert F --tls-key F]
//                      [--lease-ttl S] [--startup-grace S] [--db-threads N]
//                      [--port-file F] [--alertmanager http://HOST:PORT] [--dashboard-url U]
//                      [--chart-js FILE]
// Tokens: --token-file (`role token` lines, mode 0600; services/common/auth.h), else the
// TOUCHSTONE_{WORKER,READER,ADMIN}_TOKEN variables, else none (open; logged).
// Serves until SIGTERM or SIGINT, then shuts down in order (scheduler.h).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "services/scheduler/scheduler.h"

namespace {

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "touchstone-scheduler: %s\n"
               "usage: touchstone-scheduler --db URL [--listen HOST:PORT] [--http-port N]\n"
               "         [--http-host HOST] [--token-file FILE] [--insecure]\n"
               "         [--tls-cert FILE --tls-key FILE] [--lease-ttl SECONDS]\n"
               "         [--startup-grace SECONDS] [--db-threads N] [--port-file FILE]\n"
               "         [--alertmanager http://HOST:PORT] [--dashboard-url URL]\n"
               "         [--chart-js FILE]  (the web dashboard's Chart.js; default: Debian's\n"
               "                            /usr/share/javascript/chart.js/chart.min.js)\n"
               "  --token-file  'role token' lines (worker, reader, admin), mode 0600; a file\n"
               "                of one bare token is an admin token. Without it:\n"
               "                TOUCHSTONE_WORKER_TOKEN, _READER_TOKEN, _ADMIN_TOKEN.\n"
               "  --http-host   the HTTP listener's address (default 127.0.0.1; 0.0.0.0 lets\n"
               "                Prometheus on another host scrape /metrics)\n"
               "  --insecure    allow a non-loopback --listen or --http-host without tokens\n"
               "  --tls-cert/--tls-key  PEM certificate chain and key: TLS on the gRPC port\n"
               "                and HTTPS on the HTTP port (dashboard, /metrics, /healthz)\n"
               "  --startup-grace  leases run at least this long after a start or a database\n"
               "                outage before they may expire (default max(10, 2 x lease TTL))\n",
               why.c_str());
  return 2;
}

bool ParseDouble(const std::string& s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end && *end == '\0' && !s.empty();
}

}  // namespace

int main(int argc, char** argv) {
  ts::scheduler::SchedulerOptions o;
  o.listen = "127.0.0.1:7300";
  std::string port_file;
  std::string token_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    double v = 0;
    if (a == "--db" && has) {
      o.db_url = argv[++i];
    } else if (a == "--listen" && has) {
      o.listen = argv[++i];
    } else if (a == "--http-port" && has) {
      if (!ParseDouble(argv[++i], &v)) return Usage("--http-port: not a number");
      o.http_port = static_cast<int>(v);
    } else if (a == "--http-host" && has) {
      o.http_host = argv[++i];
    } else if (a == "--insecure") {
      o.insecure = true;
    } else if (a == "--startup-grace" && has) {
      if (!ParseDouble(argv[++i], &o.startup_grace_s) || o.startup_grace_s <= 0) {
        return Usage("--startup-grace: must be a positive number of seconds");
      }
    } else if (a == "--token-file" && has) {
      token_file = argv[++i];
    } else if (a == "--tls-cert" && has) {
      o.tls_cert_file = argv[++i];
    } else if (a == "--tls-key" && has) {
      o.tls_key_file = argv[++i];
    } else if (a == "--lease-ttl" && has) {
      if (!ParseDouble(argv[++i], &o.lease_ttl_s) || o.lease_ttl_s <= 0) {
        return Usage("--lease-ttl: must be a positive number of seconds");
      }
    } else if (a == "--db-threads" && has) {
      if (!ParseDouble(argv[++i], &v) || v < 1) return Usage("--db-threads: must be >= 1");
      o.db_threads = static_cast<int>(v);
    } else if (a == "--alertmanager" && has) {
      o.alertmanager_url = argv[++i];
    } else if (a == "--dashboard-url" && has) {
      o.dashboard_url = argv[++i];
    } else if (a == "--chart-js" && has) {
      o.chart_js = argv[++i];
    } else if (a == "--port-file" && has) {
      port_file = argv[++i];
    } else {
      return Usage("unknown argument '" + a + "'");
    }
  }
  if (o.db_url.empty()) return Usage("--db is required");
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
