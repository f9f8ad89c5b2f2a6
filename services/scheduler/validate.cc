#include "services/scheduler/validate.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <utility>

#include "proto/names.h"
#include "services/common/cron.h"
#include "services/common/field_limits.h"

namespace ts::scheduler {
namespace {

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(field + ": " + why);
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

absl::Status Positive(const std::string& field, int64_t v) {
  if (v <= 0) return Bad(field, "must be a positive id, got " + std::to_string(v));
  return absl::OkStatus();
}

absl::Status Lease(int64_t worker_id, int64_t shard_id, const std::string& token) {
  if (auto st = Positive("worker_id", worker_id); !st.ok()) return st;
  if (auto st = Positive("shard_id", shard_id); !st.ok()) return st;
  if (token.empty()) return Bad("lease_token", "required");
  return absl::OkStatus();
}

// A client-made request id: empty (not idempotent) or 8 to 128 of [A-Za-z0-9._:-].
absl::Status RequestId(const std::string& id) {
  if (id.empty()) return absl::OkStatus();
  if (id.size() < 8 || id.size() > 128) {
    return Bad("request_id", "want 8 to 128 characters, got " + std::to_string(id.size()));
  }
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != ':' &&
        c != '-') {
      return Bad("request_id", "want only [A-Za-z0-9._:-]");
    }
  }
  return absl::OkStatus();
}

absl::Status JsonObject(const std::string& field, const std::string& text) {
  if (text.empty()) return Bad(field, "required");
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Bad(field, "not valid JSON");
  if (!j.is_object()) return Bad(field, "must be a JSON object");
  return absl::OkStatus();
}

absl::Status Names(const std::string& field,
                   const google::protobuf::RepeatedPtrField<std::string>& v) {
  for (int i = 0; i < v.size(); ++i) {
    if (v[i].empty()) return Bad(field + "[" + std::to_string(i) + "]", "empty");
  }
  return absl::OkStatus();
}

// A suspect names its op, counts its calls and has a finite ratio (a non-finite mismatch is
// reported as 1e300, so that the stored JSON stays valid).
absl::Status Suspect(const std::string& at, const pb::Suspect& s) {
  if (s.op().empty()) return Bad(at + ".op", "empty");
  if (!std::isfinite(s.ratio())) {
    return Bad(at + ".ratio", "must be finite (1e300 stands for a non-finite mismatch)");
  }
  if (s.calls() < 0) return Bad(at + ".calls", "must be >= 0");
  if (s.total_calls() < 0) return Bad(at + ".total_calls", "must be >= 0");
  return absl::OkStatus();
}

// A mode's perf (`at`: "results[i].modes[j].perf"): only on a pass, with a positive finite
// device time, no negative counts, MFU in [0, 1], and ops that name themselves. Speedup and
// compression belong to compile (NaN elsewhere).
absl::Status Perf(const std::string& at, const pb::ModeVerdict& v) {
  const pb::Perf& p = v.perf();
  if (v.status() != pb::VERDICT_PASS) return Bad(at, "present, but the mode did not pass");
  if (!std::isfinite(p.device_us()) || p.device_us() <= 0) {
    return Bad(at + ".device_us", "must be finite and > 0");
  }
  for (const auto& [name, x] : {std::pair<const char*, double>{"flops", p.flops()},
                                {"bytes", p.bytes()},
                                {"fallback_us", p.fallback_us()},
                                {"transfer_bytes", p.transfer_bytes()}}) {
    if (!std::isfinite(x) || x < 0) return Bad(at + "." + name, "must be finite and >= 0");
  }
  if (!(p.mfu() >= 0 && p.mfu() <= 1)) return Bad(at + ".mfu", "must be in [0, 1]");
  if (p.launches() < 0) return Bad(at + ".launches", "must be >= 0");
  if (p.peak_device_bytes() < 0) return Bad(at + ".peak_device_bytes", "must be >= 0");
  for (int k = 0; k < p.top_ops_size(); ++k) {
    const std::string oat = at + ".top_ops[" + std::to_string(k) + "]";
    if (p.top_ops(k).op().empty()) return Bad(oat + ".op", "empty");
    if (!std::isfinite(p.top_ops(k).us()) || p.top_ops(k).us() < 0) {
      return Bad(oat + ".us", "must be finite and >= 0");
    }
  }
  for (const auto& [name, x] :
       {std::pair<const char*, double>{"speedup", p.speedup()}, {"compression", p.compression()}}) {
    if (std::isnan(x)) continue;
    if (v.mode() != pb::MODE_COMPILE) return Bad(at + "." + name, "only compile has one");
    if (!std::isfinite(x) || x <= 0) return Bad(at + "." + name, "must be finite and > 0");
  }
  return absl::OkStatus();
}

