// What the backend knows about one operator under the active profile: its kernel (if any),
// whether it runs natively, which operands matmul numerics round, and the defects naming it.
// PRIVATE to workers/simdevice (it points into the defect list).
//
// Thread-safety: entries are cached per thread and rebuilt after InstallProfile bumps the
// generation; a returned reference is valid until the calling thread next sees a new profile.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstddef>
#include <string>
#include <vector>

#include "workers/simdevice/internal/cost_model.h"
#include "workers/simdevice/internal/defects.h"
#include "workers/simdevice/internal/kernel_set.h"
#include "workers/simdevice/profile.h"

namespace ts::simdevice::internal {

struct OpInfo {
  std::string name;  // "aten::add.Tensor"
  const KernelDef* kernel = nullptr;
  bool native = false;  // has a kernel and the profile lists it
  std::vector<size_t> rounded_arg_idx;
  std::vector<const Defect*> defects;  // accuracy defects naming this op (into State().defects)
  std::vector<const Defect*> perf_defects;  // performance defects (slow, vector_engine) naming it
  Numerics numerics;                        // of the profile this entry was built under
  // The cost model's view (README.md, "Cost model"): its class, and the efficiency and launch
  // overhead of its kernel (the profile's `performance.kernels` entry, else the device's).
  OpCostClass cost;
  double efficiency = 1;
  double launch_us = 0;
};

const OpInfo& LookupOp(const c10::OperatorHandle& op);

}  // namespace ts::simdevice::internal
