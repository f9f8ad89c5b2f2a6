#include "workers/runner/protocol.h"

#include <signal.h>
#include <string.h>

#include <cstdio>
#include <limits>
#include <map>

#include "proto/names.h"

namespace ts::runner {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// A record is a few KiB; anything near this is a corrupt frame, not a result.
constexpr size_t kMaxFrame = 256u << 20;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return std::string("SIG") + (abbrev ? abbrev : std::to_string(sig).c_str());
}

// The verdict of a mode that a dead or hung child took with it.
pb::ModeVerdict LostVerdict(const ChildOutcome& c, double timeout_s) {
  pb::ModeVerdict v;
  const std::string where = c.last_stage.empty() ? "start" : c.last_stage;
  if (c.timed_out) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", timeout_s);
    v.set_status(pb::VERDICT_TIMEOUT);
    v.set_error(std::string("no result after ") + secs + " s (in stage " + where +
                "); runner killed");
    return v;
  }
  v.set_status(pb::VERDICT_CRASH);
  v.set_error("runner died " +
              (c.signal ? "with " + SignalName(c.signal)
                        : "with exit code " + std::to_string(c.exit_code)) +
              " in stage " + where);
  return v;
}

// A record with nothing measured, for when no child finished.
pb::ModelResult BlankRecord(const std::set<pb::Mode>& modes, const ModelIdentity& id,
                            const std::string& runner_error) {
  pb::ModelResult r;
  r.set_arch(id.arch);
  r.set_task(id.task);
  r.set_family(id.family);
  r.set_config_hash(id.config_hash);
  r.set_call_ratio(kNaN);
  for (pb::Mode m : modes) {
    pb::ModeVerdict* v = r.add_modes();
    *v = BlankVerdict(m);
    if (!runner_error.empty()) {
      v->set_status(pb::VERDICT_LOAD_FAIL);
      v->set_error("runner: " + runner_error);
    }
  }
  return r;
}

ModelIdentity IdentityOf(const nlohmann::json& model, const ModelIdentity& fallback) {
  if (!model.is_object()) return fallback;
  auto text = [&](const char* key) {
    return model.contains(key) && model[key].is_string() ? model[key].get<std::string>() : "";
  };
  return {text("arch"), text("task"), text("family"), text("config_hash")};
}

// Keeps exactly `modes`, in Mode order, with `lost` verdicts (status and error) applied; a lost
// mode the record does not hold is added blank.
void SettleModes(const std::set<pb::Mode>& modes, const std::map<pb::Mode, pb::ModeVerdict>& lost,
                 pb::ModelResult* r) {
  std::map<pb::Mode, pb::ModeVerdict> by_mode;
  for (const auto& v : r->modes()) by_mode.emplace(v.mode(), v);
  r->clear_modes();
  for (pb::Mode m : modes) {
    auto it = by_mode.find(m);
    pb::ModeVerdict v = it != by_mode.end() ? it->second : BlankVerdict(m);
    if (auto l = lost.find(m); l != lost.end()) {
      v.set_status(l->second.status());
      v.set_error(l->second.error());
    }
    *r->add_modes() = std::move(v);
  }
}

}  // namespace

std::string ReadyLine() { return "ready\n"; }
std::string StageLine(std::string_view stage) { return "stage " + std::string(stage) + "\n"; }
std::string ModelLine(const nlohmann::json& model) { return "model " + model.dump() + "\n"; }
std::string ErrorLine(std::string_view text) {
  std::string t(text);
  for (char& c : t) {
    if (c == '\n') c = ' ';
  }
  return "error " + t + "\n";
}

std::string ResultFrame(const pb::ModelResult& result) {
  std::string bytes;
  result.SerializeToString(&bytes);
  return "result " + std::to_string(bytes.size()) + "\n" + bytes;
}

