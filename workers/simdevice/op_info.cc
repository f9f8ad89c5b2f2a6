#include "workers/simdevice/internal/op_info.h"

#include <mutex>
#include <unordered_map>

#include "workers/simdevice/internal/device_state.h"

namespace ts::simdevice::internal {
namespace {

OpInfo BuildOpInfo(const c10::FunctionSchema& schema) {
  OpInfo info;
  info.name = schema.name();
  if (!schema.overload_name().empty()) info.name += "." + schema.overload_name();
  info.kernel = FindKernel(info.name);
  {
    auto& s = State();
    std::lock_guard<std::mutex> lock(s.mu);
    info.native = info.kernel != nullptr && OpListMatches(s.profile.native_ops, info.name);
    info.numerics = s.profile.numerics;
    for (const auto& d : s.defects) {
      if (d.op != info.name && d.op != StripOverload(info.name)) continue;
      (IsPerfEffect(d.kind) ? info.perf_defects : info.defects).push_back(&d);
    }
    const PerformanceSpec& perf = s.profile.performance;
    info.efficiency = perf.efficiency;
    info.launch_us = perf.launch_us;
    auto k = perf.kernels.find(info.name);
    if (k == perf.kernels.end()) k = perf.kernels.find(StripOverload(info.name));
    if (k != perf.kernels.end()) {
      if (k->second.efficiency > 0) info.efficiency = k->second.efficiency;
      if (k->second.launch_us >= 0) info.launch_us = k->second.launch_us;
    }
  }
  info.cost = CostClassOf(info.name);
  if (info.kernel != nullptr) {
    const auto& args = schema.arguments();
    for (size_t i = 0; i < args.size(); ++i) {
      for (const auto& r : info.kernel->rounded_args) {
        if (args[i].name() == r) info.rounded_arg_idx.push_back(i);
      }
    }
  }
  return info;
}

}  // namespace

const OpInfo& LookupOp(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const void*, OpInfo> cache;
  thread_local int64_t cache_generation = 0;
  const int64_t gen = State().generation.load(std::memory_order_acquire);
  if (gen != cache_generation) {
    cache.clear();
    cache_generation = gen;
  }
  const void* key = &op.schema();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  return cache.emplace(key, BuildOpInfo(op.schema())).first->second;
}

}  // namespace ts::simdevice::internal
