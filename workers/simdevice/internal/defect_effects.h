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

}  // namespace ts::simdevice::internal