// One mode's verdict (`at`: "results[i].modes[j]").
absl::Status Verdict(const std::string& at, const pb::ModeVerdict& v) {
  if (proto::ModeName(v.mode()).empty()) {
    return Bad(at + ".mode", "unknown mode " + std::to_string(v.mode()));
  }
  if (proto::VerdictName(v.status()).empty()) {
    return Bad(at + ".status", "unknown status " + std::to_string(v.status()));
  }
  if (v.status() == pb::VERDICT_LOST) {
    return Bad(at + ".status", "lost is the scheduler's to record (a worker lost too often), "
                               "not a verdict a worker reports");
  }
  if (!v.audited() && v.suspects_size() > 0) {
    return Bad(at + ".suspects", "present, but the mode was not audited");
  }
  for (int k = 0; k < v.suspects_size(); ++k) {
    const std::string sat = at + ".suspects[" + std::to_string(k) + "]";
    if (auto st = Suspect(sat, v.suspects(k)); !st.ok()) return st;
  }
  if (!v.audited() && v.unchecked_size() > 0) {
    return Bad(at + ".unchecked", "present, but the mode was not audited");
  }
  for (int k = 0; k < v.unchecked_size(); ++k) {
    const std::string uat = at + ".unchecked[" + std::to_string(k) + "]";
    if (v.unchecked(k).op().empty()) return Bad(uat + ".op", "empty");
    if (v.unchecked(k).calls() < 1) return Bad(uat + ".calls", "must be >= 1");
  }
  if (v.has_perf()) return Perf(at + ".perf", v);
  return absl::OkStatus();
}

}  // namespace

