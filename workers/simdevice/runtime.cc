// The public API of the simulated device (runtime.h) over its private layers: the state
// (internal/device_state.h), the allocator's accounting and the kernel set.
#include "workers/simdevice/runtime.h"

#include <fstream>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "workers/simdevice/internal/allocator.h"
#include "workers/simdevice/internal/defects.h"
#include "workers/simdevice/internal/device_state.h"
#include "workers/simdevice/internal/kernel_set.h"

namespace ts::simdevice {

c10::Device SimDevice() { return c10::Device(internal::kDeviceType, 0); }

StatusOr<ProfileInfo> Activate(const std::string& profile_json, uint64_t seed) {
  TS_ASSIGN_OR_RETURN(ProfileInfo info, ParseProfile(profile_json));
  for (const auto& op : info.native_ops) {
    if (!internal::HasKernelFor(op)) {
      return InvalidArgumentError("native_ops: '" + op +
                                  "' has no device kernel in this simulator (see "
                                  "workers/simdevice/README.md for the kernel set)");
    }
  }
  auto parsed = nlohmann::json::parse(profile_json);
  std::vector<internal::Defect> defects;
  if (parsed.contains("defects")) {
    TS_ASSIGN_OR_RETURN(defects, internal::ParseDefects(parsed["defects"]));
  }
  internal::InstallProfile(info, std::move(defects), seed);
  return info;
}

StatusOr<ProfileInfo> ActivateFile(const std::string& path, uint64_t seed) {
  std::ifstream in(path);
  if (!in) return NotFoundError("profile: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = Activate(ss.str(), seed);
  if (!r.ok()) return Status(r.status().code(), path + ": " + r.status().message());
  return r;
}

ProfileInfo ActiveProfile() {
  auto& s = internal::State();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.profile;
}

void Reseed(uint64_t seed) {
  auto& s = internal::State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.rng.seed(seed);
  s.perf_rng.seed(internal::PerfSeed(seed));
}

ExecMode CurrentExecMode() {
  return static_cast<ExecMode>(internal::State().exec_mode.load(std::memory_order_relaxed));
}

ScopedExecMode::ScopedExecMode(ExecMode mode) : previous_(CurrentExecMode()) {
  internal::State().exec_mode.store(static_cast<int>(mode));
}
ScopedExecMode::~ScopedExecMode() {
  internal::State().exec_mode.store(static_cast<int>(previous_));
}

Counters SnapshotCounters() {
  auto& s = internal::State();
  std::lock_guard<std::mutex> lock(s.mu);
  Counters c = s.counters;
  c.current_bytes = internal::CurrentMemoryBytes();
  c.peak_bytes = internal::PeakMemoryBytes();
  return c;
}

void ResetCounters() {
  auto& s = internal::State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.counters = Counters();
  internal::ResetPeakMemory();
}

FaultKind ClassifyFault(const std::string& what) {
  if (what.find(internal::kTagOom) != std::string::npos) return FaultKind::kOom;
  if (what.find(internal::kTagDtype) != std::string::npos) return FaultKind::kUnsupportedDtype;
  if (what.find(internal::kTagError) != std::string::npos) return FaultKind::kDeviceError;
  return FaultKind::kNone;
}

}  // namespace ts::simdevice
