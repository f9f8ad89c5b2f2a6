#include "workers/zoo/nn.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "workers/zoo/nn_convolutions.h"

namespace ts::zoo {
namespace {

thread_local bool g_bf16_emulation = false;
thread_local Bf16MatmulOps g_bf16_ops;

bool IsFloat(const at::Tensor& t) { return t.defined() && at::isFloatingType(t.scalar_type()); }

// Forward: round to bf16 and back. Backward: identity (straight-through), so operand gradients
// are not rounded twice; the device rounds grad_output (RoundGradBf16), not the mm results.
struct RoundBf16Ste : public torch::autograd::Function<RoundBf16Ste> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) {
    return x.to(at::kBFloat16).to(x.scalar_type());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    return grads;
  }
};

// Forward: identity. Backward: the incoming gradient rounded to bf16 and back.
struct RoundGradBf16 : public torch::autograd::Function<RoundGradBf16> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x) { return x; }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor& g = grads[0];
    if (!g.defined()) return {g};
    return {g.to(at::kBFloat16).to(g.scalar_type())};
  }
};

at::Tensor EmuIn(const at::Tensor& t) {
  if (!IsFloat(t)) return t;
  return RoundBf16Ste::apply(t);
}

at::Tensor EmuOut(const at::Tensor& t) {
  if (!IsFloat(t)) return t;
  return RoundGradBf16::apply(t);
}

}  // namespace

ScopedBf16MatmulEmulation::ScopedBf16MatmulEmulation(Bf16MatmulOps ops)
    : previous_(g_bf16_emulation), previous_ops_(g_bf16_ops) {
  g_bf16_emulation = true;
  g_bf16_ops = ops;
}
ScopedBf16MatmulEmulation::~ScopedBf16MatmulEmulation() {
  g_bf16_emulation = previous_;
  g_bf16_ops = previous_ops_;
}

bool Bf16MatmulEmulationActive() { return g_bf16_emulation; }

namespace nn {

at::Tensor RoundToBf16(const at::Tensor& t) {
  if (!IsFloat(t)) return t;
  return t.to(at::kBFloat16).to(t.scalar_type());
}

at::Tensor Linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  if (!g_bf16_emulation || !g_bf16_ops.linear) return at::linear(x, w, b);
  // The value is the device's own: one addmm with the bias accumulated by BLAS (a separate
  // `+ b` can differ in the last bit where the BLAS adds it inside a K-blocked product). The
  // bias's gradient stays outside the rounded-gradient boundary: the device's addmm backward
  // rounds grad_output only for its two mm products, never for the bias gradient, so the bias
  // enters the product detached and gets its gradient through `+ (b - b_value)` (exactly 0).
  if (!b.defined()) return EmuOut(at::linear(EmuIn(x), EmuIn(w)));
  const at::Tensor b_value = b.detach();
  return EmuOut(at::linear(EmuIn(x), EmuIn(w), b_value)) + (b - b_value);
}

at::Tensor Matmul(const at::Tensor& a, const at::Tensor& b) {
  if (!g_bf16_emulation || !g_bf16_ops.batched) return at::matmul(a, b);
  return EmuOut(at::matmul(EmuIn(a), EmuIn(b)));
}

// The bias stays inside the rounded-gradient boundary: the device's convolution_backward
// computes the bias gradient from the same (rounded) grad_output as the other two.
at::Tensor Conv2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t stride,
                  int64_t padding, int64_t groups) {
  if (!g_bf16_emulation || !g_bf16_ops.conv) {
    return at::conv2d(x, w, b, {stride, stride}, {padding, padding}, {1, 1}, groups);
  }
  return EmuOut(
      at::conv2d(EmuIn(x), EmuIn(w), b, {stride, stride}, {padding, padding}, {1, 1}, groups));
}

at::Tensor Conv3d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                  at::IntArrayRef stride) {
  if (!g_bf16_emulation || !g_bf16_ops.conv) return at::conv3d(x, w, b, stride);
  return EmuOut(at::conv3d(EmuIn(x), EmuIn(w), b, stride));
}

// Declared in nn_convolutions.h. A device runs a transposed convolution as the same
// convolution op (transposed = true), so it is emulated as Conv2d is.
at::Tensor ConvTranspose2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                           int64_t stride) {
  if (!g_bf16_emulation || !g_bf16_ops.conv) return at::conv_transpose2d(x, w, b, {stride, stride});
  return EmuOut(at::conv_transpose2d(EmuIn(x), EmuIn(w), b, {stride, stride}));
}

