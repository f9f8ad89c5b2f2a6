// The decoder trunk's attention and positions: q/k/v projection layouts, q/k norms, rotary
// (rotate_half or interleaved, full or partial), ALiBi (Bloom/Falcon and MPT slopes), XGLM
// sinusoids, and the masked softmax attention (decoder_model.h).
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/decoder_model.h"

namespace ts::zoo::internal::decoder {

// cos/sin [S, rotary_dim]; interleaved families repeat each frequency twice in place
// (GPT-J create_sinusoidal_positions / Cohere repeat_interleave / GLM repeat_interleave).
std::pair<at::Tensor, at::Tensor> DecoderModel::Tables(const RopeConfig& rope,
                                                       const at::Tensor& pos,
                                                       at::ScalarType dt) const {
  auto [cos, sin] = nn::RotaryCosSin(rope, c_.rotary_dim, pos, dt);
  if (!c_.interleaved) return {cos, sin};
  const int64_t half = c_.rotary_dim / 2;
  auto inter = [half](const at::Tensor& t) {
    at::Tensor f = t.narrow(-1, 0, half).unsqueeze(-1);
    return at::cat({f, f}, -1).flatten(-2);
  };
  return {inter(cos), inter(sin)};
}

at::Tensor DecoderModel::Rotate(const at::Tensor& x, const at::Tensor& cos,
                                const at::Tensor& sin) const {
  const int64_t rd = c_.rotary_dim, hd = c_.head_dim;
  at::Tensor rot = rd == hd ? x : x.narrow(-1, 0, rd);
  at::Tensor out;
  if (c_.interleaved) {
    // rotate_every_two: (-x[1::2], x[::2]) interleaved.
    at::Tensor x1 = rot.slice(-1, 0, rd, 2), x2 = rot.slice(-1, 1, rd, 2);
    at::Tensor r2 = at::stack({-x2, x1}, -1).flatten(-2);
    out = rot * cos + r2 * sin;
  } else {
    out = nn::ApplyRotary(rot, cos, c_.rotate_half_negated ? -sin : sin);
  }
  if (rd == hd) return out;
  return at::cat({out, x.narrow(-1, rd, hd - rd)}, -1);
}

// XGLM sinusoidal table rows for int64 positions: [sin | cos] of pos * 10000^(-i/(half-1)).
at::Tensor DecoderModel::Sinusoid(const at::Tensor& pos, at::ScalarType dt) const {
  if (c_.sinusoid_halves) {  // dims 2j and 2j + 1 share the rate 10000^(-2j / d)
    at::Tensor j = at::arange(c_.hidden / 2, pos.options()).to(dt);
    at::Tensor arg = pos.to(dt).unsqueeze(-1) / at::pow(10000.0, j * (2.0 / c_.hidden));
    return at::cat({at::sin(arg), at::cos(arg)}, -1);
  }
  const int64_t half = c_.hidden / 2;
  const double step = std::log(10000.0) / static_cast<double>(half - 1);
  at::Tensor freq = at::exp(at::arange(half, pos.options()).to(dt) * -step);
  at::Tensor arg = pos.to(dt).unsqueeze(-1) * freq;
  at::Tensor emb = at::cat({at::sin(arg), at::cos(arg)}, -1);
  if (c_.hidden % 2 == 1) emb = at::constant_pad_nd(emb, {0, 1});
  if (c_.pad) emb = emb * pos.ne(*c_.pad).to(dt).unsqueeze(-1);
  return emb;
}

// ALiBi bias added to the scores, broadcastable to [B, H, S, S]; undefined without ALiBi.
at::Tensor DecoderModel::AlibiBias(const at::Tensor& mask, int64_t b, int64_t s,
                                   const at::Device& dev, at::ScalarType dt) const {
  if (c_.alibi == Alibi::kNone) return at::Tensor();
  const auto fopts = at::TensorOptions().dtype(dt).device(dev);
  const int64_t nh = c_.heads;
  at::Tensor slopes;
  if (c_.alibi == Alibi::kMpt) {
    // build_mpt_alibi_tensor: 1 / 2^(i * max / n2), odd-then-even when heads is no power of 2.
    const int64_t n2 = int64_t{1}
                       << static_cast<int64_t>(std::ceil(std::log2(static_cast<double>(nh))));
    at::Tensor base = at::arange(1, n2 + 1, fopts) * (c_.alibi_bias_max / static_cast<double>(n2));
    slopes = at::reciprocal(at::pow(2.0, base));
    if (n2 != nh)
      slopes = at::cat({slopes.slice(0, 1, n2, 2), slopes.slice(0, 0, n2, 2)}).narrow(0, 0, nh);
    at::Tensor rel = at::arange(1 - s, 1, fopts);  // key position relative to the last
    return (slopes.view({nh, 1, 1}) * rel.view({1, 1, s})).unsqueeze(0);  // [1, H, 1, S]
  }
  // build_alibi_tensor (Bloom, Falcon): geometric slopes from the closest power of two.
  const int64_t p2 =
      int64_t{1} << static_cast<int64_t>(std::floor(std::log2(static_cast<double>(nh))));
  const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(p2)) - 3)));
  slopes = at::pow(base, at::arange(1, 1 + p2, fopts));
  if (p2 != nh) {
    const double extra =
        std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(2 * p2)) - 3)));
    const int64_t rem = std::min(p2, nh - p2);
    slopes = at::cat({slopes, at::pow(extra, at::arange(1, 1 + 2 * rem, 2, fopts))});
  }
  at::Tensor m = mask.defined() ? mask.to(dt) : at::ones({b, s}, fopts);
  at::Tensor positions = (at::cumsum(m, -1) - 1) * m;                // [B, S]
  return slopes.view({1, nh, 1, 1}) * positions.view({b, 1, 1, s});  // [B, H, 1, S]
}

