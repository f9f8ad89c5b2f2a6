// The simulated device clock (device_clock.h) and the charges that advance it: what each op,
// transfer, compiled segment and graph break costs under the cost model (internal/cost_model.h).
// PRIVATE to workers/simdevice.
//
// Where charges come from: the kernels (DeviceOpCharge, through RecordCall, under the same lock
// as the op counters, so an op costs one lock), the CPU fallback (FallbackCharge, with the
// transfers it made), the runtime's copies (ChargeCopy) and the engine (EndSegment,
// GraphBreakSync, HostOp through the DeviceClock interface).
//
// Thread-safety: the accumulators live in DeviceState and are guarded by DeviceState::mu; the
// pause flag is an atomic; FallbackTransfers is per thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "workers/simdevice/device_clock.h"
#include "workers/simdevice/internal/cost_model.h"
#include "workers/simdevice/runtime.h"

namespace ts::simdevice::internal {

struct OpInfo;
struct PerfEffect;

// The clock's state since its last Reset.
struct ClockAccum {
  PerfCounters counters;
  double segment_compute_us = 0;  // compute of compiled ops since the last EndSegment
};

// What one charge adds to the clock.
struct OpCharge {
  double us = 0;
  double flops = 0;
  double bytes = 0;  // device memory traffic
  int64_t launches = 0;
  double fallback_us = 0;
  double transfer_bytes = 0;
  bool compiled = false;  // compute inside a compiled segment: no launch or traffic of its own
};

// An op run by a device kernel in eager: (roofline + launch) x slow. Lowered inside a compiled
// segment: its compute alone (flops / (efficiency x peak)) x slow; EndSegment adds the launch
// and the boundary traffic.
OpCharge DeviceOpCharge(const OpInfo& info, const OpShapes& shapes, ExecMode mode,
                        const PerfEffect& effect);
// An op the CPU fallback ran: the host's compute (fixed host spec) plus the transfers it made.
OpCharge FallbackCharge(const OpInfo& info, const OpShapes& shapes, double transfer_us,
                        double transfer_bytes);

// Adds `charge` to `accum` and to op `name`. The caller holds DeviceState::mu.
void ChargeLocked(ClockAccum& accum, const std::string& name, const OpCharge& charge);
bool ClockPaused();

// Transfers made while a CPU fallback runs are that op's: it opens a scope on its thread and
// ChargeCopy adds to the innermost one instead of charging "[transfer]".
class FallbackTransfers {
 public:
  FallbackTransfers();
  ~FallbackTransfers();
  FallbackTransfers(const FallbackTransfers&) = delete;
  FallbackTransfers& operator=(const FallbackTransfers&) = delete;
  static FallbackTransfers* Current();

  double us = 0;
  double bytes = 0;

 private:
  FallbackTransfers* previous_;
};

// A copy into `dst` (CopyFrom): over the host link when one side is the host; within the device
// a memory-bound kernel ("aten::copy_") in eager, fused away inside a compiled segment.
void ChargeCopy(const at::Tensor& src, const at::Tensor& dst);

}  // namespace ts::simdevice::internal
