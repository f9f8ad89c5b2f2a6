// The simulated accelerator: a libtorch 1.13 out-of-tree backend on the PrivateUse1 dispatch key.
//
// Linking ts::simdevice registers the backend (allocator, device guard, native kernels, counted
// CPU fallback). Tensors on SimDevice() live in host memory owned by the simulator's allocator,
// limited to the active profile's memory_bytes. Ops listed in the profile's native_ops run device
// kernels with the profile's declared numerics; every other op reaching the device goes through a
// counted CPU fallback (calls and wall time per op).
//
// Thread-safety: one simulated device per process. Activation, counters and the execution mode
// are process-global (autograd runs device backward ops on its own device thread, which must see
// the same mode); all functions here may be called from any thread. Activate() must not race
// with running ops.
//
// Errors raised by the device are c10::Error whose message starts with a tag that
// ClassifyFault() understands; callers must not parse the text themselves.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include "workers/base/status.h"
#include "workers/simdevice/profile.h"

namespace ts::simdevice {

// The device: privateuseone:0.
c10::Device SimDevice();

// Parses, validates and installs a profile (including its private defect list). `seed` seeds the
// device RNG that decides flaky (probability < 1) defects. On error the previous profile stays.
StatusOr<ProfileInfo> Activate(const std::string& profile_json, uint64_t seed = 0);
StatusOr<ProfileInfo> ActivateFile(const std::string& path, uint64_t seed = 0);
// Profile currently active; a permissive built-in default until Activate succeeds.
ProfileInfo ActiveProfile();
// Reseeds the device RNG (the engine does this per model so flaky draws are reproducible).
void Reseed(uint64_t seed);

// Execution mode. kCompiled means the op is part of a compiled device segment: every op that
// reaches the device is lowered by the device compiler (never a CPU fallback), per-op result
// rounding is fused away, and defects whose mode is `compiled` apply.
enum class ExecMode { kEager, kCompiled };
ExecMode CurrentExecMode();
class ScopedExecMode {
 public:
  explicit ScopedExecMode(ExecMode mode);
  ~ScopedExecMode();
  ScopedExecMode(const ScopedExecMode&) = delete;
  ScopedExecMode& operator=(const ScopedExecMode&) = delete;

 private:
  ExecMode previous_;
};

struct OpStats {
  int64_t calls = 0;
  double ms = 0;
};
struct Counters {
  std::map<std::string, OpStats> native;    // op (with overload) -> device kernel calls
  std::map<std::string, OpStats> fallback;  // op -> CPU fallback calls and time
  std::map<std::string, OpStats> compiled;  // op -> calls lowered inside compiled segments
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
};
// Snapshot / reset of the counters. Runtime plumbing (empty, copy, resize, views) is not
// counted: these counters measure compute ops, which is what op coverage is about.
Counters SnapshotCounters();
void ResetCounters();  // also resets peak_bytes to current_bytes

enum class FaultKind {
  kNone,              // not a device fault (e.g. a shape error in the model itself)
  kDeviceError,       // the device reported an error executing a kernel
  kOom,               // allocation beyond memory_bytes
  kUnsupportedDtype,  // a dtype the profile lists as unsupported reached the device
};
FaultKind ClassifyFault(const std::string& what);

}  // namespace ts::simdevice
