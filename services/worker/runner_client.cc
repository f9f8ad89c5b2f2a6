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

namespace pb = ::touchstone::v1;

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
  reader_ = runner::ProtocolReader();
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
  bool timed_out = false;
  while (auto m = Read(Now() + 120, &timed_out)) {
    if (m->kind == runner::Message::Kind::kReady) return absl::OkStatus();
    if (m->kind == runner::Message::Kind::kError) {
      Kill();
      return absl::UnavailableError("runner: " + m->text);
    }
  }
  Kill();
  return absl::UnavailableError("runner " + opts_.runner_path +
                                (timed_out ? " did not start in 120 s" : " exited at start"));
}

std::optional<runner::Message> RunnerClient::Read(double deadline, bool* timed_out) {
  for (;;) {
    if (auto m = reader_.Next()) return m;
    const double left = deadline - Now();
    if (left <= 0) {
      *timed_out = true;
      return std::nullopt;
    }
    pollfd p{from_child_, POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(std::min(left * 1000, 1000.0)) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;
    char chunk[65536];
    ssize_t n = ::read(from_child_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;  // the child is gone
    reader_.Feed(chunk, static_cast<size_t>(n));
  }
}

void RunnerClient::Reap(runner::ChildOutcome* o) {
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

runner::ChildOutcome RunnerClient::RunOnce(const JobSpec& job, const std::set<std::string>& modes) {
  runner::ChildOutcome o;
  nlohmann::json line = {{"job_id", job.job_id}, {"model_id", job.model_id},
                         {"config", job.config},  {"arch", job.arch},
                         {"modes", modes},         {"seed", job.seed},
                         {"audit_ops", job.audit_ops}};
  if (!job.weights_dir.empty()) line["weights_dir"] = job.weights_dir;
  if (!job.references_dir.empty()) {
    line["references_dir"] = job.references_dir;
    line["references"] = job.fresh_references ? "fresh" : "stored";
  }
  if (!WriteAll(to_child_, line.dump() + "\n")) {
    Reap(&o);  // it closed its input: it died
    return o;
  }
  const double deadline = Now() + job.timeout_s;
  while (auto m = Read(deadline, &o.timed_out)) {
    if (runner::Apply(std::move(*m), &o)) return o;
  }
  Reap(&o);  // died or timed out
  return o;
}

absl::StatusOr<pb::ModelResult> RunnerClient::RunJob(const std::string& profile_path,
                                                     const JobSpec& job) {
  const runner::ModelIdentity fallback{job.arch, "", "", ""};
  auto r = runner::RunAcrossCrashes(
      runner::ModesFromNames(job.modes), job.timeout_s, fallback,
      [&](const std::set<pb::Mode>& modes) {
        runner::ChildOutcome c;
        if (absl::Status st = Ensure(profile_path); !st.ok()) {
          c.start_error = std::string(st.message());
          return c;
        }
        return RunOnce(job, runner::ModeNames(modes));
      });
  if (!r.ok()) return absl::UnavailableError(r.status().message());
  return std::move(*r);
}

}  // namespace ts::worker
