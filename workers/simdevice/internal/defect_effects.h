// Applying seeded defects to a device result. PRIVATE to workers/simdevice, like the defect list
// (internal/defects.h): nothing outside this folder may know which defect fired.
//
// Thread-safety: probability draws take DeviceState::mu; effects write only the given result.
#pragma once

#include <ATen/ATen.h>

#include "workers/simdevice/internal/op_info.h"
#include "workers/simdevice/runtime.h"

namespace ts::simdevice::internal {

// Applies every defect of `info` whose mode and conditions match to `primary_cpu`, the op's
// primary result as the device produced it (a CPU view of device memory, so the effects land in
// the device tensor). An undefined result is left alone. May raise `[simdevice:device_error]`,
// sleep, or abort the process, as the defect says.
void ApplyDefects(const OpInfo& info, const at::Tensor& primary_cpu, ExecMode mode);

// What the performance defects of `info` (slow, vector_engine) whose mode and conditions match
// do to the op's cost: the product of the `slow` factors, and whether a vector_engine defect
// applies. Flaky ones draw from a device RNG of their own, so a performance defect never moves
// the draws of the accuracy defects. Never changes the result.
struct PerfEffect {
  double slow = 1;
  bool vector_engine = false;
};
PerfEffect PerfDefectsOf(const OpInfo& info, const at::Tensor& primary_cpu, ExecMode mode);

}  // namespace ts::simdevice::internal
