#include "workers/simdevice/internal/runtime_ops.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>

#include "workers/simdevice/internal/allocator.h"
#include "workers/simdevice/internal/device_state.h"
#include "workers/simdevice/internal/perf_clock.h"

namespace ts::simdevice::internal {
namespace {

constexpr c10::DispatchKeySet kDeviceKeys(c10::DispatchKey::PrivateUse1);

}  // namespace

at::Tensor AsCpuAlias(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kDeviceType) return t;
  auto opts = t.options().device(c10::kCPU);
  if (t.numel() == 0 || t.data_ptr() == nullptr) {
    return at::empty_strided(t.sizes(), t.strides(), opts);
  }
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), opts);
}

at::Tensor EmptyDevice(at::IntArrayRef size, at::IntArrayRef stride, at::ScalarType dtype) {
  CheckDtype(dtype);
  return at::detail::empty_strided_generic(size, stride, DeviceAllocator(), kDeviceKeys, dtype);
}

at::Tensor EmptyMemoryFormat(at::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                             c10::optional<at::Layout> /*layout*/,
                             c10::optional<at::Device> /*device*/,
                             c10::optional<bool> /*pin_memory*/,
                             c10::optional<at::MemoryFormat> memory_format) {
  const auto st = c10::dtype_or_default(dtype);
  CheckDtype(st);
  return at::detail::empty_generic(size, DeviceAllocator(), kDeviceKeys, st, memory_format);
}

at::Tensor EmptyStrided(at::IntArrayRef size, at::IntArrayRef stride,
                        c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> /*layout*/,
                        c10::optional<at::Device> /*device*/,
                        c10::optional<bool> /*pin_memory*/) {
  return EmptyDevice(size, stride, c10::dtype_or_default(dtype));
}

at::Tensor CopyFrom(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  if (self.device().type() == kDeviceType || dst.device().type() == kDeviceType) {
    CheckDtype(dst.scalar_type());
  }
  at::Tensor dst_cpu = AsCpuAlias(dst);
  dst_cpu.copy_(AsCpuAlias(self));
  ChargeCopy(self, dst);
  return dst;
}

at::Tensor CopyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return CopyFrom(self, dst, false);
}

const at::Tensor& Resize(const at::Tensor& self, at::IntArrayRef size,
                         c10::optional<at::MemoryFormat> memory_format) {
  // The CPU implementation reallocates through the storage's own allocator (ours) and only
  // touches host memory, which is what device memory is here.
  return at::native::resize_(self, size, memory_format);
}

at::Tensor AsStrided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                     c10::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

bool HasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

at::Tensor ConvolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const c10::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                   at::IntArrayRef padding, at::IntArrayRef dilation,
                                   bool transposed, at::IntArrayRef output_padding,
                                   int64_t groups) {
  return at::convolution(input, weight, bias, stride, padding, dilation, transposed,
                         output_padding, groups);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ConvolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  const int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  return at::convolution_backward(grad_output, input, weight,
                                  at::OptionalIntArrayRef(at::IntArrayRef(&out_channels, 1)),
                                  stride, padding, dilation, transposed, output_padding, groups,
                                  output_mask);
}

}  // namespace ts::simdevice::internal
