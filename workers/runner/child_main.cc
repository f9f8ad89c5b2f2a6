// touchstone-runner: the runner child a worker feeds over a pipe (DESIGN.md §6, "Worker").
//
//   touchstone-runner --profile FILE
//
// stdin, one JSON object a line: {"job_id", "model_id", "config", "arch", "task", "modes": [...],
// "seed", "audit_ops", "checkpoint_dir", "weights_dir" (a Hub-mirror folder: the model id's
// checkpoint under it, when it holds one), "references_dir" (a folder of reference bundles:
// workers/refs/store.h), "references" ("stored", the default: use a stored bundle of the run's
// key; "fresh": compute them again and store them)}.
// The protocol (workers/runner/protocol.h) goes out on the original stdout: "ready" once the
// profile is active, then per job "stage NAME" lines, "model JSON", and the result record
// (touchstone.v1.ModelResult, every mode the engine reports) as a length-prefixed frame; "error
// TEXT" for a job line it cannot read. Anything else the process prints to stdout (library
// chatter) is sent to stderr so it cannot corrupt the protocol. The process exits when stdin closes, or with its parent (PR_SET_PDEATHSIG); it
// ignores SIGINT.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "services/common/flags.h"
#include "workers/engine/engine.h"
#include "workers/runner/protocol.h"
#include "workers/runner/record.h"
#include "workers/runner/reference_store.h"
#include "workers/simdevice/runtime.h"
#include "workers/zoo/safetensors.h"

namespace {

int proto_fd = -1;

void Send(const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(proto_fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(0);  // the worker is gone
    off += static_cast<size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string profile_path;
  ts::flags::Program p("touchstone-runner",
                       "the worker's model-running child: job lines (JSON) on stdin, the "
                       "runner protocol on stdout (workers/runner/README.md)");
  p.Option("--profile", &profile_path, "FILE", "the device profile to activate").File();
  p.Notes("Started by touchstone-worker, not by hand: stdout carries length-prefixed records.");
  if (auto rc = p.Parse(argc, argv)) return *rc;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Ctrl-C in a terminal reaches the whole process group: the worker drains and then closes
  // our stdin; dying here would turn the model in flight into a false `crash` verdict.
  ::signal(SIGINT, SIG_IGN);
  proto_fd = ::dup(1);
  ::dup2(2, 1);
  ts::engine::ConfigureThreads(1);
  if (!profile_path.empty()) {
    auto act = ts::simdevice::ActivateFile(profile_path, 0);
    if (!act.ok()) {
      Send(ts::runner::ErrorLine("profile " + profile_path + ": " + act.status().message()));
      return 3;
    }
  }
  Send(ts::runner::ReadyLine());
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    auto job = nlohmann::json::parse(line, nullptr, false);
    if (job.is_discarded() || !job.is_object() || !job.contains("config")) {
      Send(ts::runner::ErrorLine("job line is not a JSON object with a config"));
      continue;
    }
    ts::engine::RunOptions o;
    o.arch = job.value("arch", std::string());
    o.seed = job.value("seed", uint64_t{0});
    o.audit_ops = job.value("audit_ops", false);
    o.model_id = job.value("model_id", std::string());
    o.checkpoint_dir = job.value("checkpoint_dir", std::string());
    if (o.checkpoint_dir.empty()) {
      o.checkpoint_dir =
          ts::zoo::CheckpointDirFor(job.value("weights_dir", std::string()), o.model_id);
    }
    if (job.contains("modes") && job["modes"].is_array()) {
      o.modes.clear();
      for (const auto& m : job["modes"]) {
        if (m.is_string()) o.modes.insert(m.get<std::string>());
      }
    }
    const std::string refs_dir = job.value("references_dir", std::string());
    if (!refs_dir.empty()) {
      auto refs = ts::runner::FolderReferences(refs_dir, job.value("references", "stored") != "fresh");
      if (refs.ok()) {
        o.references = std::move(*refs);
      } else {  // the run goes on with fresh references
        std::fprintf(stderr, "touchstone-runner: %s\n", refs.status().ToString().c_str());
      }
    }
    o.on_stage = [](const std::string& stage) { Send(ts::runner::StageLine(stage)); };
    o.on_built = [](const nlohmann::json& model) { Send(ts::runner::ModelLine(model)); };
    ts::engine::ModelResult r = ts::engine::RunModel(job["config"], o);
    Send(ts::runner::ResultFrame(ts::runner::ToRecord(r)));
  }
  return 0;
}
