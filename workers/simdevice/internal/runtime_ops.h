// Runtime ops of the PrivateUse1 backend: allocation, copies, resize and views, plus the
// convolution *_overrideable redirects. They are plumbing, not compute, and are never counted.
// registration.cc registers them; kernels and the fallback use AsCpuAlias and EmptyDevice.
// PRIVATE to workers/simdevice.
//
// Thread-safety: all are thread-safe; errors are c10::Error with a simdevice tag.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>

#include <ATen/ATen.h>

namespace ts::simdevice::internal {

// A CPU tensor aliasing the host memory of device tensor `t` (no copy); other tensors unchanged.
at::Tensor AsCpuAlias(const at::Tensor& t);
// An uninitialised device tensor; raises the unsupported-dtype error for a dtype the profile
// does not support and `[simdevice:oom]` beyond capacity.
at::Tensor EmptyDevice(at::IntArrayRef size, at::IntArrayRef stride, at::ScalarType dtype);

at::Tensor EmptyMemoryFormat(at::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                             c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                             c10::optional<bool> pin_memory,
                             c10::optional<at::MemoryFormat> memory_format);
at::Tensor EmptyStrided(at::IntArrayRef size, at::IntArrayRef stride,
                        c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                        c10::optional<at::Device> device, c10::optional<bool> pin_memory);
at::Tensor CopyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor CopyFromAndResize(const at::Tensor& self, const at::Tensor& dst);
const at::Tensor& Resize(const at::Tensor& self, at::IntArrayRef size,
                         c10::optional<at::MemoryFormat> memory_format);
at::Tensor AsStrided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                     c10::optional<int64_t> storage_offset);
bool HasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from);

// at::_convolution (what traces record for conv2d) picks its backend by device type and, for
// any device but CPU/CUDA/MKLDNN, calls the *_overrideable ops, whose CPU kernels only throw.
// These route to the regular convolution ops, which this device runs (native or fallback).
at::Tensor ConvolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const c10::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                   at::IntArrayRef padding, at::IntArrayRef dilation,
                                   bool transposed, at::IntArrayRef output_padding,
                                   int64_t groups);
std::tuple<at::Tensor, at::Tensor, at::Tensor> ConvolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask);

}  // namespace ts::simdevice::internal
