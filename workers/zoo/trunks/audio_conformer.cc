// The conformer blocks of wav2vec2-conformer (audio.h Wav2Vec2Recipe::conformer), as
// modular_wav2vec2_conformer.py builds them: Wav2Vec2ConformerEncoder runs the projected features
// through the blocks (no positional conv: transformers builds `pos_conv_embed` and never calls
// it; no layer norm before the blocks), then `encoder.layer_norm`. Each block: half-step FFN
// (ffn1_layer_norm, ffn1, x 0.5), self-attention (self_attn_layer_norm, rotary or relative
// positions), the convolution module (layer_norm, pointwise_conv1 to 2 x hidden, GLU over the
// channels, depthwise conv of conv_depthwise_kernel_size with same padding, eval-mode
// BatchNorm1d, hidden_act, pointwise_conv2), half-step FFN 2, final_layer_norm. The block's own
// LayerNorms are nn.LayerNorm(hidden) at eps 1e-5 whatever layer_norm_eps says.
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/audio.h"

namespace ts::zoo::internal {
namespace {

constexpr double kConformerBlockEps = 1e-5;

at::Tensor ConformerLn(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), eps);
}

at::Tensor ConformerLin(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::Linear(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"));
}

// Wav2Vec2ConformerRotaryPositionalEmbedding: cos and sin of positions x inv_freq (float32, as
// transformers computes them from its float buffer), the frequencies repeated twice over the
// head dim, cast to `dtype`: [2, T, head_dim].
at::Tensor ConformerRotaryTable(int64_t frames, int64_t head_dim, double base,
                                const at::Tensor& like) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(like.device());
  at::Tensor inv_freq =
      1.0 / at::pow(base, at::arange(0, head_dim, 2, f32.dtype(at::kLong)).to(at::kFloat) /
                              static_cast<double>(head_dim));
  at::Tensor freqs = at::outer(at::arange(frames, f32), inv_freq);
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  return at::stack({emb.cos(), emb.sin()}).to(like.scalar_type());
}

// Wav2Vec2ConformerRelPositionalEmbedding for T frames: sinusoids of relative positions T - 1
// down to -(T - 1) (sin on even channels, cos on odd; float32, then cast): [1, 2T - 1, d].
at::Tensor ConformerRelativeTable(int64_t frames, int64_t d, const at::Tensor& like) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(like.device());
  at::Tensor div = at::exp(at::arange(0, d, 2, f32.dtype(at::kLong)).to(at::kFloat) *
                           -(std::log(10000.0) / static_cast<double>(d)));
  at::Tensor pos = at::arange(frames, f32).unsqueeze(1);
  auto table = [&](const at::Tensor& angle) {  // interleave sin (even) and cos (odd) channels
    return at::stack({at::sin(angle), at::cos(angle)}, -1).reshape({frames, d});
  };
  at::Tensor positive = table(pos * div).flip({0});
  at::Tensor negative = table(-pos * div).narrow(0, 1, frames - 1);
  return at::cat({positive, negative}, 0).unsqueeze(0).to(like.scalar_type());
}

