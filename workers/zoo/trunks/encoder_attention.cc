// DeBERTa's disentangled attention on the encoder trunk (v2, and v1 with its pos_proj /
// pos_q_proj): content-to-position (c2p) and position-to-content (p2c) scores over relative
// positions, log-bucketed for v2 when position_buckets is set (encoder.h).
#include <cmath>
#include <limits>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/encoder_model.h"

namespace ts::zoo::internal::encoder {

RelativeTables EncoderModel::MakeRelativeTables(const WeightMap& w, const at::Tensor& mask,
                                                int64_t n, int64_t s, at::ScalarType dt,
                                                const at::Device& dev) const {
  RelativeTables rt;
  const int64_t nh = r_.heads, span = r_.AttSpan();
  if (r_.relative) {
    rt.rel = GetWeight(w, rel_);
    if (r_.norm_rel)
      rt.rel = nn::LayerNorm(rt.rel, GetWeight(w, rel_ln_), GetWeight(w, rel_lnb_), r_.eps);
    at::Tensor rp = RelativePositions(s, dev);  // [S, S] int64, q - k (bucketed)
    rt.c2p_idx = at::clamp(rp + span, 0, 2 * span - 1).view({1, 1, s, s}).expand({n, nh, s, s});
    rt.p2c_idx = at::clamp(-rp + span, 0, 2 * span - 1).view({1, 1, s, s}).expand({n, nh, s, s});
  }
  if (mask.defined()) rt.qmask = mask.to(dt).view({n, 1, s, 1});
  return rt;
}

// HF build_relative_position (+ make_log_bucket_position, float32 math): [S, S] int64 q - k,
// built with tensor ops on `dev` (traceable; no host constants).
at::Tensor EncoderModel::RelativePositions(int64_t s, const at::Device& dev) const {
  auto lo = at::TensorOptions().dtype(at::kLong).device(dev);
  at::Tensor rel = at::arange(s, lo).unsqueeze(1) - at::arange(s, lo).unsqueeze(0);
  if (r_.buckets <= 0 || r_.max_rel <= 0) return rel;
  const int64_t mid = r_.buckets / 2;
  at::Tensor relf = rel.to(at::kFloat);
  at::Tensor sign = at::sign(relf);
  at::Tensor abs_pos = at::where(at::logical_and(rel.lt(mid), rel.gt(-mid)),
                                 at::full_like(relf, static_cast<double>(mid - 1)), relf.abs());
  const double denom = std::log(static_cast<double>(r_.max_rel - 1) / static_cast<double>(mid));
  at::Tensor log_pos =
      at::ceil(at::log(abs_pos / static_cast<double>(mid)) / denom * static_cast<double>(mid - 1)) +
      static_cast<double>(mid);
  return at::where(abs_pos.le(static_cast<double>(mid)), relf, log_pos * sign).to(at::kLong);
}

at::Tensor EncoderModel::DisentangledAttention(const WeightMap& w, const LayerW& l,
                                               const at::Tensor& q, const at::Tensor& k,
                                               const at::Tensor& v, const at::Tensor& blocked,
                                               const RelativeTables& rt) const {
  const int64_t nh = r_.heads, hd = r_.hidden / nh, span = r_.AttSpan();
  const double sf = static_cast<double>(r_.att_scale_factor);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd) * sf);
  at::Tensor scores = nn::Matmul(q, k.transpose(-1, -2)) * scale;
  // [2 span, H] -> [1, nh, 2 span, hd]
  auto rel_heads = [&](const at::Tensor& t) {
    return t.view({2 * span, nh, hd}).permute({1, 0, 2}).unsqueeze(0);
  };
  // The relative projections: the layer's own key / query ones, or pos_key / pos_query_proj.
  auto project = [&](const std::string& shared, const std::string& shared_b, const std::string& own,
                     const std::string& own_b) {
    return r_.share_att_key
               ? rel_heads(nn::Linear(rt.rel, GetWeight(w, shared), GetWeight(w, shared_b)))
               : rel_heads(nn::Linear(rt.rel, GetWeight(w, own), GetOptionalWeight(w, own_b)));
  };
  if (r_.c2p) {
    at::Tensor pk = project(l.k, l.kb, l.pk, l.pkb);
    at::Tensor att = nn::Matmul(q, pk.transpose(-1, -2));  // [n, nh, S, 2 span]
    scores = scores + at::gather(att, -1, rt.c2p_idx) * scale;
  }
  if (r_.p2c) {
    at::Tensor pq = project(l.q, l.qb, l.pq, l.pqb);
    at::Tensor att = nn::Matmul(k, pq.transpose(-1, -2));  // [n, nh, S(key), 2 span]
    scores = scores + at::gather(att, -1, rt.p2c_idx).transpose(-1, -2) * scale;
  }
  scores = nn::MaskBlocked(scores, blocked);
  at::Tensor probs = at::softmax(scores, -1);
  if (rt.qmask.defined()) probs = probs * rt.qmask;
  return nn::Matmul(probs, v);
}

}  // namespace ts::zoo::internal::encoder
