#include "workers/simdevice/internal/perf_clock.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>

#include "workers/simdevice/internal/defect_effects.h"
#include "workers/simdevice/internal/device_state.h"
#include "workers/simdevice/internal/op_info.h"

namespace ts::simdevice::internal {
namespace {

std::atomic<bool> g_paused{false};
std::atomic<bool> g_enabled{[] {
  const char* v = std::getenv("TS_SIMDEVICE_CLOCK");
  return v == nullptr || std::string(v) != "off";
}()};
thread_local FallbackTransfers* t_fallback = nullptr;

void Charge(const std::string& name, const OpCharge& charge) {
  if (ClockPaused()) return;
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  ChargeLocked(s.clock, name, charge);
}

double Bytes(const at::Tensor& t) {
  return static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
}

class SimulatedClock final : public DeviceClock {
 public:
  void Reset() override {
    auto& s = State();
    std::lock_guard<std::mutex> lock(s.mu);
    s.clock = ClockAccum();
  }

  PerfCounters Snapshot() const override {
    auto& s = State();
    std::lock_guard<std::mutex> lock(s.mu);
    PerfCounters c = s.clock.counters;
    c.peak_flops = s.cost.peak_flops();
    return c;
  }

  void SetPaused(bool paused) override { g_paused.store(paused); }

  void EndSegment(double boundary_bytes) override {
    if (ClockPaused()) return;
    auto& s = State();
    std::lock_guard<std::mutex> lock(s.mu);
    OpCharge c;
    c.us = s.cost.SegmentOverheadUs(s.clock.segment_compute_us, boundary_bytes);
    c.bytes = boundary_bytes;
    c.launches = 1;
    ChargeLocked(s.clock, "[segment]", c);
    s.clock.segment_compute_us = 0;
  }

  void GraphBreakSync() override {
    OpCharge c;
    c.us = State().cost.spec().graph_break_us;
    Charge("[sync]", c);
  }

  void HostOp(const std::string& op, const torch::jit::Stack& inputs,
              const torch::jit::Stack& outputs) override {
    const OpCostClass cls = CostClassOf(op);
    OpShapes shapes;
    ShapesBefore(cls, inputs, inputs.size(), &shapes);
    ShapesAfter(cls, outputs, outputs.size(), &shapes);
    const OpWork w = WorkOf(cls, shapes);
    OpCharge c;
    c.us = State().cost.HostUs(w.flops, w.bytes);
    c.flops = w.flops;
    c.fallback_us = c.us;
    Charge(op, c);
  }
};

SimulatedClock g_sim_clock;
std::atomic<DeviceClock*> g_clock{&g_sim_clock};

}  // namespace

bool ClockPaused() {
  return g_paused.load(std::memory_order_relaxed) || !g_enabled.load(std::memory_order_relaxed);
}

OpCharge DeviceOpCharge(const OpInfo& info, const OpShapes& shapes, ExecMode mode,
                        const PerfEffect& effect) {
  const CostModel& cost = State().cost;
  const OpWork w = WorkOf(info.cost, shapes);
  const Engine engine = effect.vector_engine ? Engine::kVector : info.cost.engine;
  const double peak =
      cost.Peak(engine, engine == Engine::kMatrix ? cost.MatrixDtype(shapes.dtype) : shapes.dtype);
  OpCharge c;
  c.flops = w.flops;
  if (mode == ExecMode::kCompiled) {
    c.us = CostModel::ComputeUs(w.flops, peak, info.efficiency) * effect.slow;
    c.compiled = true;
    return c;
  }
  c.us = (cost.RooflineUs(w.flops, peak, info.efficiency, w.bytes) + info.launch_us) * effect.slow;
  c.bytes = w.bytes;
  c.launches = 1;
  return c;
}

OpCharge FallbackCharge(const OpInfo& info, const OpShapes& shapes, double transfer_us,
                        double transfer_bytes) {
  const OpWork w = WorkOf(info.cost, shapes);
  OpCharge c;
  c.flops = w.flops;
  c.us = State().cost.HostUs(w.flops, w.bytes) + transfer_us;
  c.fallback_us = c.us;
  c.transfer_bytes = transfer_bytes;
  return c;
}

void ChargeLocked(ClockAccum& accum, const std::string& name, const OpCharge& charge) {
  PerfCounters& c = accum.counters;
  c.device_us += charge.us;
  c.flops += charge.flops;
  c.bytes += charge.bytes;
  c.launches += charge.launches;
  c.fallback_us += charge.fallback_us;
  c.transfer_bytes += charge.transfer_bytes;
  if (charge.compiled) accum.segment_compute_us += charge.us;
  OpTime& op = c.ops[name];
  op.calls += 1;
  op.us += charge.us;
}

FallbackTransfers::FallbackTransfers() : previous_(t_fallback) { t_fallback = this; }
FallbackTransfers::~FallbackTransfers() { t_fallback = previous_; }
FallbackTransfers* FallbackTransfers::Current() { return t_fallback; }

void ChargeCopy(const at::Tensor& src, const at::Tensor& dst) {
  if (ClockPaused() || dst.numel() == 0) return;
  const double bytes = Bytes(dst);
  const bool over_link = src.device().type() != kDeviceType || dst.device().type() != kDeviceType;
  const CostModel& cost = State().cost;
  OpCharge c;
  if (over_link) {
    c.us = cost.TransferUs(bytes);
    c.transfer_bytes = bytes;
    if (FallbackTransfers* scope = FallbackTransfers::Current()) {
      scope->us += c.us;
      scope->bytes += bytes;
      return;
    }
    return Charge("[transfer]", c);
  }
  if (CurrentExecMode() == ExecMode::kCompiled) return;  // fused: the segment's boundary pays
  const double peak = cost.Peak(Engine::kVector, dst.scalar_type());
  c.us = cost.RooflineUs(0, peak, cost.spec().efficiency, 2 * bytes) + cost.spec().launch_us;
  c.bytes = 2 * bytes;
  c.launches = 1;
  Charge("aten::copy_", c);
}

}  // namespace ts::simdevice::internal

namespace ts::simdevice {

DeviceClock& ActiveClock() { return *internal::g_clock.load(); }

void InstallClock(DeviceClock* clock) {
  internal::g_clock.store(clock != nullptr ? clock : &internal::g_sim_clock);
}

void SetClockEnabled(bool enabled) { internal::g_enabled.store(enabled); }
bool ClockEnabled() { return internal::g_enabled.load(std::memory_order_relaxed); }

double Mfu(const PerfCounters& c) {
  if (!(c.device_us > 0) || !(c.peak_flops > 0)) return std::numeric_limits<double>::quiet_NaN();
  return c.flops / (c.device_us * 1e-6 * c.peak_flops);
}

}  // namespace ts::simdevice
