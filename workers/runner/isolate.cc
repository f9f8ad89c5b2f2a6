#include "workers/runner/isolate.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

#include "workers/runner/protocol.h"
#include "workers/runner/record.h"
#include "workers/runner/record_json.h"
#include "workers/zoo/config.h"
#include "workers/zoo/config_hash.h"

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

[[noreturn]] void ChildMain(int w, const nlohmann::json& config, engine::RunOptions opts,
                            const IsolateOptions& iso) {
  if (iso.child_setup) {
    const std::string err = iso.child_setup();
    if (!err.empty()) {
      WriteAll(w, ErrorLine(err));
      ::_exit(3);
    }
  }
  opts.on_stage = [w](const std::string& stage) { WriteAll(w, StageLine(stage)); };
  opts.on_built = [w](const nlohmann::json& model) { WriteAll(w, ModelLine(model)); };
  WriteAll(w, ResultFrame(ToRecord(engine::RunModel(config, opts))));
  ::close(w);
  ::_exit(0);
}

// Reads the child's messages until a result or an error, its death, or the deadline.
void Follow(int rd, pid_t pid, double timeout_s, ChildOutcome* out) {
  ProtocolReader reader;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      out->timed_out = true;
      ::kill(pid, SIGKILL);
      return;
    }
    pollfd p{rd, POLLIN, 0};
    const int pr = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (pr <= 0) continue;
    char chunk[65536];
    const ssize_t n = ::read(rd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the child is gone
    reader.Feed(chunk, static_cast<size_t>(n));
    while (auto m = reader.Next()) {
      if (Apply(std::move(*m), out)) return;
    }
  }
}

ChildOutcome RunChild(const nlohmann::json& config, const engine::RunOptions& opts,
                      const IsolateOptions& iso) {
  ChildOutcome out;
  int fds[2];
  if (::pipe(fds) != 0) {
    out.start_error = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    out.start_error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return out;
  }
  if (pid == 0) {
    ::close(fds[0]);
    ChildMain(fds[1], config, opts, iso);
  }
  ::close(fds[1]);
  Follow(fds[0], pid, iso.timeout_s, &out);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  return out;
}

}  // namespace

StatusOr<::touchstone::v1::ModelResult> RunModelIsolated(const nlohmann::json& config,
                                                         const engine::RunOptions& opts,
                                                         const IsolateOptions& iso) {
  const ModelIdentity fallback{opts.arch.empty() ? zoo::ArchOf(config) : opts.arch, opts.task, "",
                               zoo::ConfigHash(config)};
  auto r = RunAcrossCrashes(ModesFromNames(opts.modes), iso.timeout_s, fallback,
                            [&](const std::set<pb::Mode>& modes) {
                              engine::RunOptions o = opts;
                              o.modes = ModeNames(modes);
                              return RunChild(config, o, iso);
                            });
  if (r.ok()) AddSkippedModes(&*r);
  return r;
}

}  // namespace ts::runner
