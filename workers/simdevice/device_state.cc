#include "workers/simdevice/internal/device_state.h"

#include <c10/util/Exception.h>

#include "workers/simdevice/internal/allocator.h"

namespace ts::simdevice::internal {
namespace {

ProfileInfo DefaultProfile() {
  ProfileInfo p;
  p.name = "sim-default";
  p.sdk_version = "0.0.0";
  p.memory_bytes = int64_t{1} << 32;
  p.compiler.supported_ops = {};
  return p;
}

// Which dtypes are unsupported, one bit per c10::ScalarType. A separate atomic because every
// allocation checks it (hot path); written only by InstallProfile.
std::atomic<uint64_t> g_unsupported_mask{0};

uint64_t UnsupportedMask(const std::set<std::string>& unsupported) {
  uint64_t mask = 0;
  for (int t = 0; t < static_cast<int>(c10::ScalarType::NumOptions); ++t) {
    if (unsupported.count(DtypeName(static_cast<c10::ScalarType>(t)))) mask |= uint64_t{1} << t;
  }
  return mask;
}

}  // namespace

DeviceState& State() {
  static DeviceState* s = [] {
    auto* state = new DeviceState();  // never destroyed: kernels may run at exit
    state->profile = DefaultProfile();
    state->cost = CostModel(state->profile.performance, state->profile.numerics.matmul);
    return state;
  }();
  return *s;
}

void InstallProfile(ProfileInfo profile, std::vector<Defect> defects, uint64_t seed) {
  const uint64_t mask = UnsupportedMask(profile.unsupported_dtypes);
  auto& s = State();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    SetMemoryCapacity(profile.memory_bytes);
    s.profile = std::move(profile);
    s.defects = std::move(defects);
    s.rng.seed(seed);
    s.perf_rng.seed(PerfSeed(seed));
    s.cost = CostModel(s.profile.performance, s.profile.numerics.matmul);
    g_unsupported_mask.store(mask);
  }
  s.generation.fetch_add(1, std::memory_order_release);
}

std::string DtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "float32";
    case c10::kDouble: return "float64";
    case c10::kHalf: return "float16";
    case c10::kBFloat16: return "bfloat16";
    case c10::kComplexFloat: return "complex64";
    case c10::kComplexDouble: return "complex128";
    case c10::kChar: return "int8";
    case c10::kByte: return "uint8";
    case c10::kShort: return "int16";
    case c10::kInt: return "int32";
    case c10::kLong: return "int64";
    case c10::kBool: return "bool";
    default: return c10::toString(t);
  }
}

void CheckDtype(c10::ScalarType t) {
  if (g_unsupported_mask.load(std::memory_order_relaxed) & (uint64_t{1} << static_cast<int>(t))) {
    TORCH_CHECK(false, kTagDtype, "dtype ", DtypeName(t), " is not supported by device ",
                ActiveProfile().name);
  }
}

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void RecordCall(std::map<std::string, OpStats> Counters::*table, const std::string& name, double ms,
                const OpCharge* charge) {
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  auto& st = (s.counters.*table)[name];
  st.calls += 1;
  st.ms += ms;
  if (charge != nullptr && !ClockPaused()) ChargeLocked(s.clock, name, *charge);
}

uint64_t PerfSeed(uint64_t seed) { return seed ^ 0x5DEECE66Dull; }

}  // namespace ts::simdevice::internal
