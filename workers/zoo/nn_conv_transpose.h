// nn::ConvTranspose2d (DPT's reassemble stage), declared apart from nn.h so that adding it did
// not rebuild every file that includes nn.h; defined in nn.cc beside Conv2d, whose bf16
// emulation it shares.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace ts::zoo::nn {

// NCHW transposed conv2d (weight [in, out, kH, kW]), stride `stride`, no padding; `b` may be
// undefined. Emulated like Conv2d.
at::Tensor ConvTranspose2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                           int64_t stride);

}  // namespace ts::zoo::nn
