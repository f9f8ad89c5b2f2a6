#include "workers/runner/isolate.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace ts::runner {
namespace {

using Clock = std::chrono::steady_clock;

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

struct ChildOutcome {
  bool finished = false;         // a result line arrived
  nlohmann::json result;         // valid when finished
  std::string last_stage;        // stage running when it died
  nlohmann::json model;          // {"arch", "task", "family", "config_hash"} once built
  int signal = 0;                // killed by this signal
  int exit_code = 0;
  bool timed_out = false;
  std::string error;             // child-side setup error
};

// Protocol, one line each: "stage NAME", "model JSON", "result JSON", "error TEXT".
ChildOutcome RunChild(const nlohmann::json& config, const engine::RunOptions& opts,
                      const IsolateOptions& iso) {
  ChildOutcome out;
  int fds[2];
  if (::pipe(fds) != 0) {
    out.error = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    out.error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return out;
  }
  if (pid == 0) {
    ::close(fds[0]);
    const int w = fds[1];
    if (iso.child_setup) {
      std::string err = iso.child_setup();
      if (!err.empty()) {
        WriteAll(w, "error " + err + "\n");
        ::_exit(3);
      }
    }
    engine::RunOptions child_opts = opts;
    child_opts.on_stage = [w](const std::string& stage) { WriteAll(w, "stage " + stage + "\n"); };
    child_opts.on_built = [w](const nlohmann::json& model) {
      WriteAll(w, "model " + model.dump() + "\n");
    };
    engine::ModelResult r = engine::RunModel(config, child_opts);
    WriteAll(w, "result " + engine::ToJson(r).dump() + "\n");
    ::close(w);
    ::_exit(0);
  }
  ::close(fds[1]);
  const int rd = fds[0];
  std::string buf;
  const auto deadline = Clock::now() + std::chrono::duration<double>(iso.timeout_s);
  bool eof = false;
  while (!eof) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      out.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{rd, POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char chunk[65536];
    ssize_t n = ::read(rd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
      break;
    }
    buf.append(chunk, static_cast<size_t>(n));
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (line.rfind("stage ", 0) == 0) {
        out.last_stage = line.substr(6);
      } else if (line.rfind("model ", 0) == 0) {
        auto j = nlohmann::json::parse(line.substr(6), nullptr, false);
        if (!j.is_discarded()) out.model = std::move(j);
      } else if (line.rfind("result ", 0) == 0) {
        auto j = nlohmann::json::parse(line.substr(7), nullptr, false);
        if (!j.is_discarded()) {
          out.result = std::move(j);
          out.finished = true;
        }
      } else if (line.rfind("error ", 0) == 0) {
        out.error = line.substr(6);
      }
    }
  }
  ::close(rd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (out.timed_out) out.finished = false;
  return out;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return std::string("SIG") + (abbrev ? abbrev : std::to_string(sig).c_str());
}

}  // namespace

nlohmann::json RunModelIsolated(const nlohmann::json& config, const engine::RunOptions& opts,
                                const IsolateOptions& iso) {
  std::set<std::string> remaining = opts.modes;
  nlohmann::json merged;
  std::map<std::string, nlohmann::json> lost;  // mode -> crash/timeout verdict
  nlohmann::json model;                        // as reported by a child that got past build
  for (int round = 0; round < 4; ++round) {
    engine::RunOptions o = opts;
    o.modes = remaining;
    ChildOutcome c = RunChild(config, o, iso);
    if (!c.model.is_null()) model = c.model;
    if (c.finished) {
      merged = std::move(c.result);
      break;
    }
    if (!c.error.empty() && !c.timed_out && c.signal == 0) {
      merged = {{"error", c.error}};
      break;
    }
    // The child died or hung during c.last_stage.
    nlohmann::json verdict;
    if (c.timed_out) {
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%g", iso.timeout_s);
      verdict = {{"status", "timeout"},
                 {"error", std::string("no result after ") + secs + " s (in stage " +
                               c.last_stage + "); killed"}};
    } else {
      verdict = {{"status", "crash"},
                 {"error", "runner died " +
                               (c.signal ? "with " + SignalName(c.signal)
                                         : "with exit code " + std::to_string(c.exit_code)) +
                               " in stage " + c.last_stage}};
    }
    std::set<std::string> hit;
    if (engine::KnownModes().count(c.last_stage)) {
      hit = {c.last_stage};
    } else {
      hit = remaining;  // build/reference: every mode depends on it
    }
    for (const auto& m : hit) {
      lost[m] = verdict;
      remaining.erase(m);
    }
    if (remaining.empty()) break;
  }
  if (merged.is_null()) {
    // No child finished: describe the model from what a child reported, or from the input.
    if (model.is_null()) {
      std::string arch = opts.arch;
      if (arch.empty() && config.is_object() && config.contains("architectures") &&
          config["architectures"].is_array() && !config["architectures"].empty() &&
          config["architectures"][0].is_string()) {
        arch = config["architectures"][0].get<std::string>();
      }
      model = {{"arch", arch}, {"task", opts.task}, {"family", ""},
               {"config_hash", engine::ConfigHash(config)}};
    }
    // The same shape as engine::ToJson, with nothing measured.
    engine::ModelResult empty;
    for (const auto& m : engine::KnownModes()) empty.modes[m] = engine::ModeResult();
    merged = engine::ToJson(empty);
    merged["model"] = model;
  }
  if (!merged.contains("modes")) merged["modes"] = nlohmann::json::object();
  for (auto& [mode, v] : lost) {
    nlohmann::json m = merged["modes"].value(mode, nlohmann::json::object());
    m["status"] = v["status"];
    m["error"] = v["error"];
    merged["modes"][mode] = m;
  }
  return merged;
}

}  // namespace ts::runner
