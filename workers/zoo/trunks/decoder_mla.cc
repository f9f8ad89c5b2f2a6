// DeepSeek-V2 / V3 multi-head latent attention (decoder.h Mla), as modeling_deepseek_v3.py
// computes it: the rotary runs on the rope parts only (q per head, k once and shared by every
// head), nope parts first in the scores. The rotary is over adjacent pairs (Recipe::interleaved):
// DeepSeek-V2's complex-number rotation; V3's de-interleave + rotate_half (rope_interleave) gives
// the same pairs in another order on both q and k, hence the same scores and outputs.
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/decoder_model.h"

namespace ts::zoo::internal::decoder {

void DecoderModel::AddMla(const std::string& a, LayerW& l) {
  const Mla& m = c_.mla;
  const int64_t h = c_.hidden, nh = c_.heads, dqk = m.nope + m.rope;
  // attention_bias reaches q_a_proj, kv_a_proj_with_mqa and o_proj only.
  const bool bias = c_.o_bias;
  if (m.q_lora > 0) {
    l.qa = Add(a + "q_a_proj.weight", {m.q_lora, h});
    if (bias) l.qa_b = Add(a + "q_a_proj.bias", {m.q_lora});
    l.qa_ln = Add(a + "q_a_layernorm.weight", {m.q_lora});
    l.q_up = Add(a + "q_b_proj.weight", {nh * dqk, m.q_lora});
  } else {
    l.q = Add(a + "q_proj.weight", {nh * dqk, h});
  }
  l.kva = Add(a + "kv_a_proj_with_mqa.weight", {m.kv_lora + m.rope, h});
  if (bias) l.kva_b = Add(a + "kv_a_proj_with_mqa.bias", {m.kv_lora + m.rope});
  l.kva_ln = Add(a + "kv_a_layernorm.weight", {m.kv_lora});
  l.kvb = Add(a + "kv_b_proj.weight", {nh * (m.nope + m.v), m.kv_lora});
  l.o = Add(a + "o_proj.weight", {h, nh * m.v});
  if (bias) l.ob = Add(a + "o_proj.bias", {h});
}

at::Tensor DecoderModel::MlaAttn(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                                 const at::Tensor& cos, const at::Tensor& sin,
                                 const at::Tensor& blocked, int64_t b, int64_t s) const {
  const Mla& m = c_.mla;
  const int64_t nh = c_.heads, dqk = m.nope + m.rope;
  auto lin = [&](const at::Tensor& in, const std::string& wn, const std::string& bn) {
    return nn::Linear(in, GetWeight(w, wn), GetOptionalWeight(w, bn));
  };
  at::Tensor q = m.q_lora > 0
                     ? lin(nn::RmsNorm(lin(x, l.qa, l.qa_b), GetWeight(w, l.qa_ln), m.ln_eps),
                           l.q_up, "")
                     : lin(x, l.q, "");
  q = q.view({b, s, nh, dqk}).transpose(1, 2);
  at::Tensor q_pass = q.narrow(-1, 0, m.nope), q_rot = q.narrow(-1, m.nope, m.rope);
  at::Tensor ckv = lin(x, l.kva, l.kva_b);
  at::Tensor latent = ckv.narrow(-1, 0, m.kv_lora);
  at::Tensor k_rot = ckv.narrow(-1, m.kv_lora, m.rope).reshape({b, 1, s, m.rope});
  at::Tensor kv = lin(nn::RmsNorm(latent, GetWeight(w, l.kva_ln), m.ln_eps), l.kvb, "")
                      .view({b, s, nh, m.nope + m.v})
                      .transpose(1, 2);
  at::Tensor k_pass = kv.narrow(-1, 0, m.nope), v = kv.narrow(-1, m.nope, m.v);
  if (l.rope) {
    q_rot = Rotate(q_rot, cos, sin);
    k_rot = Rotate(k_rot, cos, sin);
  }
  at::Tensor qs = at::cat({q_pass, q_rot}, -1);
  at::Tensor ks = at::cat({k_pass, k_rot.expand({b, nh, s, m.rope})}, -1);
  at::Tensor out = nn::Attention(qs, ks, v, blocked, c_.attn_scale);
  return lin(out.transpose(1, 2).reshape({b, s, nh * m.v}), l.o, l.ob);
}

}  // namespace ts::zoo::internal::decoder
