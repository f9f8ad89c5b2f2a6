// afmoe against a reference in double written from modular_afmoe.py (not from the zoo's trunks):
// AfmoeAttention (q / k RMSNorm per head, the rotary on the sliding layers only, the output gated
// by sigmoid(gate_proj(x)) before o_proj), AfmoeDecoderLayer's sandwich norms, the dense first
// layer and AfmoeSparseMoeBlock (AfmoeTokenChoiceRouter, Qwen2MoeExperts, shared experts), the
// muP embedding scale.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::Rms;
using testing::RotateHalf;

// Qwen2MoeMLP: down(silu(gate x) * up x).
at::Tensor Mlp(const at::Tensor& x, const at::Tensor& g, const at::Tensor& u, const at::Tensor& d) {
  return at::matmul(at::silu(at::matmul(x, g.t())) * at::matmul(x, u.t()), d.t());
}

struct AfmoeRef {
  const WeightMap& w;
  int64_t heads, kv, hd, window, top_k, experts;
  double eps, theta, route_scale;

  at::Tensor W(const std::string& n) const { return w.at(n); }

  at::Tensor Attention(const std::string& p, const at::Tensor& h, bool sliding) const {
    const int64_t s = h.size(0);
    at::Tensor q = at::matmul(h, W(p + "q_proj.weight").t()).view({s, heads, hd});
    at::Tensor k = at::matmul(h, W(p + "k_proj.weight").t()).view({s, kv, hd});
    at::Tensor v = at::matmul(h, W(p + "v_proj.weight").t()).view({s, kv, hd});
    q = Rms(q, W(p + "q_norm.weight"), eps).transpose(0, 1);  // [heads, S, hd]
    k = Rms(k, W(p + "k_norm.weight"), eps).transpose(0, 1);
    v = v.transpose(0, 1);
    if (sliding) {
      at::Tensor inv =
          1.0 / at::pow(theta, at::arange(0, hd, 2, at::kDouble) / static_cast<double>(hd));
      at::Tensor f = at::outer(at::arange(s, at::kDouble), inv);
      at::Tensor emb = at::cat({f, f}, -1);
      q = q * emb.cos() + RotateHalf(q) * emb.sin();
      k = k * emb.cos() + RotateHalf(k) * emb.sin();
    }
    k = k.repeat_interleave(heads / kv, 0);
    v = v.repeat_interleave(heads / kv, 0);
    at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd));
    at::Tensor qi = at::arange(s).view({s, 1}), ki = at::arange(s).view({1, s});
    at::Tensor blocked = ki.gt(qi);
    if (sliding) blocked = blocked.logical_or(ki.le(qi - window));
    scores = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
    at::Tensor a = at::matmul(at::softmax(scores, -1), v).transpose(0, 1).reshape({s, heads * hd});
    a = a * at::sigmoid(at::matmul(h, W(p + "gate_proj.weight").t()));
    return at::matmul(a, W(p + "o_proj.weight").t());
  }

  at::Tensor Moe(const std::string& p, const at::Tensor& h) const {
    at::Tensor scores = at::sigmoid(at::matmul(h, W(p + "router.gate.weight").t()));
    at::Tensor top = std::get<1>(at::topk(scores + W(p + "expert_bias"), top_k, -1));
    at::Tensor picked = scores.gather(1, top);
    at::Tensor wts = picked / (picked.sum(-1, /*keepdim=*/true) + 1e-20) * route_scale;
    const at::Tensor gu = W(p + "experts.gate_up_proj"), dn = W(p + "experts.down_proj");
    const int64_t inter = gu.size(1) / 2;
    at::Tensor out =
        Mlp(h, W(p + "shared_experts.gate_proj.weight"), W(p + "shared_experts.up_proj.weight"),
            W(p + "shared_experts.down_proj.weight"));
    std::vector<at::Tensor> rows;
    for (int64_t t = 0; t < h.size(0); ++t) {
      at::Tensor r = at::zeros({h.size(1)}, at::kDouble);
      for (int64_t j = 0; j < top_k; ++j) {
        const int64_t e = top[t][j].item<int64_t>();
        at::Tensor g = gu[e].narrow(0, 0, inter), u = gu[e].narrow(0, inter, inter);
        r = r + wts[t][j] * Mlp(h[t].view({1, -1}), g, u, dn[e])[0];
      }
      rows.push_back(r);
    }
    return out + at::stack(rows);
  }
};

