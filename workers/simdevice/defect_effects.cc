#include "workers/simdevice/internal/defect_effects.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

#include <c10/util/Exception.h>

#include "workers/simdevice/internal/device_state.h"

namespace ts::simdevice::internal {
namespace {

bool DefectApplies(const Defect& d, const at::Tensor& out, ExecMode mode,
                   std::mt19937_64 DeviceState::*rng) {
  if (d.mode == DefectMode::kEager && mode != ExecMode::kEager) return false;
  if (d.mode == DefectMode::kCompiled && mode != ExecMode::kCompiled) return false;
  const auto& w = d.when;
  if (w.dtype && DtypeName(out.scalar_type()) != *w.dtype) return false;
  const int64_t numel = out.numel();
  if (w.min_numel && numel < *w.min_numel) return false;
  if (w.max_numel && numel > *w.max_numel) return false;
  const int64_t last = out.dim() == 0 ? 1 : out.size(-1);
  if (w.min_last_dim && last < *w.min_last_dim) return false;
  if (w.max_last_dim && last > *w.max_last_dim) return false;
  if (w.rank && out.dim() != *w.rank) return false;
  if (w.probability < 1.0) {
    auto& s = State();
    std::lock_guard<std::mutex> lock(s.mu);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (u(s.*rng) >= w.probability) return false;
  }
  return true;
}

// zero_tail and nan work on the logical row-major order, then write back if `out_cpu` is
// strided.
void DamageElements(const Defect& d, const at::Tensor& out_cpu) {
  if (!at::isFloatingType(out_cpu.scalar_type()) || out_cpu.numel() == 0) return;
  at::Tensor flat =
      out_cpu.is_contiguous() ? out_cpu.view({-1}) : out_cpu.contiguous().view({-1});
  const int64_t n = flat.numel();
  if (d.kind == EffectKind::kNan) {
    flat.narrow(0, 0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  } else {
    const int64_t k = std::min<int64_t>(n, static_cast<int64_t>(d.value));
    flat.narrow(0, n - k, k).zero_();
  }
  if (!out_cpu.is_contiguous()) out_cpu.copy_(flat.view(out_cpu.sizes()));
}

void ApplyEffect(const Defect& d, const std::string& op, const at::Tensor& out_cpu) {
  switch (d.kind) {
    case EffectKind::kScale:
      if (at::isFloatingType(out_cpu.scalar_type())) out_cpu.mul_(d.value);
      return;
    case EffectKind::kOffset:
      if (at::isFloatingType(out_cpu.scalar_type())) out_cpu.add_(d.value);
      return;
    case EffectKind::kZeroTail:
    case EffectKind::kNan:
      DamageElements(d, out_cpu);
      return;
    case EffectKind::kError:
      TORCH_CHECK(false, kTagError, op, ": kernel execution failed (device status 0x2f)");
    case EffectKind::kAbort:
      std::fprintf(stderr, "simdevice: fatal device fault in %s, aborting\n", op.c_str());
      std::fflush(stderr);
      std::abort();
    case EffectKind::kSleepMs:
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(d.value));
      return;
    case EffectKind::kSlow:
    case EffectKind::kVectorEngine:
      return;  // costs, not numbers: PerfDefectsOf
  }
}

}  // namespace

void ApplyDefects(const OpInfo& info, const at::Tensor& primary_cpu, ExecMode mode) {
  if (!primary_cpu.defined()) return;
  for (const Defect* d : info.defects) {
    if (DefectApplies(*d, primary_cpu, mode, &DeviceState::rng)) {
      ApplyEffect(*d, info.name, primary_cpu);
    }
  }
}

PerfEffect PerfDefectsOf(const OpInfo& info, const at::Tensor& primary_cpu, ExecMode mode) {
  PerfEffect e;
  if (info.perf_defects.empty() || !primary_cpu.defined()) return e;
  for (const Defect* d : info.perf_defects) {
    if (!DefectApplies(*d, primary_cpu, mode, &DeviceState::perf_rng)) continue;
    if (d->kind == EffectKind::kSlow) e.slow *= d->value;
    if (d->kind == EffectKind::kVectorEngine) e.vector_engine = true;
  }
  return e;
}

}  // namespace ts::simdevice::internal
