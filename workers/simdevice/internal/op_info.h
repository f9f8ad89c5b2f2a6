// What the backend knows about one operator under the active profile: its kernel (if any),
// whether it runs natively, which operands matmul numerics round, and the defects naming it.
// PRIVATE to workers/simdevice (it points into the defect list).
//
// Thread-safety: entries are cached per thread and rebuilt after InstallProfile bumps the
// generation; a returned reference is valid until the calling thread next sees a new profile.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>

#include "workers/simdevice/internal/defects.h"
#include "workers/simdevice/internal/kernel_set.h"
#include "workers/simdevice/profile.h"

namespace ts::simdevice::internal {

struct OpInfo {
  std::string name;  // "aten::add.Tensor"
  const KernelDef* kernel = nullptr;
  bool native = false;  // has a kernel and the profile lists it
  std::vector<size_t> rounded_arg_idx;
  std::vector<const Defect*> defects;  // those naming this op; pointers into State().defects
  Numerics numerics;                    // of the profile this entry was built under
};

const OpInfo& LookupOp(const c10::OperatorHandle& op);

}  // namespace ts::simdevice::internal
