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
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
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

// ---- Op checking: the engine's op-by-op replay sees every op the device computes.

// One op computed by the device: a native kernel in eager, or any op lowered inside a compiled
// segment (never the CPU fallback, which is not the device's arithmetic).
struct DeviceOpCall {
  const c10::OperatorHandle* op = nullptr;
  std::string name;  // "aten::gelu", with overload when it has one
  ExecMode mode = ExecMode::kEager;
  // The arguments as they were before the op ran (in schema order); tensors, also inside tensor
  // lists, are CPU copies of the device tensors.
  std::vector<c10::IValue> inputs;
  // The device's results, each a CPU view of device memory (tensor returns, and the elements of
  // tensor-list returns, in order; undefined where a return is not a tensor). Writing into them
  // changes what the device returned: a replay may substitute reference values.
  std::vector<at::Tensor> results;
};
using OpChecker = std::function<void(DeviceOpCall& call)>;

// Installs `checker` for its lifetime: it is called, on the thread running the op (autograd's
// device thread for backward ops), after each device op has computed and before its results
// are used. Not nested; process-global like the rest of the device state. The checker must only
// run CPU ops. Costs one atomic load per op when none is installed.
class ScopedOpChecker {
 public:
  explicit ScopedOpChecker(OpChecker checker);
  ~ScopedOpChecker();
  ScopedOpChecker(const ScopedOpChecker&) = delete;
  ScopedOpChecker& operator=(const ScopedOpChecker&) = delete;
};

enum class FaultKind {
  kNone,              // not a device fault (e.g. a shape error in the model itself)
  kDeviceError,       // the device reported an error executing a kernel
  kOom,               // allocation beyond memory_bytes
  kUnsupportedDtype,  // a dtype the profile lists as unsupported reached the device
};
FaultKind ClassifyFault(const std::string& what);

}  // namespace ts::simdevice