std::optional<Message> ProtocolReader::Next() {
  const size_t nl = buf_.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  const std::string_view line(buf_.data(), nl);
  Message m;
  size_t consumed = nl + 1;
  if (line == "ready") {
    m.kind = Message::Kind::kReady;
  } else if (StartsWith(line, "stage ")) {
    m.kind = Message::Kind::kStage;
    m.text = std::string(line.substr(6));
  } else if (StartsWith(line, "model ")) {
    m.model = nlohmann::json::parse(line.substr(6), nullptr, false);
    m.kind = m.model.is_discarded() ? Message::Kind::kUnknown : Message::Kind::kModel;
    if (m.model.is_discarded()) m.model = nullptr;
  } else if (StartsWith(line, "result ")) {
    const std::string len_text(line.substr(7));
    char* end = nullptr;
    const unsigned long long len = std::strtoull(len_text.c_str(), &end, 10);
    if (len_text.empty() || *end != '\0' || len > kMaxFrame) {
      m.kind = Message::Kind::kError;
      m.text = "result: bad frame length '" + len_text + "'";
    } else {
      if (buf_.size() < consumed + len) return std::nullopt;  // the frame is still arriving
      if (m.result.ParseFromArray(buf_.data() + consumed, static_cast<int>(len))) {
        m.kind = Message::Kind::kResult;
      } else {
        m.kind = Message::Kind::kError;
        m.text = "result: unreadable record";
      }
      consumed += len;
    }
  } else if (StartsWith(line, "error ")) {
    m.kind = Message::Kind::kError;
    m.text = std::string(line.substr(6));
  } else {
    m.text = std::string(line);
  }
  buf_.erase(0, consumed);
  return m;
}

bool Apply(Message m, ChildOutcome* o) {
  switch (m.kind) {
    case Message::Kind::kStage:
      o->last_stage = std::move(m.text);
      return false;
    case Message::Kind::kModel:
      o->model = std::move(m.model);
      return false;
    case Message::Kind::kResult:
      o->result = std::move(m.result);
      o->finished = true;
      return true;
    case Message::Kind::kError:
      o->error = std::move(m.text);
      return true;
    case Message::Kind::kReady:
    case Message::Kind::kUnknown:
      return false;
  }
  return false;
}

pb::ModeVerdict BlankVerdict(pb::Mode mode) {
  pb::ModeVerdict v;
  v.set_mode(mode);
  v.set_status(pb::VERDICT_SKIPPED);
  for (auto setter : {&pb::ModeVerdict::set_rmse_device, &pb::ModeVerdict::set_rmse_reference,
                      &pb::ModeVerdict::set_rmse_ratio, &pb::ModeVerdict::set_max_abs_err,
                      &pb::ModeVerdict::set_cosine, &pb::ModeVerdict::set_rmse_vs_declared,
                      &pb::ModeVerdict::set_max_rel_err, &pb::ModeVerdict::set_compile_ms,
                      &pb::ModeVerdict::set_compile_wall_ms, &pb::ModeVerdict::set_first_run_ms,
                      &pb::ModeVerdict::set_max_loss_gap_ratio}) {
    (v.*setter)(kNaN);
  }
  return v;
}

StatusOr<pb::ModelResult> RunAcrossCrashes(const std::set<pb::Mode>& modes, double timeout_s,
                                           const ModelIdentity& fallback,
                                           const RunChildFn& run_child) {
  std::set<pb::Mode> remaining = modes;
  std::map<pb::Mode, pb::ModeVerdict> lost;
  std::optional<pb::ModelResult> finished;
  std::string runner_error;
  nlohmann::json model;  // as reported by a child that got past build
  for (int round = 0; round < 4 && !remaining.empty(); ++round) {
    ChildOutcome c = run_child(remaining);
    if (!c.start_error.empty()) return Status(StatusCode::kUnavailable, c.start_error);
    if (!c.model.is_null()) model = c.model;
    if (c.finished) {
      finished = std::move(c.result);
      break;
    }
    if (!c.error.empty() && !c.timed_out && c.signal == 0) {
      runner_error = c.error;
      break;
    }
    const pb::ModeVerdict verdict = LostVerdict(c, timeout_s);
    // A death in build or reference costs every mode still to run: they all depend on it.
    const auto stage_mode = proto::ModeFromName(c.last_stage);
    const std::set<pb::Mode> hit =
        stage_mode && remaining.count(*stage_mode) ? std::set<pb::Mode>{*stage_mode} : remaining;
    for (pb::Mode m : hit) {
      lost[m] = verdict;
      remaining.erase(m);
    }
  }
  pb::ModelResult r =
      finished ? std::move(*finished) : BlankRecord(modes, IdentityOf(model, fallback), runner_error);
  SettleModes(modes, lost, &r);
  return r;
}

std::set<pb::Mode> ModesFromNames(const std::set<std::string>& names) {
  std::set<pb::Mode> out;
  for (const auto& n : names) {
    if (auto m = proto::ModeFromName(n)) out.insert(*m);
  }
  return out;
}

std::set<std::string> ModeNames(const std::set<pb::Mode>& modes) {
  std::set<std::string> out;
  for (pb::Mode m : modes) out.insert(proto::ModeName(m));
  return out;
}

}  // namespace ts::runner
