// touchstone-worker --scheduler HOST:PORT ...: `touchstone-worker --help` lists the flags
// (declared below). Token: the `worker` (else `admin`) line of --token-file (or its one bare
// token), else TOUCHSTONE_WORKER_TOKEN (else TOUCHSTONE_ADMIN_TOKEN), else none.
// SIGTERM or SIGINT: drain (finish the current model, report, release the shard) and exit 0.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "services/common/auth.h"
#include "services/common/flags.h"
#include "services/common/process.h"
#include "services/worker/worker.h"

int main(int argc, char** argv) {
  using ts::common::Role::kAdmin;
  using ts::common::Role::kWorker;
  ts::worker::WorkerOptions o;
  o.runner_path = ts::common::SelfDir() + "/touchstone-runner";
  o.state_dir = "/tmp/touchstone-worker-" + std::to_string(::getpid());
  std::string token_file;
  ts::flags::Program p("touchstone-worker",
                       "leases shards from a scheduler and runs their models in touchstone-runner "
                       "children");
  p.Option("--scheduler", &o.scheduler, "HOST:PORT", "the scheduler");
  p.Option("--token-file", &token_file, "FILE",
           "the 'worker' (else 'admin') line of a tokens file, or a bare token; without it "
           "TOUCHSTONE_WORKER_TOKEN (else TOUCHSTONE_ADMIN_TOKEN)")
      .File();
  p.Option("--tls-ca", &o.tls_ca_file, "FILE",
           "TLS to the scheduler, trusting the CA certificates in FILE")
      .File();
  p.Option("--name", &o.name, "NAME", "the worker's name (default: host/pid)");
  p.Option("--runner", &o.runner_path, "PATH", "touchstone-runner").File();
  p.Option("--state-dir", &o.state_dir, "DIR", "profiles and the runner's log").Dir();
  p.Option("--http-port", &o.http_port, "N", "/metrics and /healthz (0: a free one, -1: none)")
      .Range(-1, 65535);
  p.Option("--http-host", &o.http_host, "H",
           "the HTTP listener's address (0.0.0.0: scraped or probed from another host)");
  p.Option("--report-batch", &o.report_batch, "N", "results per ReportResults").Min(1);
  p.Option("--weights-dir", &o.weights_dir, "DIR",
           "a Hub-mirror folder: a model id with a checkpoint in DIR/<id> runs on it "
           "(model.safetensors or its sharded index)")
      .Dir();
  p.Option("--long-poll", &o.long_poll_s, "SECONDS",
           "how long the scheduler may hold an idle lease call, answering as soon as work is "
           "queued (0: poll every 0.5 s)")
      .Range(0, 60);
  p.Notes(
      "SIGTERM or SIGINT: drain (finish the current model, report, release the shard), exit 0.");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  if (token_file.empty()) {
    o.token = ts::common::ClientTokenFromEnvironment({kWorker, kAdmin});
  } else {
    auto token = ts::common::ReadClientToken(token_file, {kWorker, kAdmin});
    if (!token.ok()) return p.UsageError("--token-file: " + std::string(token.status().message()));
    o.token = *token;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  auto w = ts::worker::Worker::Create(o);
  if (!w.ok()) {
    std::fprintf(stderr, "touchstone-worker: %s\n", w.status().ToString().c_str());
    return 2;
  }
  ts::worker::Worker* raw = w->get();
  std::thread signals([raw, set] {
    int sig = 0;
    sigwait(&set, &sig);
    std::fprintf(stderr, "touchstone-worker: signal %d, draining\n", sig);
    raw->Drain();
  });
  signals.detach();
  absl::Status st = raw->Run();
  if (!st.ok()) {
    std::fprintf(stderr, "touchstone-worker: %s\n", st.ToString().c_str());
    std::_Exit(1);
  }
  std::fprintf(stderr, "touchstone-worker: drained\n");
  std::_Exit(0);  // the signal thread may still be waiting; nothing left to flush
}
