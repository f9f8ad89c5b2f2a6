// A mode's performance record from the device clock (verdict.h, ModePerf), and the compile
// mode's ratios over eager.
#include <algorithm>
#include <cmath>
#include <vector>

#include "workers/engine/stages_internal.h"

namespace ts::engine::internal {

ModePerf PerfOf(const simdevice::PerfCounters& c, int64_t peak_device_bytes) {
  ModePerf p;
  p.device_us = c.device_us;
  p.flops = c.flops;
  p.bytes = c.bytes;
  p.mfu = simdevice::Mfu(c);
  p.launches = c.launches;
  p.fallback_us = c.fallback_us;
  p.transfer_bytes = c.transfer_bytes;
  p.peak_device_bytes = peak_device_bytes;
  std::vector<OpTimeShare> ops;
  ops.reserve(c.ops.size());
  for (const auto& [op, t] : c.ops) {
    ops.push_back({op, t.us, c.device_us > 0 ? t.us / c.device_us : 0.0});
  }
  // Largest first; equal times by name, so the list is the same run to run.
  std::sort(ops.begin(), ops.end(), [](const OpTimeShare& a, const OpTimeShare& b) {
    return a.us != b.us ? a.us > b.us : a.op < b.op;
  });
  if (ops.size() > kTopOps) ops.resize(kTopOps);
  p.top_ops = std::move(ops);
  return p;
}

void SetCompileRatios(ModelResult& r) {
  auto eager = r.modes.find("eager");
  auto compile = r.modes.find("compile");
  if (eager == r.modes.end() || compile == r.modes.end()) return;
  const auto& e = eager->second.perf;
  auto& c = compile->second.perf;
  if (!e || !c || compile->second.status != Verdict::kPass) return;
  if (c->device_us > 0) c->speedup = e->device_us / c->device_us;
  if (c->peak_device_bytes > 0) {
    c->compression =
        static_cast<double>(e->peak_device_bytes) / static_cast<double>(c->peak_device_bytes);
  }
}

}  // namespace ts::engine::internal
