// Registrations of the PrivateUse1 backend with the dispatcher, all in one place (torch_openreg
// style): the runtime ops, one boxed kernel per op of the kernel set, the counted fallback for
// everything else, and the one autograd-key override a custom device needs. The allocator and
// the device guard register themselves in allocator.cc and guard.cc.
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "workers/simdevice/internal/fallback.h"
#include "workers/simdevice/internal/kernel_set.h"
#include "workers/simdevice/internal/kernels.h"
#include "workers/simdevice/internal/runtime_ops.h"

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace ts::simdevice::internal;
  m.impl("empty.memory_format", TORCH_FN(EmptyMemoryFormat));
  m.impl("empty_strided", TORCH_FN(EmptyStrided));
  m.impl("_copy_from", TORCH_FN(CopyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(CopyFromAndResize));
  m.impl("resize_", TORCH_FN(Resize));
  m.impl("as_strided", TORCH_FN(AsStrided));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("convolution_overrideable", TORCH_FN(ConvolutionOverrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(ConvolutionBackwardOverrideable));
  for (const auto& k : KernelSet()) {
    m.impl(k.name, torch::CppFunction::makeFromBoxedFunction<&KernelEntry>());
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&ts::simdevice::internal::FallbackEntry>());
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type",
         TORCH_FN(ts::simdevice::internal::HasCompatibleShallowCopyType));
}
