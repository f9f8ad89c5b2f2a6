#include "services/worker/runner_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>

namespace ts::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

bool WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return std::string("SIG") + (abbrev ? abbrev : std::to_string(sig).c_str());
}

const std::set<std::string> kModes = {"eager", "compile", "train"};

}  // namespace

RunnerClient::~RunnerClient() { Kill(); }

void RunnerClient::Kill() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
  pid_ = -1;
  to_child_ = from_child_ = -1;
  buf_.clear();
}

absl::Status RunnerClient::Ensure(const std::string& profile_path) {
  if (pid_ > 0 && profile_ == profile_path) return absl::OkStatus();
  if (pid_ > 0) Kill();
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    return absl::UnavailableError(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<std::string> args = {opts_.runner_path, "--profile", profile_path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return absl::UnavailableError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    if (!opts_.log_path.empty()) {
      int log = ::open(opts_.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (log >= 0) ::dup2(log, 2);
    }
    ::signal(SIGPIPE, SIG_DFL);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  pid_ = pid;
  to_child_ = in[1];
  from_child_ = out[0];
  profile_ = profile_path;
  // Wait for "ready": a bad binary or profile shows up here, not as a model verdict.
  std::string line;
  bool timed_out = false;
  while (ReadLine(&line, Now() + 120, &timed_out)) {
    if (line == "ready") return absl::OkStatus();
    if (line.rfind("error ", 0) == 0) {
      Kill();
      return absl::UnavailableError("runner: " + line.substr(6));
    }
  }
  Kill();
  return absl::UnavailableError("runner " + opts_.runner_path +
                                (timed_out ? " did not start in 120 s" : " exited at start"));
}

bool RunnerClient::ReadLine(std::string* line, double deadline, bool* timed_out) {
  for (;;) {
    const size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      *line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return true;
    }
    const double left = deadline - Now();
    if (left <= 0) {
      *timed_out = true;
      return false;
    }
    pollfd p{from_child_, POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(std::min(left * 1000, 1000.0)) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;
    char chunk[65536];
    ssize_t n = ::read(from_child_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // the child is gone
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

void RunnerClient::Reap(Outcome* o) {
  if (o->timed_out) ::kill(pid_, SIGKILL);
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  if (r == pid_) {
    if (WIFSIGNALED(status)) o->signal = WTERMSIG(status);
    if (WIFEXITED(status)) o->exit_code = WEXITSTATUS(status);
  }
  pid_ = -1;
  Kill();
  ++restarts_;
}

RunnerClient::Outcome RunnerClient::RunOnce(const JobSpec& job, const std::set<std::string>& modes) {
  Outcome o;
  nlohmann::json line = {{"job_id", job.job_id}, {"config", job.config}, {"arch", job.arch},
                         {"modes", modes}, {"seed", job.seed}};
  if (!WriteAll(to_child_, line.dump() + "\n")) {
    o.error = "runner closed its input";
    Reap(&o);
    return o;
  }
  const double deadline = Now() + job.timeout_s;
  std::string l;
  while (ReadLine(&l, deadline, &o.timed_out)) {
    if (l.rfind("stage ", 0) == 0) {
      o.last_stage = l.substr(6);
    } else if (l.rfind("model ", 0) == 0) {
      auto j = nlohmann::json::parse(l.substr(6), nullptr, false);
      if (!j.is_discarded()) o.model = std::move(j);
    } else if (l.rfind("result ", 0) == 0) {
      auto j = nlohmann::json::parse(l.substr(7), nullptr, false);
      if (!j.is_discarded()) {
        o.result = std::move(j);
        o.finished = true;
        return o;
      }
    } else if (l.rfind("error ", 0) == 0) {
      o.error = l.substr(6);
      return o;
    }
  }
  Reap(&o);  // died or timed out
  return o;
}

absl::StatusOr<nlohmann::json> RunnerClient::RunJob(const std::string& profile_path,
                                                    const JobSpec& job) {
  std::set<std::string> remaining = job.modes;
  nlohmann::json merged, model;
  std::map<std::string, nlohmann::json> lost;
  for (int round = 0; round < 4 && !remaining.empty(); ++round) {
    if (auto st = Ensure(profile_path); !st.ok()) return st;
    Outcome c = RunOnce(job, remaining);
    if (!c.model.is_null()) model = c.model;
    if (c.finished) {
      merged = std::move(c.result);
      break;
    }
    if (!c.error.empty() && !c.timed_out && c.signal == 0 && pid_ > 0) {
      merged = {{"error", c.error}};
      break;
    }
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", job.timeout_s);
    const std::string where = c.last_stage.empty() ? "start" : c.last_stage;
    nlohmann::json verdict =
        c.timed_out
            ? nlohmann::json{{"status", "timeout"},
                             {"error", std::string("no result after ") + secs + " s (in stage " +
                                           where + "); runner killed"}}
            : nlohmann::json{{"status", "crash"},
                             {"error", "runner died " +
                                           (c.signal ? "with " + SignalName(c.signal)
                                                     : "with exit code " +
                                                           std::to_string(c.exit_code)) +
                                           " in stage " + where}};
    std::set<std::string> hit;
    if (kModes.count(c.last_stage)) {
      hit = {c.last_stage};
    } else {
      hit = remaining;  // build or reference: every mode needs them
    }
    for (const auto& m : hit) {
      lost[m] = verdict;
      remaining.erase(m);
    }
  }
  if (merged.is_null() || !merged.contains("modes")) {
    if (model.is_null()) {
      model = {{"arch", job.arch}, {"task", ""}, {"family", ""}, {"config_hash", ""}};
    }
    nlohmann::json modes = nlohmann::json::object();
    for (const auto& m : job.modes) modes[m] = {{"status", "skipped"}, {"error", nullptr}, {"ms", 0}};
    const std::string err = merged.is_object() ? merged.value("error", std::string()) : "";
    merged = {{"model", model}, {"modes", modes},
              {"op_coverage", {{"distinct_ops", 0}, {"native_ops", 0}, {"ratio", 0}}},
              {"fallback_ops", nlohmann::json::object()}, {"native_ops", nlohmann::json::object()},
              {"timings_ms", nlohmann::json::object()}, {"peak_device_bytes", 0}};
    if (!err.empty()) {
      for (const auto& m : job.modes) {
        merged["modes"][m] = {{"status", "load_fail"}, {"error", "runner: " + err}, {"ms", 0}};
      }
    }
  }
  for (auto& [mode, v] : lost) {
    nlohmann::json m = merged["modes"].value(mode, nlohmann::json::object());
    m["status"] = v["status"];
    m["error"] = v["error"];
    merged["modes"][mode] = m;
  }
  return merged;
}

}  // namespace ts::worker
