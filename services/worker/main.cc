// touchstone-worker --scheduler HOST:PORT [--token-file F] [--tls-ca F] [--name N]
//                   [--runner PATH] [--state-dir DIR] [--http-port N] [--http-host H] [--report-batch N]
//                   [--weights-dir DIR] [--long-poll S]
// Token: the `worker` (else `admin`) line of --token-file (or its one bare token), else
// TOUCHSTONE_WORKER_TOKEN (else TOUCHSTONE_ADMIN_TOKEN), else none.
// SIGTERM or SIGINT: drain (finish the current model, report, release the shard) and exit 0.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "services/common/auth.h"
#include "services/common/process.h"
#include "services/worker/worker.h"

namespace {

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "touchstone-worker: %s\n"
               "usage: touchstone-worker --scheduler HOST:PORT [--token-file FILE] [--tls-ca FILE]\n"
               "         [--name NAME] [--runner PATH] [--state-dir DIR] [--http-port N]\n"
               "         [--http-host H]  (default 127.0.0.1; 0.0.0.0: scraped or probed from\n"
               "                          another host)\n"
               "         [--report-batch N] [--weights-dir DIR] [--long-poll SECONDS]\n"
               "  --long-poll   how long the scheduler may hold an idle lease call, answering\n"
               "                as soon as work is queued (default 10, at most 60; 0: poll\n"
               "                every 0.5 s)\n"
               "  --weights-dir a Hub-mirror folder: a model id with a checkpoint in DIR/<id>\n"
               "                runs on it (model.safetensors or its sharded index)\n"
               "  --references-dir  a folder of reference bundles shared with the sweep\n"
               "                (the embedded default's STATE/refs): stored ones are used,\n"
               "                computed ones stored; --references fresh: computed again\n"
               "  --token-file  the 'worker' (else 'admin') line of a tokens file, or a bare\n"
               "                token; without it TOUCHSTONE_WORKER_TOKEN\n"
               "  --tls-ca      TLS to the scheduler, trusting the CA certificates in FILE\n",
               why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using ts::common::Role::kAdmin;
  using ts::common::Role::kWorker;
  ts::worker::WorkerOptions o;
  o.token = ts::common::ClientTokenFromEnvironment({kWorker, kAdmin});
  o.runner_path = ts::common::SelfDir() + "/touchstone-runner";
  o.state_dir = "/tmp/touchstone-worker-" + std::to_string(::getpid());
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--scheduler" && has) {
      o.scheduler = argv[++i];
    } else if (a == "--token-file" && has) {
      auto token = ts::common::ReadClientToken(argv[++i], {kWorker, kAdmin});
      if (!token.ok()) return Usage("--token-file: " + std::string(token.status().message()));
      o.token = *token;
    } else if (a == "--tls-ca" && has) {
      o.tls_ca_file = argv[++i];
    } else if (a == "--name" && has) {
      o.name = argv[++i];
    } else if (a == "--runner" && has) {
      o.runner_path = argv[++i];
    } else if (a == "--state-dir" && has) {
      o.state_dir = argv[++i];
    } else if (a == "--weights-dir" && has) {
      o.weights_dir = argv[++i];
    } else if (a == "--references-dir" && has) {
      o.references_dir = argv[++i];
    } else if (a == "--references" && has) {
      const std::string v = argv[++i];
      if (v != "stored" && v != "fresh") return Usage("--references: 'stored' or 'fresh'");
      o.fresh_references = v == "fresh";
    } else if (a == "--http-port" && has) {
      o.http_port = std::atoi(argv[++i]);
    } else if (a == "--http-host" && has) {
      o.http_host = argv[++i];
    } else if (a == "--report-batch" && has) {
      o.report_batch = std::atoi(argv[++i]);
      if (o.report_batch < 1) return Usage("--report-batch: must be >= 1");
    } else if (a == "--long-poll" && has) {
      char* end = nullptr;
      o.long_poll_s = std::strtod(argv[++i], &end);
      if (end == argv[i] || *end != '\0' || !(o.long_poll_s >= 0 && o.long_poll_s <= 60)) {
        return Usage("--long-poll: seconds from 0 to 60");
      }
    } else {
      return Usage("unknown argument '" + a + "'");
    }
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
