// Functional building blocks shared by every zoo family, over plain at:: ops.
//
// Contract with the engine:
//  * With emulation off (the default), each function calls ordinary ATen ops only
//    (aten::linear, aten::matmul, aten::softmax, aten::layer_norm, aten::conv2d, ...), so a
//    torch::jit::tracer trace of a model's Forward is an ordinary aten graph with no custom
//    autograd nodes.
//  * Dtype- and device-generic: masks, positions and rotary tables are created on the input's
//    device in the input's dtype (positions in int64, then cast).
//
// Numerics emulation: while a ScopedBf16MatmulEmulation is alive on the calling thread, every
// matmul-class op here (Linear, Matmul, Conv2d; so attention's two batched matmuls too) rounds
// its float operands (activation and weight, never the bias) to bfloat16 and back
// (`t.to(kBFloat16).to(t.scalar_type())`) before the op, and its output carries RoundGradBf16:
// identity in forward, rounds the incoming gradient to bfloat16 in backward. The operand
// rounding is straight-through in backward (gradients are not rounded a second time on their way
// to the operands). This models a device that feeds bf16 operands to its matmul units in forward
// and in backward (the backward mms see bf16 grad_output and the saved, already-rounded
// operands) and accumulates in fp32. Emulation uses custom autograd functions: never trace under
// it.
//
// Thread-safety: pure functions; the emulation flag is thread-local.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "workers/zoo/config.h"

namespace ts::zoo {

// RAII: enables bf16 matmul emulation on this thread for its lifetime (nests; restores the
// previous state on destruction).
// Which matmul classes are emulated: a device rounds only the ops it runs natively (an op it
// sends to a CPU fallback is exact fp32), so the engine enables exactly those.
struct Bf16MatmulOps {
  bool linear = true;   // Linear (device: mm / addmm)
  bool batched = true;  // Matmul of batched operands, e.g. attention (device: bmm)
  bool conv = true;     // Conv2d (device: convolution)
};

class ScopedBf16MatmulEmulation {
 public:
  explicit ScopedBf16MatmulEmulation(Bf16MatmulOps ops = Bf16MatmulOps());
  ~ScopedBf16MatmulEmulation();
  ScopedBf16MatmulEmulation(const ScopedBf16MatmulEmulation&) = delete;
  ScopedBf16MatmulEmulation& operator=(const ScopedBf16MatmulEmulation&) = delete;

 private:
  bool previous_;
  Bf16MatmulOps previous_ops_;
};

// True while a ScopedBf16MatmulEmulation is alive on this thread.
bool Bf16MatmulEmulationActive();

namespace nn {

// Rounds float tensors to bfloat16 and back (non-float tensors unchanged). Plain ops: the
// rounding is differentiable as .to() is.
at::Tensor RoundToBf16(const at::Tensor& t);

// y = x W^T + b. `b` may be undefined.
at::Tensor Linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = at::Tensor());
// at::matmul.
at::Tensor Matmul(const at::Tensor& a, const at::Tensor& b);
// NCHW conv2d, `b` may be undefined.
at::Tensor Conv2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t stride,
                  int64_t padding = 0, int64_t groups = 1);
// 3-d convolution (video tubelets), kernel and stride per dimension, no padding; emulated like
// Conv2d.
at::Tensor Conv3d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                  at::IntArrayRef stride);
// 1-d convolution (audio front ends), emulated like Conv2d.
at::Tensor Conv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t stride,
                  int64_t padding = 0, int64_t groups = 1);

// Row lookup; padding_idx < 0: none.
at::Tensor Embedding(const at::Tensor& weight, const at::Tensor& ids, int64_t padding_idx = -1);
// The frozen sinusoid table of Marian, Pegasus and RoFormer (their create_weight): angle(p, i) =
// p / 10000^(2 * (i // 2) / d) in float64, sin of the even columns into the first ceil(d/2)
// columns, cos of the odd ones into the rest, rounded to float32: [rows, d] on CPU.
at::Tensor SinusoidHalvesTable(int64_t rows, int64_t d);
// HF LlamaRMSNorm: w * x * rsqrt(mean(x^2) + eps).
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& w, double eps);
at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps);
at::Tensor Activate(const at::Tensor& x, Activation act);

// Rotary tables for int64 `positions` [S] (or [B, S]): cos and sin of shape [..., S, head_dim]
// in `dtype` on positions' device, HF rotate_half layout (frequencies repeated twice).
std::pair<at::Tensor, at::Tensor> RotaryCosSin(const RopeConfig& rope, int64_t head_dim,
                                               const at::Tensor& positions, at::ScalarType dtype);
// x [B, H, S, D] * cos + rotate_half(x) * sin; cos/sin [S, D] or [B, S, D].
at::Tensor ApplyRotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// Boolean mask of key positions a query must NOT attend to, broadcastable to [B, H, S, S]:
// non-causal keys (if `causal`), keys at distance >= `window` (if set; query i sees keys
// i - window < j <= i), and padded keys (`attention_mask` [B, S] with 0 = padding; may be
// undefined). Created on `device`. Undefined when nothing is blocked.
at::Tensor BlockedKeys(const at::Tensor& attention_mask, int64_t seq_len, bool causal,
                       std::optional<int64_t> window, const at::Device& device);

// [B, KV, S, D] -> [B, KV * n_rep, S, D] (HF repeat_kv).
at::Tensor RepeatKv(const at::Tensor& x, int64_t n_rep);

// Attention scores with the `blocked` positions (undefined: none) at the scores' dtype's lowest
// value (double's for double, else float's), as transformers' eager paths fill them: softmax
// then gives them 0 unless a whole row is blocked.
at::Tensor MaskBlocked(const at::Tensor& scores, const at::Tensor& blocked);

// Eager scaled-dot-product attention: softmax(q k^T * scale, blocked keys filled with the
// dtype's lowest value; `blocked` may be undefined) v. q [B, H, S, D], k/v [B, KV, S, D] (KV
// divides H; repeated).
at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& blocked, double scale);

// pixel_values [B, C, H, W] -> patch tokens [B, N, hidden] (conv2d with stride = patch).
at::Tensor PatchEmbed(const at::Tensor& pixel_values, const at::Tensor& w, const at::Tensor& b,
                      int64_t patch_size);

}  // namespace nn
}  // namespace ts::zoo
