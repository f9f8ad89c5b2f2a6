// SEW-D's encoder (audio.h Wav2Vec2Recipe::sew_d), as modular_sew_d.py builds
// SEWDTransformerEncoder between SEW's squeeze and upsampling: DeBERTa-v2 layers under
// `encoder.encoder.layer.N` (attention.self.{query,key,value}_proj, attention.output.dense +
// LayerNorm over the residual, intermediate.dense, output.dense + LayerNorm), disentangled
// attention over the relative positions (log-bucketed with position_buckets), the shared
// `encoder.encoder.rel_embeddings` LayerNorm-ed once (norm_rel_ebd "layer_norm"), the relative
// projections the layer's own query / key ones (share_att_key) or pos_query_proj / pos_key_proj;
// without a mask every position attends (SEWDEncoder's all-ones mask).
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/audio.h"

namespace ts::zoo::internal {
namespace {

at::Tensor SewDLn(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), eps);
}

at::Tensor SewDLin(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::Linear(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"));
}

// build_relative_position with make_log_bucket_position: [T, T] int64 q - k, bucketed (float32
// math, as transformers) when buckets and max_rel are positive.
at::Tensor SewDRelativePositions(int64_t t, int64_t buckets, int64_t max_rel,
                                 const at::Device& dev) {
  auto lo = at::TensorOptions().dtype(at::kLong).device(dev);
  at::Tensor rel = at::arange(t, lo).unsqueeze(1) - at::arange(t, lo).unsqueeze(0);
  if (buckets <= 0 || max_rel <= 0) return rel;
  const int64_t mid = buckets / 2;
  at::Tensor relf = rel.to(at::kFloat);
  at::Tensor abs_pos = at::where(at::logical_and(rel.lt(mid), rel.gt(-mid)),
                                 at::full_like(relf, static_cast<double>(mid - 1)), relf.abs());
  const float denom = std::log(static_cast<float>(max_rel - 1) / static_cast<float>(mid));
  at::Tensor log_pos = at::ceil(at::log(abs_pos / static_cast<double>(mid)) /
                                static_cast<double>(denom) * static_cast<double>(mid - 1)) +
                       static_cast<double>(mid);
  return at::where(abs_pos.le(static_cast<double>(mid)), relf, log_pos * at::sign(relf))
      .to(at::kLong);
}

}  // namespace

void Wav2Vec2Trunk::AddSewDEncoder() {
  const int64_t h = r_.hidden;
  for (int64_t i = 0; i < r_.layers; ++i) {
    const std::string lp = pre_ + "encoder.encoder.layer." + std::to_string(i) + ".";
    for (const char* n : {"query_proj", "key_proj", "value_proj"}) {
      AddLinear(lp + "attention.self." + n, h, h);
    }
    if (r_.relative && !r_.share_att_key) {
      if (r_.c2p) AddLinear(lp + "attention.self.pos_key_proj", h, h);
      if (r_.p2c) AddLinear(lp + "attention.self.pos_query_proj", h, h);
    }
    AddLinear(lp + "attention.output.dense", h, h);
    AddLn(lp + "attention.output.LayerNorm", h);
    AddLinear(lp + "intermediate.dense", r_.intermediate, h);
    AddLinear(lp + "output.dense", h, r_.intermediate);
    AddLn(lp + "output.LayerNorm", h);
  }
  if (r_.relative) Add(pre_ + "encoder.encoder.rel_embeddings.weight", {2 * r_.AttSpan(), h});
  if (r_.relative && r_.norm_rel) AddLn(pre_ + "encoder.encoder.LayerNorm", h);
}

// SEWDTransformerEncoder.forward without a mask; `all` gets its hidden states.
at::Tensor Wav2Vec2Trunk::SewDEncode(const WeightMap& w, at::Tensor hs,
                                     std::vector<at::Tensor>* all) const {
  at::Tensor rel, rel_pos;
  if (r_.relative) {
    rel = GetWeight(w, pre_ + "encoder.encoder.rel_embeddings.weight");
    if (r_.norm_rel) rel = SewDLn(w, pre_ + "encoder.encoder.LayerNorm", rel, r_.eps);
    rel_pos = SewDRelativePositions(hs.size(1), r_.buckets, r_.max_rel, hs.device());
  }
  for (int64_t i = 0; i < r_.layers; ++i) {
    if (all) all->push_back(hs);
    const std::string lp = pre_ + "encoder.encoder.layer." + std::to_string(i) + ".";
    at::Tensor a = SewDAttention(w, lp + "attention.self.", hs, rel, rel_pos);
    a = SewDLn(w, lp + "attention.output.LayerNorm",
               SewDLin(w, lp + "attention.output.dense", a) + hs, r_.eps);
    at::Tensor inter = nn::Activate(SewDLin(w, lp + "intermediate.dense", a), r_.act);
    hs = SewDLn(w, lp + "output.LayerNorm", SewDLin(w, lp + "output.dense", inter) + a, r_.eps);
  }
  if (all) all->push_back(hs);
  return hs;
}

// DisentangledSelfAttention: q k^T, plus c2p (q against the projected relative keys, gathered at
// clamp(q - k + span)) and p2c (k against the projected relative queries, gathered at
// clamp(k - q + span), transposed), each over sqrt(head_dim x scale_factor) computed in float32
// as transformers computes it.
at::Tensor Wav2Vec2Trunk::SewDAttention(const WeightMap& w, const std::string& p,
                                        const at::Tensor& x, const at::Tensor& rel,
                                        const at::Tensor& rel_pos) const {
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2), nh = r_.heads, hd = h / nh;
  const int64_t span = r_.AttSpan();
  auto split = [&](const at::Tensor& y) { return y.view({b, t, nh, hd}).transpose(1, 2); };
  at::Tensor q = split(SewDLin(w, p + "query_proj", x));
  at::Tensor k = split(SewDLin(w, p + "key_proj", x));
  at::Tensor v = split(SewDLin(w, p + "value_proj", x));
  const float root = std::sqrt(static_cast<float>(hd * r_.AttScaleFactor()));
  const double scale = 1.0 / static_cast<double>(root);
  at::Tensor scores = nn::Matmul(q, k.transpose(-1, -2)) * scale;
  auto rel_heads = [&](const std::string& proj) {  // [1, nh, 2 span, hd]
    return SewDLin(w, p + proj, rel).view({2 * span, nh, hd}).permute({1, 0, 2}).unsqueeze(0);
  };
  if (r_.relative && r_.c2p) {
    at::Tensor pk = rel_heads(r_.share_att_key ? "key_proj" : "pos_key_proj");
    at::Tensor idx = at::clamp(rel_pos + span, 0, 2 * span - 1).view({1, 1, t, t});
    at::Tensor att = nn::Matmul(q, pk.transpose(-1, -2));  // [B, nh, T, 2 span]
    scores = scores + at::gather(att, -1, idx.expand({b, nh, t, t})) * scale;
  }
  if (r_.relative && r_.p2c) {
    at::Tensor pq = rel_heads(r_.share_att_key ? "query_proj" : "pos_query_proj");
    at::Tensor idx = at::clamp(-rel_pos + span, 0, 2 * span - 1).view({1, 1, t, t});
    at::Tensor att = nn::Matmul(k, pq.transpose(-1, -2));  // [B, nh, T (key), 2 span]
    scores = scores + at::gather(att, -1, idx.expand({b, nh, t, t})).transpose(-1, -2) * scale;
  }
  at::Tensor ctx = nn::Matmul(at::softmax(scores, -1), v);
  return ctx.transpose(1, 2).reshape({b, t, h});
}

}  // namespace ts::zoo::internal
