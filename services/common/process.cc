#include "services/common/process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace ts::common {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<char*> Argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

ExitInfo Decode(int status) {
  ExitInfo e;
  e.exited = true;
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  return e;
}

}  // namespace

absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const SpawnOptions& opts) {
  if (argv.empty()) return absl::InvalidArgumentError("argv: empty");
  int log_fd = -1;
  if (!opts.log_path.empty()) {
    log_fd = ::open(opts.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      return absl::InternalError("open " + opts.log_path + ": " + std::strerror(errno));
    }
  }
  // Build everything the child needs before fork: after fork only async-signal-safe calls.
  auto args = Argv(argv);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) env_storage.emplace_back(*e);
  for (const auto& e : opts.env) env_storage.push_back(e);
  auto envp = Argv(env_storage);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    if (log_fd >= 0) ::close(log_fd);
    return absl::InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    if (log_fd >= 0) ::close(log_fd);
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    return absl::InternalError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    if (opts.new_process_group) ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (log_fd >= 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
    }
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(args[0], args.data(), envp.data());
    int e = errno;
    ssize_t ignored = ::write(err_pipe[1], &e, sizeof(e));
    (void)ignored;
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  if (log_fd >= 0) ::close(log_fd);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == sizeof(child_errno)) {
    int status;
    ::waitpid(pid, &status, 0);
    return absl::InternalError("exec " + argv[0] + ": " + std::strerror(child_errno));
  }
  return pid;
}

ExitInfo WaitFor(pid_t pid, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return Decode(status);
    if (r < 0 && errno != EINTR) {
      ExitInfo e;
      e.exited = true;  // not our child any more (already reaped)
      return e;
    }
    if (Clock::now() >= deadline) return ExitInfo{};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

ExitInfo Stop(pid_t pid, double grace_s) {
  ::kill(pid, SIGTERM);
  ExitInfo e = WaitFor(pid, grace_s);
  if (e.exited) return e;
  ::kill(pid, SIGKILL);
  return WaitFor(pid, 30);
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, double timeout_s,
                                         int uid, int gid) {
  if (argv.empty()) return absl::InvalidArgumentError("argv: empty");
  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  auto args = Argv(argv);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return absl::InternalError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(out_pipe[1], 2);
    ::signal(SIGPIPE, SIG_DFL);
    if (uid >= 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(gid)) != 0 ||
          ::setuid(static_cast<uid_t>(uid)) != 0) {
        const char msg[] = "cannot drop privileges\n";
        ssize_t ignored = ::write(2, msg, sizeof(msg) - 1);
        (void)ignored;
        ::_exit(126);
      }
    }
    ::execv(args[0], args.data());
    const char msg[] = "exec failed\n";
    ssize_t ignored = ::write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  CommandResult r;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{out_pipe[0], POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 500)));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;
    char buf[8192];
    ssize_t n = ::read(out_pipe[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf, static_cast<size_t>(n));
  }
  ::close(out_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ExitInfo e = Decode(status);
  r.code = e.code;
  r.signal = e.signal;
  if (timed_out) {
    return absl::DeadlineExceededError(argv[0] + " did not finish in " +
                                       std::to_string(static_cast<int>(timeout_s)) + " s: " +
                                       r.output);
  }
  return r;
}

std::string SelfDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

}  // namespace ts::common
