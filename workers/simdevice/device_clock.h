// The device clock: what a device reports about the time a step took on it, op by op.
//
// The simulated device implements it with its cost model (README.md, "Cost model"): every op
// the device runs advances a deterministic clock by its modelled time, so the figures are the
// same run to run. A real device implements the same interface with measured times (events
// around kernels, host timers around fallbacks) and reports through the same fields; the engine
// reads only this interface.
//
// The engine marks what the device cannot know by itself: where a compiled segment ends and
// how much data crossed its boundary, where a graph break makes the host wait, which ops of a
// compiled graph ran on the host, and which transfers are staging (moving the weights and
// inputs onto the device, and the outputs back) rather than part of the step.
//
// Thread-safety: the clock is process-global like the rest of the device; every method may be
// called from any thread (autograd runs backward ops on its own device thread).
#pragma once

#include <ATen/core/stack.h>

#include <cstdint>
#include <map>
#include <string>

namespace ts::simdevice {

struct OpTime {
  int64_t calls = 0;
  double us = 0;
};

// What the clock measured since its last Reset.
struct PerfCounters {
  double device_us = 0;       // the step's time on the device (everything below included)
  double flops = 0;           // work of every op the step ran (device and host)
  double bytes = 0;           // device memory traffic (HBM reads + writes)
  int64_t launches = 0;       // kernels launched (one per compiled segment)
  double fallback_us = 0;     // ops the host ran for the device (fallbacks, CPU segments)
  double transfer_bytes = 0;  // over the host link (fallback operands and results, breaks)
  double peak_flops = 0;      // FLOP/s that MFU is relative to (the device's highest peak)
  // Per op ("aten::mm"), the time charged to it; the pseudo-ops "[segment]" (a compiled
  // segment's launch and exposed memory time), "[sync]" (graph breaks) and "[transfer]" (host
  // link transfers outside fallbacks) hold the rest, so the times add up to device_us.
  std::map<std::string, OpTime> ops;
};

class DeviceClock {
 public:
  virtual ~DeviceClock() = default;

  // Starts a measured step: every counter back to zero.
  virtual void Reset() = 0;
  virtual PerfCounters Snapshot() const = 0;

  // While paused, nothing is charged: staging transfers (weights, inputs, outputs).
  virtual void SetPaused(bool paused) = 0;

  // Compiled execution. A device segment ends, having read `boundary_bytes` from device memory
  // (values produced outside it) and written those read after it.
  virtual void EndSegment(double boundary_bytes) = 0;
  // A graph break: the host waits for the device before running the CPU segment.
  virtual void GraphBreakSync() = 0;
  // An op of a CPU segment of a compiled graph, run by the host, with its operands and results.
  virtual void HostOp(const std::string& op, const torch::jit::Stack& inputs,
                      const torch::jit::Stack& outputs) = 0;
};

// The active device's clock: the simulated one unless InstallClock set another.
DeviceClock& ActiveClock();
// Installs `clock` (not owned; nullptr restores the simulated clock). Not while ops run.
void InstallClock(DeviceClock* clock);

// Pauses the active clock for its lifetime (staging).
class ScopedClockPause {
 public:
  ScopedClockPause() { ActiveClock().SetPaused(true); }
  ~ScopedClockPause() { ActiveClock().SetPaused(false); }
  ScopedClockPause(const ScopedClockPause&) = delete;
  ScopedClockPause& operator=(const ScopedClockPause&) = delete;
};

// flops / (device_us x peak_flops): NaN when nothing ran.
double Mfu(const PerfCounters& c);

// Whether the simulated clock runs (default: yes, unless the environment variable
// TS_SIMDEVICE_CLOCK is "off" at start-up). Off, kernels neither read their shapes nor charge
// anything, and every figure stays 0: what bench/RESULTS.md compares to measure the cost
// model's own overhead. Not while ops run.
void SetClockEnabled(bool enabled);
bool ClockEnabled();

}  // namespace ts::simdevice