void DecoderModel::ProjectQkv(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                              int64_t b, int64_t s, at::Tensor& q, at::Tensor& k,
                              at::Tensor& v) const {
  const int64_t nh = c_.heads, nkv = c_.kv, hd = c_.head_dim;
  auto lin = [&](const std::string& wn, const std::string& bn) { return Proj(w, x, wn, bn); };
  switch (c_.qkv) {
    case Qkv::kSeparate:
      q = lin(l.q, l.qb);
      k = lin(l.k, l.kb);
      v = lin(l.v, l.vb);
      break;
    case Qkv::kFused: {
      at::Tensor qkv = lin(l.qkv, l.qkvb);
      q = qkv.narrow(-1, 0, nh * hd);
      k = qkv.narrow(-1, nh * hd, nkv * hd);
      v = qkv.narrow(-1, (nh + nkv) * hd, nkv * hd);
      break;
    }
    case Qkv::kPerHead: {  // view(B, S, heads, 3, hd)
      at::Tensor qkv = lin(l.qkv, l.qkvb).view({b, s, nh, 3, hd});
      q = qkv.select(3, 0);
      k = qkv.select(3, 1);
      v = qkv.select(3, 2);
      break;
    }
    case Qkv::kGrouped: {  // Falcon: view(B, S, kv, heads / kv + 2, hd)
      const int64_t r = nh / nkv;
      at::Tensor qkv = lin(l.qkv, l.qkvb).view({b, s, nkv, r + 2, hd});
      q = qkv.narrow(3, 0, r).reshape({b, s, nh, hd});
      k = qkv.select(3, r);
      v = qkv.select(3, r + 1);
      break;
    }
    case Qkv::kCodeGen: {  // mp_num = 4 blocks, each [q | v | k] of heads / 4 heads
      const int64_t mp = 4, local = nh * hd / mp;
      at::Tensor qkv = lin(l.qkv, l.qkvb).view({b, s, mp, 3 * local});
      auto split = [&](int64_t i) {
        return qkv.narrow(-1, i * local, local).reshape({b, s, nh, hd});
      };
      q = split(0);
      v = split(1);
      k = split(2);
      break;
    }
    case Qkv::kPerHeadNarrow: {
      at::Tensor qkv = lin(l.qkv, l.qkvb).view({b, s, nh, 3 * hd});
      q = qkv.narrow(-1, 0, hd).reshape({b, s, nh * hd});
      k = qkv.narrow(-1, hd, hd).reshape({b, s, nh * hd});
      v = qkv.narrow(-1, 2 * hd, hd).reshape({b, s, nh * hd});
      break;
    }
  }
}

void DecoderModel::Project(const WeightMap& w, const LayerW& l, const at::Tensor& x, int64_t b,
                           int64_t s, at::Tensor& q, at::Tensor& k, at::Tensor& v) const {
  const int64_t nh = c_.heads, nkv = c_.kv, hd = c_.head_dim;
  ProjectQkv(w, l, x, b, s, q, k, v);
  if (c_.clip_qkv > 0) {
    q = q.clamp(-c_.clip_qkv, c_.clip_qkv);
    k = k.clamp(-c_.clip_qkv, c_.clip_qkv);
    v = v.clamp(-c_.clip_qkv, c_.clip_qkv);
  }
  if (c_.qk_norm == QkNorm::kFullRms) {
    q = nn::RmsNorm(q.reshape({b, s, nh * hd}), GetWeight(w, l.qnw), c_.eps);
    k = nn::RmsNorm(k.reshape({b, s, nkv * hd}), GetWeight(w, l.knw), c_.eps);
  }
  q = q.reshape({b, s, nh, hd});
  k = k.reshape({b, s, nkv, hd});
  v = v.reshape({b, s, nkv, hd});
  if (c_.qk_norm_after_rope) return;  // Attn norms them after the rotary
  switch (c_.qk_norm) {
    case QkNorm::kPerHeadRms:
      q = NormAs(Norm::kRms, w, q, l.qnw, "", hd);
      k = NormAs(Norm::kRms, w, k, l.knw, "", hd);
      break;
    case QkNorm::kPerHeadGemma:
      q = NormAs(Norm::kGemmaRms, w, q, l.qnw, "", hd);
      k = NormAs(Norm::kGemmaRms, w, k, l.knw, "", hd);
      break;
    case QkNorm::kPerHeadLayerNorm:
      q = NormAs(Norm::kLayerNorm, w, q, l.qnw, l.qnb, hd);
      k = NormAs(Norm::kLayerNorm, w, k, l.knw, l.knb, hd);
      break;
    default:
      break;
  }
}