// rotate_half over the head dim of [B, T, H, hd], times the [T, hd] tables.
at::Tensor ConformerRotate(const at::Tensor& x, const at::Tensor& table) {
  const int64_t t = x.size(1), half = x.size(3) / 2;
  at::Tensor cos = table[0].view({1, t, 1, -1}), sin = table[1].view({1, t, 1, -1});
  at::Tensor rotated = at::cat({-x.narrow(3, half, half), x.narrow(3, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace

void Wav2Vec2Trunk::AddConformerLayers() {
  const int64_t h = r_.hidden, hd = h / r_.heads;
  for (int64_t i = 0; i < r_.layers; ++i) {
    const std::string lp = pre_ + "encoder.layers." + std::to_string(i) + ".";
    AddLn(lp + "ffn1_layer_norm", h);
    AddLinear(lp + "ffn1.intermediate_dense", r_.intermediate, h);
    AddLinear(lp + "ffn1.output_dense", h, r_.intermediate);
    AddLn(lp + "self_attn_layer_norm", h);
    for (const char* n : {"linear_q", "linear_k", "linear_v", "linear_out"}) {
      AddLinear(lp + "self_attn." + n, h, h);
    }
    if (r_.conformer_pos == ConformerPos::kRelative) {
      Add(lp + "self_attn.linear_pos.weight", {h, h});
      Add(lp + "self_attn.pos_bias_u", {r_.heads, hd});
      Add(lp + "self_attn.pos_bias_v", {r_.heads, hd});
    }
    if (r_.conformer_pos == ConformerPos::kRelativeKey) {
      Add(lp + "self_attn.distance_embedding.weight", {r_.left_max + r_.right_max + 1, hd});
    }
    const std::string cm = lp + "conv_module.";
    AddLn(cm + "layer_norm", h);
    Add(cm + "pointwise_conv1.weight", {2 * h, h, 1});
    Add(cm + "depthwise_conv.weight", {h, 1, r_.depthwise_kernel});
    if (r_.Bert()) {
      AddLn(cm + "depthwise_layer_norm", h);
    } else {
      for (const char* n : {"weight", "bias", "running_mean", "running_var"}) {
        Add(cm + "batch_norm." + n, {h});
      }
    }
    Add(cm + "pointwise_conv2.weight", {h, h, 1});
    AddLn(lp + "ffn2_layer_norm", h);
    AddLinear(lp + "ffn2.intermediate_dense", r_.intermediate, h);
    AddLinear(lp + "ffn2.output_dense", h, r_.intermediate);
    AddLn(lp + "final_layer_norm", h);
  }
}

at::Tensor Wav2Vec2Trunk::ConformerEncode(const WeightMap& w, at::Tensor hs,
                                          std::vector<at::Tensor>* all) const {
  at::Tensor pos;
  if (r_.conformer_pos == ConformerPos::kRotary) {
    pos = ConformerRotaryTable(hs.size(1), r_.hidden / r_.heads, r_.rotary_base, hs);
  } else if (r_.conformer_pos == ConformerPos::kRelative) {
    pos = ConformerRelativeTable(hs.size(1), r_.hidden, hs);
  }
  for (int64_t i = 0; i < r_.layers; ++i) {
    if (all) all->push_back(hs);
    hs = ConformerLayer(w, pre_ + "encoder.layers." + std::to_string(i) + ".", hs, pos);
  }
  if (!r_.Bert()) hs = ConformerLn(w, pre_ + "encoder.layer_norm", hs, r_.eps);
  if (all) all->push_back(hs);
  return hs;
}

// Wav2Vec2ConformerEncoderLayer.forward.
at::Tensor Wav2Vec2Trunk::ConformerLayer(const WeightMap& w, const std::string& lp,
                                         const at::Tensor& x, const at::Tensor& pos) const {
  auto ffn = [&](const std::string& p, const at::Tensor& y) {
    return ConformerLin(w, p + ".output_dense",
                        nn::Activate(ConformerLin(w, p + ".intermediate_dense", y), r_.act));
  };
  // wav2vec2-bert's blocks read layer_norm_eps; the conformer's are at nn.LayerNorm's default.
  const double eps = r_.Bert() ? r_.eps : kConformerBlockEps;
  at::Tensor hs = ffn(lp + "ffn1", ConformerLn(w, lp + "ffn1_layer_norm", x, eps)) * 0.5 + x;
  hs = ConformerAttention(w, lp + "self_attn.",
                          ConformerLn(w, lp + "self_attn_layer_norm", hs, eps), pos) +
       hs;
  hs = hs + ConformerConvModule(w, lp + "conv_module.", hs);
  hs = ffn(lp + "ffn2", ConformerLn(w, lp + "ffn2_layer_norm", hs, eps)) * 0.5 + hs;
  return ConformerLn(w, lp + "final_layer_norm", hs, eps);
}

// Wav2Vec2ConformerSelfAttention: rotary on the (normed) input before linear_q / linear_k; or
// Transformer-XL scores ((q + u) k^T + shift((q + v) P^T)) / sqrt(d) with P = linear_pos of the
// relative table, the shift being transformers' pad-and-reshape trick (row i reads the relative
// position i - j for key j).
at::Tensor Wav2Vec2Trunk::ConformerAttention(const WeightMap& w, const std::string& p,
                                             const at::Tensor& x, const at::Tensor& pos) const {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2), heads = r_.heads, hd = h / heads;
  at::Tensor qk_in = x;
  if (r_.conformer_pos == ConformerPos::kRotary) {
    qk_in = ConformerRotate(x.view({b, t, heads, hd}), pos).reshape({b, t, h});
  }
  auto split = [&](const at::Tensor& y) { return y.view({b, t, heads, hd}).transpose(1, 2); };
  at::Tensor q = split(ConformerLin(w, p + "linear_q", qk_in));
  at::Tensor k = split(ConformerLin(w, p + "linear_k", qk_in));
  at::Tensor v = split(ConformerLin(w, p + "linear_v", x));
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  at::Tensor scores;
  if (r_.conformer_pos == ConformerPos::kRelative) {
    at::Tensor proj = nn::Linear(pos, GetWeight(w, p + "linear_pos.weight"), at::Tensor());
    proj = proj.view({1, -1, heads, hd}).permute({0, 2, 3, 1});  // [1, H, hd, 2T - 1]
    at::Tensor u = GetWeight(w, p + "pos_bias_u").view({1, heads, 1, hd});
    at::Tensor bv = GetWeight(w, p + "pos_bias_v").view({1, heads, 1, hd});
    at::Tensor ac = nn::Matmul(q + u, k.transpose(-1, -2));
    at::Tensor bd = nn::Matmul(q + bv, proj);  // [B, H, T, 2T - 1]
    at::Tensor padded = at::constant_pad_nd(bd, {1, 0}).view({b, heads, 2 * t, t});
    bd = padded.narrow(2, 1, 2 * t - 1).reshape({b, heads, t, 2 * t - 1}).narrow(3, 0, t);
    scores = (ac + bd) * scale;
  } else {
    scores = nn::Matmul(q, k.transpose(-1, -2)) * scale;
  }
  if (r_.conformer_pos == ConformerPos::kRelativeKey) {
    // einsum("bhld,lrd->bhlr", q, distance_embedding[clamp(r - l) + left_max]) / sqrt(d): per
    // query position l, its head vectors against the T distance embeddings of its row.
    const auto opts = at::TensorOptions().dtype(at::kLong).device(x.device());
    at::Tensor ids = at::arange(t, opts);
    at::Tensor dist = (ids.unsqueeze(0) - ids.unsqueeze(1)).clamp(-r_.left_max, r_.right_max);
    at::Tensor table =
        at::embedding(GetWeight(w, p + "distance_embedding.weight"), dist + r_.left_max);
    at::Tensor ql = q.permute({2, 0, 1, 3}).reshape({t, b * heads, hd});         // [l, B H, d]
    at::Tensor rel = nn::Matmul(ql, table.to(q.scalar_type()).transpose(1, 2));  // [l, B H, r]
    scores = scores + rel.view({t, b, heads, t}).permute({1, 2, 0, 3}) * scale;
  }
  at::Tensor ctx = nn::Matmul(at::softmax(scores, -1), v);
  return ConformerLin(w, p + "linear_out", ctx.transpose(1, 2).reshape({b, t, h}));
}

// Wav2Vec2ConformerConvolutionModule on [B, T, H]; the 1x1 convs as Linears over the channels.
at::Tensor Wav2Vec2Trunk::ConformerConvModule(const WeightMap& w, const std::string& p,
                                              const at::Tensor& x) const {
  const int64_t h = r_.hidden;
  at::Tensor y = ConformerLn(w, p + "layer_norm", x, r_.Bert() ? r_.eps : kConformerBlockEps);
  y = nn::Linear(y, GetWeight(w, p + "pointwise_conv1.weight").squeeze(-1), at::Tensor());
  y = y.narrow(2, 0, h) * at::sigmoid(y.narrow(2, h, h));  // GLU over the channels
  if (r_.Bert()) {  // causal: the whole kernel's padding on the left, then depthwise_layer_norm
    y = UnfoldConv1d(at::constant_pad_nd(y.transpose(1, 2), {r_.depthwise_kernel - 1, 0}),
                     GetWeight(w, p + "depthwise_conv.weight"), at::Tensor(), 1, 0, h);
    y = ConformerLn(w, p + "depthwise_layer_norm", y.transpose(1, 2), r_.eps).transpose(1, 2);
  } else {
    y = UnfoldConv1d(y.transpose(1, 2), GetWeight(w, p + "depthwise_conv.weight"), at::Tensor(), 1,
                     (r_.depthwise_kernel - 1) / 2, h);
    auto bn = [&](const char* n) { return GetWeight(w, p + "batch_norm." + n).view({1, -1, 1}); };
    y = (y - bn("running_mean")) / at::sqrt(bn("running_var") + 1e-5) * bn("weight") + bn("bias");
  }
  y = nn::Activate(y, r_.act).transpose(1, 2);
  return nn::Linear(y, GetWeight(w, p + "pointwise_conv2.weight").squeeze(-1), at::Tensor());
}

}  // namespace ts::zoo::internal
