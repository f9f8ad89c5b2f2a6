// Process-global state of the simulated device: the active profile and its private defect list,
// the RNG that draws flaky defects, the op counters and the execution mode. Also the fault tags
// that ClassifyFault() recognises and the dtype check every allocation makes. PRIVATE to
// workers/simdevice (it holds the defect list).
//
// Thread-safety: DeviceState::mu guards profile, defects, rng and counters; generation and
// exec_mode are atomics. The state is created on first use and never destroyed, because kernels
// may still run during process exit.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "workers/simdevice/internal/cost_model.h"
#include "workers/simdevice/internal/defects.h"
#include "workers/simdevice/internal/perf_clock.h"
#include "workers/simdevice/runtime.h"

namespace ts::simdevice::internal {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;
constexpr const char* kTagOom = "[simdevice:oom] ";
constexpr const char* kTagDtype = "[simdevice:unsupported_dtype] ";
constexpr const char* kTagError = "[simdevice:device_error] ";

struct DeviceState {
  std::mutex mu;  // guards everything below except the atomics
  ProfileInfo profile;
  std::vector<Defect> defects;
  std::mt19937_64 rng{0};
  std::mt19937_64 perf_rng{0};  // flaky performance defects: their own draws (defect_effects.h)
  Counters counters;  // native, fallback, compiled; the byte counts live in the allocator
  // The simulated clock (internal/perf_clock.h) and the cost model it charges by. `cost` is
  // replaced only by InstallProfile, which must not race running ops, so kernels read it
  // without the lock.
  ClockAccum clock;
  CostModel cost;
  std::atomic<int64_t> generation{1};  // bumped by InstallProfile: per-thread caches go stale
  std::atomic<int> exec_mode{static_cast<int>(ExecMode::kEager)};
};
// Starts with a permissive built-in profile ("sim-default", 4 GiB, no defects).
DeviceState& State();

// Installs a validated profile, its defects and the RNG seed, sets the memory capacity and the
// unsupported-dtype mask, then bumps the generation.
void InstallProfile(ProfileInfo profile, std::vector<Defect> defects, uint64_t seed);

// Profile names of dtypes: "float32", "bfloat16", "int64", ...
std::string DtypeName(c10::ScalarType t);
// Raises the device's unsupported-dtype error if the active profile does not support `t`.
void CheckDtype(c10::ScalarType t);

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0);
// Counts one call of `name` taking `ms` in one of the tables of Counters, and charges the
// simulated clock `charge` (when given and the clock is not paused), under one lock.
void RecordCall(std::map<std::string, OpStats> Counters::*table, const std::string& name, double ms,
                const OpCharge* charge = nullptr);
// The seed of the performance defects' RNG, from the device seed.
uint64_t PerfSeed(uint64_t seed);

}  // namespace ts::simdevice::internal
