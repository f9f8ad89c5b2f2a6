// The decoder trunk's sparse MoE MLP (mixtral, qwen2_moe), its gated experts, and Phi-3's
// longrope tables (decoder_model.h).
#include <cmath>
#include <limits>
#include <tuple>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/decoder_model.h"

namespace ts::zoo::internal::decoder {

// transformers 5 names: the router `mlp.gate`, the routed experts fused as
// `mlp.experts.gate_up_proj` [E, 2I, H] and `mlp.experts.down_proj` [E, H, I] (4.x: one module
// per expert, mixtral's under block_sparse_moe with w1 / w3 / w2), qwen2_moe's shared expert and
// its gate unfused.
void DecoderModel::AddMoe(const std::string& p, LayerW& l) {
  const Moe& moe = c_.moe;
  const int64_t h = c_.hidden, e_im = moe.inter;
  l.moe = true;
  const std::string m = p + (moe.mixtral ? std::string("mlp.") : c_.n.mlp);
  l.router = Add(m + moe.router_name, {moe.experts, h});
  if (moe.router_bias) l.router_b = Add(m + "router.bias", {moe.experts});
  if (moe.gpt_oss_experts) {  // GptOssExperts: [E, H, 2I] interleaved, [E, I, H], biases
    const std::string gu = Add(m + "experts.gate_up_proj", {moe.experts, h, 2 * e_im});
    const std::string gu_b = Add(m + "experts.gate_up_proj_bias", {moe.experts, 2 * e_im});
    const std::string dn = Add(m + "experts.down_proj", {moe.experts, e_im, h});
    const std::string dn_b = Add(m + "experts.down_proj_bias", {moe.experts, h});
    for (int64_t e = 0; e < moe.experts; ++e) {
      Expert ex;
      ex.gate_up = gu;
      ex.gate_up_b = gu_b;
      ex.down = dn;
      ex.down_b = dn_b;
      ex.index = e;
      l.experts.push_back(ex);
    }
    return;
  }
  if (moe.router == Router::kDeepseekV3 || moe.router == Router::kErnie) {
    l.score_bias = Add(m + moe.score_bias_name, moe.score_bias_row
                                                    ? std::vector<int64_t>{1, moe.experts}
                                                    : std::vector<int64_t>{moe.experts});
  }
  const std::string gate_up = Add(m + moe.gate_up_name, {moe.experts, 2 * e_im, h});
  const std::string down = Add(m + moe.down_name, {moe.experts, h, e_im});
  for (int64_t e = 0; e < moe.experts; ++e) {
    Expert ex;
    ex.gate_up = gate_up;
    ex.down = down;
    ex.index = e;
    l.experts.push_back(ex);
  }
  if (moe.mixtral || moe.shared_inter <= 0) return;
  const int64_t s_im = moe.shared_inter;
  if (moe.granite_shared) {  // GraniteMoeSharedMLP, under the layer
    l.shared.gate_up = Add(p + "shared_mlp.input_linear.weight", {2 * s_im, h});
    l.shared.down = Add(p + "shared_mlp.output_linear.weight", {h, s_im});
    return;
  }
  if (moe.deepseek_shared) {  // DeepseekV3MoE.shared_experts: a plain gated MLP
    const std::string sh = m + moe.shared_name + ".";
    l.shared.gate = Add(sh + "gate_proj.weight", {s_im, h});
    l.shared.up = Add(sh + "up_proj.weight", {s_im, h});
    l.shared.down = Add(sh + "down_proj.weight", {h, s_im});
    return;
  }
  l.shared.gate = Add(m + "shared_expert.gate_proj.weight", {s_im, h});
  l.shared.up = Add(m + "shared_expert.up_proj.weight", {s_im, h});
  l.shared.down = Add(m + "shared_expert.down_proj.weight", {h, s_im});
  l.shared_gate = Add(m + "shared_expert_gate.weight", {1, h});
}

at::Tensor DecoderModel::Gated(const WeightMap& w, const at::Tensor& x, const Expert& e) const {
  auto lin = [&](const at::Tensor& in, const std::string& wn, const std::string& bn) {
    return nn::Linear(in, GetWeight(w, wn), GetOptionalWeight(w, bn));
  };
  if (e.index >= 0 && c_.moe.gpt_oss_experts) {  // GptOssExperts
    const double limit = c_.moe.swiglu_limit;
    at::Tensor gu = nn::Matmul(x, GetWeight(w, e.gate_up).select(0, e.index)) +
                    GetWeight(w, e.gate_up_b).select(0, e.index);
    at::Tensor gate = gu.slice(-1, 0, gu.size(-1), 2).clamp_max(limit);
    at::Tensor up = gu.slice(-1, 1, gu.size(-1), 2).clamp(-limit, limit);
    at::Tensor glu = gate * at::sigmoid(gate * 1.702);
    return nn::Matmul((up + 1.0) * glu, GetWeight(w, e.down).select(0, e.index)) +
           GetWeight(w, e.down_b).select(0, e.index);
  }
  if (e.index >= 0) {  // transformers 5 MixtralExperts: linear(x, gate_up[e]).chunk(2)
    at::Tensor gu = nn::Linear(x, GetWeight(w, e.gate_up).select(0, e.index));
    const int64_t im = gu.size(-1) / 2;
    at::Tensor g = nn::Activate(gu.narrow(-1, 0, im), c_.act.a);
    return nn::Linear(g * gu.narrow(-1, im, im), GetWeight(w, e.down).select(0, e.index));
  }
  if (!e.gate_up.empty()) {  // one fused [2I, H] gate | up (GraniteMoeSharedMLP.input_linear)
    std::vector<at::Tensor> gu = nn::Linear(x, GetWeight(w, e.gate_up)).chunk(2, -1);
    return nn::Linear(nn::Activate(gu[0], c_.act.a) * gu[1], GetWeight(w, e.down));
  }
  at::Tensor g = nn::Activate(lin(x, e.gate, e.gate_b), c_.act.a);
  return lin(g * lin(x, e.up, e.up_b), e.down, e.down_b);
}

// Softmax router, top-k (ties broken by topk's order), optional renormalisation; the top-k
// weights are scattered into a [tokens, experts] combine matrix (zero for experts a token is not
// routed to) that weights each expert's output. Dense over tokens on purpose: a data-dependent
// gather (nonzero + index_select/index_add) splits the compiled graph and the simulated device
// then runs the expert matmuls partly off its bf16 units, which the declared numerics cannot
// follow (MixtralForSequenceClassification failed compile that way).
at::Tensor DecoderModel::MoeMlp(const WeightMap& w, const LayerW& l, const at::Tensor& x) const {
  const auto shape = x.sizes().vec();
  at::Tensor x2 = x.reshape({-1, c_.hidden});
  at::Tensor router_logits = l.router_b.empty()
                                 ? nn::Linear(x2, GetWeight(w, l.router))
                                 : nn::Linear(x2, GetWeight(w, l.router), GetWeight(w, l.router_b));
  at::Tensor combine;  // [N, E]
  if (c_.moe.router == Router::kTopKSoftmax) {
    auto [top_v, top_i] = at::topk(router_logits, c_.moe.top_k, -1);
    combine = at::zeros_like(router_logits).scatter(1, top_i, at::softmax(top_v, -1));
  } else if (c_.moe.router == Router::kSoftmax) {
    at::Tensor probs = at::softmax(router_logits, -1);
    auto [top_w, top_i] = at::topk(probs, c_.moe.top_k, -1);
    if (c_.moe.norm_topk) top_w = top_w / top_w.sum(-1, /*keepdim=*/true);
    combine = at::zeros_like(probs).scatter(1, top_i, top_w);
  } else {
    combine = DeepseekCombine(w, l, router_logits);
  }
  at::Tensor out;
  for (int64_t e = 0; e < static_cast<int64_t>(l.experts.size()); ++e) {
    at::Tensor ye =
        Gated(w, x2, l.experts[static_cast<size_t>(e)]) * combine.select(1, e).unsqueeze(-1);
    out = out.defined() ? out + ye : ye;
  }
  if (!l.shared_gate.empty()) {
    at::Tensor g = at::sigmoid(nn::Linear(x2, GetWeight(w, l.shared_gate)));
    out = out + g * Gated(w, x2, l.shared);
  } else if ((c_.moe.deepseek_shared && !l.shared.gate.empty()) || c_.moe.granite_shared) {
    out = out + Gated(w, x2, l.shared);
  }
  return out.view(shape);
}

// DeepseekV2Moe / DeepseekV3MoE.route_tokens_to_experts (and Ernie4_5_MoeTopKRouter). Groups
// are contiguous runs of experts / n_group; the groups not kept are masked (v2: 0.0 on the
// probabilities; v3: -inf on the biased scores) before the top-k.
at::Tensor DecoderModel::DeepseekCombine(const WeightMap& w, const LayerW& l,
                                         const at::Tensor& logits) const {
  const Moe& m = c_.moe;
  const int64_t n = logits.size(0), e = logits.size(1), g = m.n_group;
  auto keep_groups = [&](const at::Tensor& group_scores) {  // [N, G] -> [N, E] bool
    at::Tensor idx = std::get<1>(at::topk(group_scores, m.topk_group, -1));
    at::Tensor mask = at::zeros_like(group_scores).scatter(1, idx, 1.0);
    return mask.unsqueeze(-1).expand({n, g, e / g}).reshape({n, e}).gt(0.5);
  };
  at::Tensor weights, top_i;
  if (m.router == Router::kErnie) {
    at::Tensor probs = at::softmax(logits, -1);
    top_i = std::get<1>(at::topk(probs + GetWeight(w, l.score_bias), m.top_k, -1));
    weights = probs.gather(1, top_i);
    weights = weights / at::clamp_min(weights.sum(-1, /*keepdim=*/true), m.norm_min);
    return at::zeros_like(logits).scatter(1, top_i, weights);
  }
  if (m.router == Router::kDeepseekV2) {
    at::Tensor probs = at::softmax(logits, -1);
    at::Tensor choice = probs;
    if (m.group_limited && g > 1) {
      at::Tensor keep = keep_groups(std::get<0>(probs.view({n, g, e / g}).max(-1)));
      choice = probs.masked_fill(keep.logical_not(), 0.0);
    }
    std::tie(weights, top_i) = at::topk(choice, m.top_k, -1);
  } else {
    at::Tensor scores = at::sigmoid(logits);
    at::Tensor biased = scores + GetWeight(w, l.score_bias);
    at::Tensor choice = biased;
    if (g > 1) {
      at::Tensor top2 = std::get<0>(at::topk(biased.view({n, g, e / g}), 2, -1)).sum(-1);
      choice = biased.masked_fill(keep_groups(top2).logical_not(),
                                  -std::numeric_limits<double>::infinity());
    }
    top_i = std::get<1>(at::topk(choice, m.top_k, -1));
    weights = scores.gather(1, top_i);
    if (m.norm_topk) weights = weights / (weights.sum(-1, /*keepdim=*/true) + 1e-20);
  }
  weights = weights * m.routed_scaling;
  return at::zeros_like(logits).scatter(1, top_i, weights);
}

// Phi-3 longrope: inv_freq = 1 / (ext * base^(2i/d)); long factors past the original context;
// cos/sin scaled by sqrt(1 + ln(max/orig) / ln(orig)).
std::pair<at::Tensor, at::Tensor> DecoderModel::LongRopeTables(const at::Tensor& pos, int64_t s,
                                                               at::ScalarType dt) const {
  const LongRope& lr = c_.longrope;
  const std::vector<double>& ext = s > lr.original ? lr.long_factor : lr.short_factor;
  // Built from traced scalar fills (a captured constant tensor does not survive the device
  // compiler: phi-3.5 compiled to NaN that way).
  const auto fopts = at::TensorOptions().dtype(dt).device(pos.device());
  std::vector<at::Tensor> parts;
  for (double v : ext) parts.push_back(at::full({1}, v, fopts));
  at::Tensor ext_t = at::cat(parts, 0);
  const int64_t d = c_.rotary_dim;
  at::Tensor expo =
      at::arange(0, d, 2, at::TensorOptions().dtype(at::kLong).device(pos.device())).to(dt) /
      static_cast<double>(d);
  at::Tensor inv_freq = at::reciprocal(ext_t * at::pow(c_.rope.theta, expo));
  at::Tensor freqs = pos.to(dt).unsqueeze(-1) * inv_freq;
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  const double attn_factor = lr.AttentionFactor(c_.max_pos);
  return {emb.cos() * attn_factor, emb.sin() * attn_factor};
}

double LongRope::AttentionFactor(int64_t max_pos) const {
  if (attention_factor) return *attention_factor;
  const double f = factor ? *factor : static_cast<double>(max_pos) / static_cast<double>(original);
  if (f <= 1.0) return 1.0;
  return std::sqrt(1.0 + std::log(f) / std::log(static_cast<double>(original)));
}

}  // namespace ts::zoo::internal::decoder