// Declared in nn_convolutions.h.
at::Tensor DilatedConv2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                         int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
  if (!g_bf16_emulation || !g_bf16_ops.conv) {
    return at::conv2d(x, w, b, {stride, stride}, {padding, padding}, {dilation, dilation}, groups);
  }
  return EmuOut(at::conv2d(EmuIn(x), EmuIn(w), b, {stride, stride}, {padding, padding},
                           {dilation, dilation}, groups));
}

at::Tensor Conv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t stride,
                  int64_t padding, int64_t groups) {
  if (!g_bf16_emulation || !g_bf16_ops.conv) {
    return at::conv1d(x, w, b, {stride}, {padding}, {1}, groups);
  }
  return EmuOut(at::conv1d(EmuIn(x), EmuIn(w), b, {stride}, {padding}, {1}, groups));
}

at::Tensor SinusoidHalvesTable(int64_t rows, int64_t d) {
  auto f64 = at::TensorOptions().dtype(at::kDouble);
  at::Tensor j = at::arange(d, f64);
  at::Tensor freq = at::pow(10000.0, at::floor(j / 2.0) * 2.0 / static_cast<double>(d));
  at::Tensor angle = at::arange(rows, f64).unsqueeze(1) / freq.unsqueeze(0);
  at::Tensor even = angle.slice(1, 0, d, 2), odd = angle.slice(1, 1, d, 2);
  return at::cat({at::sin(even), at::cos(odd)}, 1).to(at::kFloat);
}

at::Tensor Embedding(const at::Tensor& weight, const at::Tensor& ids, int64_t padding_idx) {
  return at::embedding(weight, ids, padding_idx);
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor var = x.pow(2).mean(-1, /*keepdim=*/true);
  return w * (x * at::rsqrt(var + eps));
}

at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return at::layer_norm(x, {x.size(-1)}, w, b, eps);
}

at::Tensor Activate(const at::Tensor& x, Activation act) {
  switch (act) {
    case Activation::kGeluErf:
      return at::gelu(x);
    case Activation::kGeluTanh:
      return at::gelu(x, "tanh");
    case Activation::kSilu:
      return at::silu(x);
    case Activation::kRelu:
      return at::relu(x);
    case Activation::kQuickGelu:
      return x * at::sigmoid(x * 1.702);
  }
  return x;
}

std::pair<at::Tensor, at::Tensor> RotaryCosSin(const RopeConfig& rope, int64_t head_dim,
                                               const at::Tensor& positions, at::ScalarType dtype) {
  const auto dev = positions.device();
  const double dim = static_cast<double>(head_dim);
  // HF: arange(0, dim, 2, int64).float() / dim.
  at::Tensor expo =
      at::arange(0, head_dim, 2, at::TensorOptions().dtype(at::kLong).device(dev)).to(dtype) / dim;
  at::Tensor inv_freq;
  switch (rope.kind) {
    case RopeKind::kDefault:
      inv_freq = at::reciprocal(at::pow(rope.theta, expo));
      break;
    case RopeKind::kLinear:
      inv_freq = at::reciprocal(at::pow(rope.theta, expo)) / rope.factor;
      break;
    case RopeKind::kDynamic: {
      // base' = base * max(1, factor * seq / max_pos - (factor - 1)) ^ (dim / (dim - 2)), with
      // seq = max(position) + 1: all tensor ops, so it follows the traced input.
      at::Tensor seq = positions.max().to(dtype) + 1.0;
      at::Tensor ntk =
          at::clamp_min(seq * (rope.factor / static_cast<double>(rope.max_position_embeddings)) -
                            (rope.factor - 1.0),
                        1.0);
      at::Tensor base = at::pow(ntk, dim / (dim - 2.0)) * rope.theta;
      inv_freq = at::reciprocal(at::pow(base, expo));
      break;
    }
    case RopeKind::kLlama3: {
      at::Tensor f = at::reciprocal(at::pow(rope.theta, expo));
      const double old_ctx = static_cast<double>(rope.original_max_position_embeddings);
      const double low_wl = old_ctx / rope.low_freq_factor;
      const double high_wl = old_ctx / rope.high_freq_factor;
      at::Tensor wavelen = (2.0 * std::numbers::pi) / f;
      at::Tensor scaled = at::where(wavelen > low_wl, f / rope.factor, f);
      at::Tensor smooth = (old_ctx / wavelen - rope.low_freq_factor) /
                          (rope.high_freq_factor - rope.low_freq_factor);
      at::Tensor smoothed = (1.0 - smooth) * scaled / rope.factor + smooth * scaled;
      at::Tensor medium = at::logical_and(wavelen >= high_wl, wavelen <= low_wl);
      inv_freq = at::where(medium, smoothed, scaled);
      break;
    }
    case RopeKind::kYarn: {
      // Correction range from host scalars (config-only), ramp over dim/2 as tensor ops.
      const double base = rope.theta;
      const double orig = static_cast<double>(rope.original_max_position_embeddings);
      auto correction_dim = [&](double rotations) {
        return (dim * std::log(orig / (rotations * 2.0 * std::numbers::pi))) /
               (2.0 * std::log(base));
      };
      double low = correction_dim(rope.beta_fast), high = correction_dim(rope.beta_slow);
      if (rope.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, dim - 1.0);
      if (low == high) high += 0.001;
      at::Tensor pos_freqs = at::pow(base, expo);
      at::Tensor extrap = at::reciprocal(pos_freqs);
      at::Tensor interp = at::reciprocal(pos_freqs * rope.factor);
      at::Tensor ramp = at::clamp(
          (at::arange(head_dim / 2, at::TensorOptions().dtype(at::kLong).device(dev)).to(dtype) -
           low) /
              (high - low),
          0.0, 1.0);
      at::Tensor extrap_factor = 1.0 - ramp;
      inv_freq = interp * (1.0 - extrap_factor) + extrap * extrap_factor;
      break;
    }
  }
  at::Tensor freqs = positions.to(dtype).unsqueeze(-1) * inv_freq;  // [..., S, D/2]
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  at::Tensor cos = emb.cos();
  at::Tensor sin = emb.sin();
  if (rope.kind == RopeKind::kYarn && rope.attention_factor != 1.0) {
    cos = cos * rope.attention_factor;
    sin = sin * rope.attention_factor;
  }
  return {cos, sin};
}

