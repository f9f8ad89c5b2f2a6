// The modules the zoo's formula tests build their double-precision references from, one
// definition each (vision, audio, decoder and encoder tests share them). Two kinds, kept apart
// because they are not the same computation: the at:: ones (Lin, LinWithBias, Ln: at::linear
// and at::layer_norm, as transformers dispatches them) and the written-out ones
// (WrittenOutRef: a layer norm and a linear from elementwise ops and matmul, so the reference
// shares no kernel with the zoo).
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "workers/zoo/model.h"

namespace ts::zoo::testing {

// nn.Linear at `p`, with its bias when the weights have one (the config's *_bias field says).
inline at::Tensor Lin(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  const std::string b = p + ".bias";
  return at::linear(x, w.at(p + ".weight"), w.count(b) ? w.at(b) : at::Tensor());
}

// nn.Linear(bias=True) at `p`: the bias must be there (a class that lost it throws out of the
// reference, failing the test, where Lin would agree with it).
inline at::Tensor LinWithBias(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return at::linear(x, w.at(p + ".weight"), w.at(p + ".bias"));
}

// nn.LayerNorm at `p` over the last dimension (weight and bias both required).
inline at::Tensor Ln(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  return at::layer_norm(x, {x.size(-1)}, w.at(p + ".weight"), w.at(p + ".bias"), eps);
}

// LlamaRMSNorm in double: x * rsqrt(mean(x^2) + eps) * weight.
inline at::Tensor Rms(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
}

// An RMS norm without a weight, divided by the root (not multiplied by rsqrt as Rms is: the two
// round differently): x / sqrt(mean(x^2) + eps). Mamba's blocks scale it by their weight after.
inline at::Tensor UnweightedRms(const at::Tensor& x, double eps) {
  return x / at::sqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps);
}

// SiLU written out: x / (1 + exp(-x)).
inline at::Tensor Silu(const at::Tensor& x) { return x / (1.0 + at::exp(-x)); }

// rotate_half: cat(-x2, x1) over the halves of the last dimension.
inline at::Tensor RotateHalf(const at::Tensor& x) {
  const int64_t h = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);
}

// The default rope's inverse frequencies: 1 / base^(arange(0, d, 2) / d).
inline at::Tensor InvFreq(double base, int64_t d) {
  return 1.0 / at::pow(base, at::arange(0, d, 2, at::kDouble) / static_cast<double>(d));
}

// apply_rotary_pos_emb with the default rope over x [.., S, D] at inverse frequencies `inv`
// (positions 0..S-1): x * cos + rotate_half(x) * sin.
inline at::Tensor Rope(const at::Tensor& x, const at::Tensor& inv) {
  at::Tensor f = at::outer(at::arange(x.size(-2), at::kDouble), inv);
  at::Tensor emb = at::cat({f, f}, -1);
  return x * emb.cos() + RotateHalf(x) * emb.sin();
}

// Two rows of `seq` ids below `vocab`, the second with its last two positions padded (id `pad`,
// mask 0); no unpadded position holds `pad`.
inline void PaddedInputs(int64_t vocab, int64_t pad, int64_t seq, at::Tensor& ids,
                         at::Tensor& mask) {
  ids = (at::arange(2 * seq, at::kLong).view({2, seq}) * 7 + 3).remainder(vocab);
  ids = ids.masked_fill(ids.eq(pad), pad + 2);
  mask = at::ones({2, seq}, at::kLong);
  mask[1].narrow(0, seq - 2, 2).fill_(0);
  ids = ids.masked_fill(mask.eq(0), pad);
}

// Token types for two rows of `seq`: 0 over the first half, 1 over the rest.
inline at::Tensor HalfTypes(int64_t seq) {
  at::Tensor types = at::zeros({2, seq}, at::kLong);
  types.narrow(1, seq / 2, seq - seq / 2).fill_(1);
  return types;
}

// `t` [B, S, ...] with the padded positions (mask 0) zeroed: only the unpadded rows are compared
// (padded queries attend like any other but nothing reads them).
inline at::Tensor Kept(const at::Tensor& t, const at::Tensor& mask) {
  return t * mask.unsqueeze(-1).to(t.scalar_type());
}

// The encoder tests' references written out from elementwise ops over weights `w`.
struct WrittenOutRef {
  const WeightMap& w;
  // nn.LayerNorm at `p`: (x - mean) / sqrt(var + eps) * weight + bias.
  at::Tensor Ln(const at::Tensor& x, const std::string& p, double eps) const {
    const at::Tensor y = x - x.mean(-1, true);
    return y / at::sqrt((y * y).mean(-1, true) + eps) * w.at(p + ".weight") + w.at(p + ".bias");
  }
  // nn.Linear(bias=True) at `p`: x W^T + b.
  at::Tensor Lin(const at::Tensor& x, const std::string& p) const {
    return at::matmul(x, w.at(p + ".weight").t()) + w.at(p + ".bias");
  }
  // nn.Embedding `n` (the table's full name) at ids [B, S].
  at::Tensor Emb(const std::string& n, const at::Tensor& ids) const {
    return w.at(n).index_select(0, ids.reshape(-1)).view({ids.size(0), ids.size(1), -1});
  }
  // nn.GELU / ACT2FN["gelu"]: the erf form.
  static at::Tensor Gelu(const at::Tensor& x) {
    return 0.5 * x * (1.0 + at::erf(x / std::sqrt(2.0)));
  }
  // ACT2FN["gelu_new"]: the tanh approximation.
  static at::Tensor GeluNew(const at::Tensor& x) {
    return 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * at::pow(x, 3.0))));
  }
};

}  // namespace ts::zoo::testing