namespace {

absl::Status Shape(const pb::RegisterWorkerRequest& r) {
  if (r.name().empty()) return Bad("name", "required");
  if (r.slots() < 0) return Bad("slots", "must be >= 0");
  return absl::OkStatus();
}

absl::Status Shape(const pb::LeaseShardRequest& r) {
  if (auto st = Positive("worker_id", r.worker_id()); !st.ok()) return st;
  if (r.wait_ms() > 60000) return Bad("wait_ms", "at most 60000 (60 s)");
  return RequestId(r.request_id());
}

absl::Status Shape(const pb::HeartbeatRequest& r) {
  if (auto st = Lease(r.worker_id(), r.shard_id(), r.lease_token()); !st.ok()) return st;
  if (r.job_id() < 0) return Bad("job_id", "must be >= 0 (0: between jobs)");
  return absl::OkStatus();
}

absl::Status Shape(const pb::FinishShardRequest& r) {
  return Lease(r.worker_id(), r.shard_id(), r.lease_token());
}

absl::Status Shape(const pb::ReportResultsRequest& r) {
  if (auto st = Lease(r.worker_id(), r.shard_id(), r.lease_token()); !st.ok()) return st;
  if (auto st = RequestId(r.request_id()); !st.ok()) return st;
  if (r.results_size() == 0) return Bad("results", "empty");
  if (r.results_size() > kMaxResultsPerReport) {
    return Bad("results", "at most " + std::to_string(kMaxResultsPerReport) + " per report");
  }
  for (int i = 0; i < r.results_size(); ++i) {
    const auto& m = r.results(i);
    const std::string at = "results[" + std::to_string(i) + "]";
    if (auto st = Positive(at + ".job_id", m.job_id()); !st.ok()) return st;
    if (m.model_id().empty()) return Bad(at + ".model_id", "required");
    if (m.run() < 0) return Bad(at + ".run", "must be >= 0");
    if (m.modes_size() == 0) return Bad(at + ".modes", "empty");
    if (!(m.opcov_ratio() >= 0 && m.opcov_ratio() <= 1)) {
      return Bad(at + ".opcov_ratio", "must be in [0, 1]");
    }
    for (int k = 0; k < m.modes_size(); ++k) {
      const std::string mat = at + ".modes[" + std::to_string(k) + "]";
      if (auto st = Verdict(mat, m.modes(k)); !st.ok()) return st;
    }
    for (int k = 0; k < m.ops_size(); ++k) {
      if (m.ops(k).op().empty()) return Bad(at + ".ops[" + std::to_string(k) + "].op", "empty");
      if (m.ops(k).calls() < 0) {
        return Bad(at + ".ops[" + std::to_string(k) + "].calls", "must be >= 0");
      }
    }
    if (!m.tiny_config_json().empty()) {
      if (auto st = JsonObject(at + ".tiny_config_json", m.tiny_config_json()); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::Status Shape(const pb::UpsertModelsRequest& r) {
  if (r.models_size() == 0) return Bad("models", "empty");
  if (r.models_size() > kMaxModelsPerUpsert) {
    return Bad("models", "at most " + std::to_string(kMaxModelsPerUpsert) + " per call");
  }
  for (int i = 0; i < r.models_size(); ++i) {
    const auto& m = r.models(i);
    const std::string at = "models[" + std::to_string(i) + "]";
    if (m.id().empty()) return Bad(at + ".id", "required");
    if (m.task().empty()) return Bad(at + ".task", "required");
    if (m.arch().empty()) return Bad(at + ".arch", "required");
    if (auto st = JsonObject(at + ".config_json", m.config_json()); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status Shape(const pb::CreateSweepRequest& r) {
  if (r.profile().name().empty()) return Bad("profile.name", "required");
  if (auto st = RequestId(r.request_id()); !st.ok()) return st;
  if (auto st = JsonObject("profile.body", r.profile().body()); !st.ok()) return st;
  std::set<std::string> seen;
  for (int i = 0; i < r.modes_size(); ++i) {
    const std::string at = "modes[" + std::to_string(i) + "]";
    if (!proto::ModeFromName(r.modes(i))) return Bad(at, "unknown mode '" + r.modes(i) + "'");
    if (!seen.insert(r.modes(i)).second) return Bad(at, "repeated mode '" + r.modes(i) + "'");
  }
  if (r.sample() < 0) return Bad("sample", "must be >= 0");
  if (r.baseline_sweep_id() < 0) return Bad("baseline_sweep_id", "must be >= 0");
  if (r.shard_max_models() < 0 || r.shard_max_models() > 10000) {
    return Bad("shard_max_models", "must be in [0, 10000]");
  }
  // A floor on the shard's work: a tiny target would ask for a shard per model and more (the
  // shard count is also bounded by the model count when packing).
  if (!(r.shard_target_s() == 0 || (r.shard_target_s() >= kMinShardTargetS &&
                                    r.shard_target_s() <= kMaxShardTargetS))) {
    return Bad("shard_target_s", "must be 0 (30 s) or in [" + Num(kMinShardTargetS) + ", " +
                                     Num(kMaxShardTargetS) + "] seconds");
  }
  if (!(r.model_timeout_s() >= 0 && r.model_timeout_s() <= kMaxModelTimeoutS)) {
    return Bad("model_timeout_s", "must be in [0, " + Num(kMaxModelTimeoutS) + "] seconds");
  }
  if (auto st = Names("filter.tasks", r.filter().tasks()); !st.ok()) return st;
  if (auto st = Names("filter.families", r.filter().families()); !st.ok()) return st;
  if (auto st = Names("filter.archs", r.filter().archs()); !st.ok()) return st;
  if (auto st = Names("filter.model_ids", r.filter().model_ids()); !st.ok()) return st;
  return absl::OkStatus();
}

absl::Status Shape(const pb::GetSweepRequest& r) { return Positive("sweep_id", r.sweep_id()); }
absl::Status Shape(const pb::CancelSweepRequest& r) { return Positive("sweep_id", r.sweep_id()); }

absl::Status Shape(const pb::ListResultsRequest& r) {
  if (auto st = Positive("sweep_id", r.sweep_id()); !st.ok()) return st;
  if (r.page_size() < 0 || r.page_size() > 10000) return Bad("page_size", "must be in [0, 10000]");
  return absl::OkStatus();
}

namespace {
absl::Status ScheduleName(const std::string& name) {
  static const std::regex kName("[A-Za-z0-9._-]{1,64}");
  if (!std::regex_match(name, kName)) {
    return Bad("name", "want 1 to 64 of [A-Za-z0-9._-], got '" + name + "'");
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status Shape(const pb::AddScheduleRequest& r) {
  if (auto st = ScheduleName(r.name()); !st.ok()) return st;
  if (auto spec = common::CronSpec::Parse(r.cron()); !spec.ok()) return spec.status();
  if (auto st = Shape(r.sweep()); !st.ok()) {
    return absl::InvalidArgumentError("sweep." + std::string(st.message()));
  }
  if (r.sweep().baseline_sweep_id() != 0) {
    return Bad("sweep.baseline_sweep_id", "must be 0: a schedule's baseline is `baseline`");
  }
  if (!r.sweep().request_id().empty()) {
    return Bad("sweep.request_id", "must be empty: each due time makes its own sweep");
  }
  if (!r.baseline().empty() && r.baseline() != "previous" && r.baseline() != "none") {
    return Bad("baseline", "want previous or none, got '" + r.baseline() + "'");
  }
  return absl::OkStatus();
}
absl::Status Shape(const pb::ListSchedulesRequest&) { return absl::OkStatus(); }
absl::Status Shape(const pb::RemoveScheduleRequest& r) { return ScheduleName(r.name()); }
absl::Status Shape(const pb::SetScheduleEnabledRequest& r) { return ScheduleName(r.name()); }

// Every string first (NULs, lengths: services/common/field_limits.h), then the shape.
template <typename Req>
absl::Status Full(const Req& r) {
  if (absl::Status st = common::CheckStrings(r); !st.ok()) return st;
  return Shape(r);
}

}  // namespace

absl::Status Validate(const pb::RegisterWorkerRequest& r) { return Full(r); }
absl::Status Validate(const pb::LeaseShardRequest& r) { return Full(r); }
absl::Status Validate(const pb::HeartbeatRequest& r) { return Full(r); }
absl::Status Validate(const pb::FinishShardRequest& r) { return Full(r); }
absl::Status Validate(const pb::ReportResultsRequest& r) { return Full(r); }
absl::Status Validate(const pb::UpsertModelsRequest& r) { return Full(r); }
absl::Status Validate(const pb::CreateSweepRequest& r) { return Full(r); }
absl::Status Validate(const pb::GetSweepRequest& r) { return Full(r); }
absl::Status Validate(const pb::CancelSweepRequest& r) { return Full(r); }
absl::Status Validate(const pb::ListResultsRequest& r) { return Full(r); }
absl::Status Validate(const pb::AddScheduleRequest& r) { return Full(r); }
absl::Status Validate(const pb::ListSchedulesRequest& r) { return Full(r); }
absl::Status Validate(const pb::RemoveScheduleRequest& r) { return Full(r); }
absl::Status Validate(const pb::SetScheduleEnabledRequest& r) { return Full(r); }

}  // namespace ts::scheduler