at::Tensor ApplyRotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor x1 = x.narrow(-1, 0, half);
  at::Tensor x2 = x.narrow(-1, half, half);
  at::Tensor rotated = at::cat({-x2, x1}, -1);
  at::Tensor c = cos.dim() == 3 ? cos.unsqueeze(1) : cos;
  at::Tensor s = sin.dim() == 3 ? sin.unsqueeze(1) : sin;
  return x * c + rotated * s;
}

at::Tensor BlockedKeys(const at::Tensor& attention_mask, int64_t seq_len, bool causal,
                       std::optional<int64_t> window, const at::Device& device) {
  at::Tensor blocked;
  if (causal || window) {
    at::Tensor idx = at::arange(seq_len, at::TensorOptions().dtype(at::kLong).device(device));
    at::Tensor q = idx.unsqueeze(1);
    at::Tensor k = idx.unsqueeze(0);
    if (causal) blocked = k > q;
    if (window) {
      at::Tensor far = (q - k) >= *window;
      blocked = blocked.defined() ? at::logical_or(blocked, far) : far;
    }
  }
  if (attention_mask.defined()) {
    at::Tensor pad = attention_mask.eq(0).unsqueeze(1).unsqueeze(1);  // [B, 1, 1, S]
    blocked = blocked.defined() ? at::logical_or(blocked, pad) : pad;
  }
  return blocked;
}

at::Tensor RepeatKv(const at::Tensor& x, int64_t n_rep) {
  if (n_rep == 1) return x;
  const int64_t b = x.size(0), kv = x.size(1), s = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, kv, n_rep, s, d}).reshape({b, kv * n_rep, s, d});
}

at::Tensor MaskBlocked(const at::Tensor& scores, const at::Tensor& blocked) {
  if (!blocked.defined()) return scores;
  const double lowest = scores.scalar_type() == at::kDouble ? std::numeric_limits<double>::lowest()
                                                            : std::numeric_limits<float>::lowest();
  return scores.masked_fill(blocked, lowest);
}

at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& blocked, double scale) {
  const int64_t n_rep = q.size(1) / k.size(1);
  at::Tensor kr = RepeatKv(k, n_rep);
  at::Tensor vr = RepeatKv(v, n_rep);
  at::Tensor scores = Matmul(q, kr.transpose(-1, -2)) * scale;
  scores = MaskBlocked(scores, blocked);
  at::Tensor probs = at::softmax(scores, -1);
  return Matmul(probs, vr);
}

at::Tensor PatchEmbed(const at::Tensor& pixel_values, const at::Tensor& w, const at::Tensor& b,
                      int64_t patch_size) {
  at::Tensor x = Conv2d(pixel_values, w, b, patch_size);  // [B, hidden, gh, gw]
  return x.flatten(2).transpose(1, 2);
}

}  // namespace nn
}  // namespace ts::zoo