at::Tensor DecoderModel::Attn(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                              const at::Tensor& cos, const at::Tensor& sin,
                              const at::Tensor& alibi, const at::Tensor& blocked, int64_t b,
                              int64_t s) const {
  const int64_t nh = c_.heads, nkv = c_.kv, hd = c_.head_dim;
  at::Tensor q, k, v;  // [B, S, heads, hd]
  Project(w, l, x, b, s, q, k, v);
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  v = v.transpose(1, 2);
  if (l.rope) {
    q = Rotate(q, cos, sin);
    k = Rotate(k, cos, sin);
  }
  if (c_.qk_norm_after_rope) {  // HunYuanDenseV1Attention: query_layernorm / key_layernorm
    const Norm kind = c_.qk_norm == QkNorm::kPerHeadRmsNoWeight ? Norm::kRmsNoWeight : Norm::kRms;
    q = NormAs(kind, w, q, l.qnw, "", hd);
    k = NormAs(kind, w, k, l.knw, "", hd);
  }
  if (c_.q_pos_scale_beta != 0.0) {
    const at::Tensor pos = at::arange(s, q.options());
    const at::Tensor f =
        1.0 + c_.q_pos_scale_beta *
                  at::log(1.0 + at::floor(pos / static_cast<double>(c_.q_pos_scale_orig)));
    q = q * f.view({1, 1, s, 1});
  }
  const double scale =
      c_.attn_scale > 0 ? c_.attn_scale : 1.0 / std::sqrt(static_cast<double>(hd));
  at::Tensor scores = nn::Matmul(q, nn::RepeatKv(k, nh / nkv).transpose(-1, -2));
  if (c_.alibi == Alibi::kFalcon) {
    scores = (scores + alibi) * scale;
  } else {
    scores = scores * scale;
    if (alibi.defined()) scores = scores + alibi;
  }
  scores = nn::MaskBlocked(scores, blocked);
  if (c_.diff_attn) return DiffAttn(w, l, at::softmax(scores, -1), v, b, s);
  at::Tensor a;
  if (l.sinks.empty()) {
    a = nn::Matmul(at::softmax(scores, -1), nn::RepeatKv(v, nh / nkv));
  } else {  // GPT-OSS eager_attention_forward: the sink column, then dropped
    at::Tensor sink = GetWeight(w, l.sinks).view({1, nh, 1, 1}).expand({b, nh, s, 1});
    at::Tensor logits = at::cat({scores, sink}, -1);
    logits = logits - std::get<0>(logits.max(-1, /*keepdim=*/true));
    a = nn::Matmul(at::softmax(logits, -1).narrow(-1, 0, s), nn::RepeatKv(v, nh / nkv));
  }
  a = a.transpose(1, 2).reshape({b, s, nh * hd});
  if (!l.attn_sub.empty()) a = NormAs(Norm::kRms, w, a, l.attn_sub, "", nh * hd);
  if (!l.attn_gate.empty()) a = a * at::sigmoid(nn::Linear(x, GetWeight(w, l.attn_gate)));
  return nn::Linear(a, GetWeight(w, l.o), GetOptionalWeight(w, l.ob));
}

}  // namespace ts::zoo::internal::decoder