TEST(AfmoeTest, GatedAttentionSandwichNormsAndSigmoidMoeAsTransformers) {
  const int64_t hid = 8, heads = 2, kv = 1, hd = 4, s = 7, window = 3;
  const double eps = 1e-5, theta = 100.0, route_scale = 1.5;
  json cfg = {{"architectures", {"AfmoeModel"}},
              {"model_type", "afmoe"},
              {"vocab_size", 32},
              {"hidden_size", hid},
              {"intermediate_size", 12},
              {"moe_intermediate_size", 6},
              {"num_hidden_layers", 2},
              {"num_dense_layers", 1},
              {"num_attention_heads", heads},
              {"num_key_value_heads", kv},
              {"head_dim", hd},
              {"max_position_embeddings", 64},
              {"rms_norm_eps", eps},
              {"rope_theta", theta},
              {"num_experts", 4},
              {"num_experts_per_tok", 2},
              {"num_shared_experts", 1},
              {"route_scale", route_scale},
              {"layer_types", {"sliding_attention", "full_attention"}},
              {"sliding_window", window},
              {"mup_enabled", true}};
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  EXPECT_TRUE(testing::HasWeight(*m, "layers.0.mlp.gate_proj.weight"));
  EXPECT_FALSE(testing::HasWeight(*m, "layers.0.mlp.router.gate.weight"));
  EXPECT_EQ(testing::WeightShape(*m, "layers.1.mlp.shared_experts.up_proj.weight"),
            (std::vector<int64_t>{6, hid}));
  EXPECT_FALSE(testing::HasWeight(*m, "layers.0.self_attn.o_proj.bias"));
  WeightMap w = m->InitWeights(5, at::kDouble);
  at::Generator gen = at::detail::createCPUGenerator(9);
  w.at("layers.1.mlp.expert_bias") = at::randn({4}, gen, at::kDouble) * 0.5;
  const at::Tensor ids = at::arange(3, 3 + s, at::kLong).view({1, s});
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0][0];

  AfmoeRef ref{w, heads, kv, hd, window, 2, 4, eps, theta, route_scale};
  at::Tensor x = w.at("embed_tokens.weight").index_select(0, ids[0]) * std::sqrt(8.0);
  for (int64_t i = 0; i < 2; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    at::Tensor h = Rms(x, w.at(p + "input_layernorm.weight"), eps);
    x = x + Rms(ref.Attention(p + "self_attn.", h, i == 0),
                w.at(p + "post_attention_layernorm.weight"), eps);
    h = Rms(x, w.at(p + "pre_mlp_layernorm.weight"), eps);
    at::Tensor f = i == 0 ? Mlp(h, w.at(p + "mlp.gate_proj.weight"), w.at(p + "mlp.up_proj.weight"),
                                w.at(p + "mlp.down_proj.weight"))
                          : ref.Moe(p + "mlp.", h);
    x = x + Rms(f, w.at(p + "post_mlp_layernorm.weight"), eps);
  }
  const at::Tensor want = Rms(x, w.at("norm.weight"), eps);
  EXPECT_LT(testing::RelDiff(got, want), 1e-10);
  // The gate matters: with gate_proj at zero (every gate 1/2) the output moves.
  WeightMap open = w;
  open.at("layers.0.self_attn.gate_proj.weight") =
      at::zeros_like(w.at("layers.0.self_attn.gate_proj.weight"));
  EXPECT_GT(testing::RelDiff(m->Forward(open, {{"input_ids", ids}})[0][0], want), 1e-6);
}

}  // namespace
}  // namespace ts::zoo
