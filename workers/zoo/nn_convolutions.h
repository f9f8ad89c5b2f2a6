// nn::ConvTranspose2d (DPT's reassemble stage) and nn::DilatedConv2d (DeepLabV3's atrous
// convolutions, MobileViT's dilated stages), declared apart from nn.h so that adding them did not
// rebuild every file that includes nn.h; defined in nn.cc beside Conv2d, whose bf16 emulation
// they share.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace ts::zoo::nn {

// NCHW transposed conv2d (weight [in, out, kH, kW]), stride `stride`, no padding; `b` may be
// undefined. Emulated like Conv2d.
at::Tensor ConvTranspose2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                           int64_t stride);

// NCHW conv2d with `dilation`, `b` may be undefined. Emulated like Conv2d.
at::Tensor DilatedConv2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                         int64_t stride, int64_t padding, int64_t dilation, int64_t groups = 1);

}  // namespace ts::zoo::nn