namespace ts::zoo::internal::decoder {

at::Tensor DecoderModel::ClassicRotate(const at::Tensor& x, const at::Tensor& cos,
                                       const at::Tensor& sin) const {
  if (c_.interleaved) return Rotate(x, cos, sin);  // adjacent pairs (ernie4_5_moe)
  if (c_.rotary_dim == c_.head_dim) return nn::ApplyRotary(x, cos, sin);
  at::Tensor rot = x.narrow(-1, 0, c_.rotary_dim);
  at::Tensor pass = x.narrow(-1, c_.rotary_dim, c_.head_dim - c_.rotary_dim);
  return at::cat({nn::ApplyRotary(rot, cos, sin), pass}, -1);
}

at::Tensor DecoderModel::ClassicAttn(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                                     const at::Tensor& cos, const at::Tensor& sin,
                                     const at::Tensor& blocked, int64_t b, int64_t s) const {
  if (c_.mla.kv_lora > 0) return MlaAttn(w, l, x, cos, sin, blocked, b, s);
  const int64_t nh = c_.heads, nkv = c_.kv, hd = c_.head_dim;
  at::Tensor q, k, v;
  if (c_.view_heads) {
    auto heads = [&](const std::string& wn, const std::string& bn, int64_t n) {
      return nn::Linear(x, GetWeight(w, wn), GetOptionalWeight(w, bn))
          .view({b, s, n, hd})
          .transpose(1, 2);
    };
    q = heads(l.q, l.qb, nh);
    k = heads(l.k, l.kb, nkv);
    v = heads(l.v, l.vb, nkv);
  } else {
    ProjectQkv(w, l, x, b, s, q, k, v);  // [B, S, *]
    if (c_.qk_norm == QkNorm::kFullRms) {
      q = nn::RmsNorm(q, GetWeight(w, l.qnw), c_.eps);
      k = nn::RmsNorm(k, GetWeight(w, l.knw), c_.eps);
    }
    if (c_.clip_qkv > 0) {  // OlmoeAttention: clamped after the q/k norms
      q = q.clamp(-c_.clip_qkv, c_.clip_qkv);
      k = k.clamp(-c_.clip_qkv, c_.clip_qkv);
      v = v.clamp(-c_.clip_qkv, c_.clip_qkv);
    }
    q = q.reshape({b, s, nh, hd}).transpose(1, 2);
    k = k.reshape({b, s, nkv, hd}).transpose(1, 2);
    v = v.reshape({b, s, nkv, hd}).transpose(1, 2);
    if (c_.qk_norm == QkNorm::kPerHeadRms) {
      q = nn::RmsNorm(q, GetWeight(w, l.qnw), c_.eps);
      k = nn::RmsNorm(k, GetWeight(w, l.knw), c_.eps);
    }
  }
  if (l.rope) {
    q = ClassicRotate(q, cos, sin);
    k = ClassicRotate(k, cos, sin);
  }
  double scale = c_.attn_scale > 0 ? c_.attn_scale : 1.0 / std::sqrt(static_cast<double>(hd));
  if (l.attn_div != 1.0) scale /= l.attn_div;
  at::Tensor a;
  if (c_.attn_softcap > 0) {
    at::Tensor kr = nn::RepeatKv(k, nh / nkv);
    at::Tensor vr = nn::RepeatKv(v, nh / nkv);
    at::Tensor scores = nn::Matmul(q, kr.transpose(-1, -2)) * scale;
    scores = at::tanh(scores / c_.attn_softcap) * c_.attn_softcap;
    scores = nn::MaskBlocked(scores, blocked);
    a = nn::Matmul(at::softmax(scores, -1), vr);
  } else {
    a = nn::Attention(q, k, v, blocked, scale);
  }
  a = a.transpose(1, 2).reshape({b, s, nh * hd});
  return Proj(w, a, l.o, l.ob);
}

at::Tensor DecoderModel::DiffAttn(const WeightMap& w, const LayerW& l, const at::Tensor& probs,
                                  const at::Tensor& v, int64_t b, int64_t s) const {
  const int64_t nh = c_.heads, nkv = c_.kv, hd = c_.head_dim;
  // Values of head pairs side by side ([B, H/2, S, 2hd]), repeated to the H heads.
  std::vector<at::Tensor> halves = nn::RepeatKv(v, nh / nkv).chunk(2, 1);
  at::Tensor vv = at::cat({halves[0], halves[1]}, -1).repeat({1, 2, 1, 1});
  std::vector<at::Tensor> a = nn::Matmul(probs, vv).chunk(2, 1);
  auto dot = [&](const std::string& q, const std::string& k) {
    return at::exp((GetWeight(w, q) * GetWeight(w, k)).sum());
  };
  at::Tensor lambda = dot(l.lq1, l.lk1) - dot(l.lq2, l.lk2) + l.lambda_init;
  at::Tensor o = a[0] - lambda * a[1];
  o = o * at::rsqrt(o.pow(2).mean(-1, /*keepdim=*/true) + c_.eps) * (1.0 - l.lambda_init);
  return nn::Linear(o.transpose(1, 2).reshape({b, s, nh * hd}), GetWeight(w, l.o),
                    GetOptionalWeight(w, l.ob));
}

}  // namespace ts::zoo::internal::decoder
