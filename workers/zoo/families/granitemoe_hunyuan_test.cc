// granitemoe, granitemoeshared, hunyuan_v1_dense and hunyuan_v1_moe against one-layer references
// in double, written from the transformers sources each test names (not from the zoo's trunk).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::InvFreq;
using testing::Rms;
using testing::Rope;

struct LayerSpec {
  int64_t heads = 2, kv = 2, d = 4;
  double eps = 1e-6, theta = 100.0, scale = 0.0, emb_mult = 1.0, res_mult = 1.0;
  bool qk_norm_after_rope = false;  // hunyuan: query_layernorm / key_layernorm after the rotary
  std::string ln1 = "input_layernorm", ln2 = "post_attention_layernorm";
};

// LlamaModel's one layer (GraniteMoe's multipliers, HunYuan's q/k norms), the MLP given.
at::Tensor OneLayer(const WeightMap& w, const at::Tensor& ids, const LayerSpec& p,
                    const std::function<at::Tensor(const at::Tensor&)>& mlp) {
  const int64_t s = ids.size(1), hq = p.heads * p.d;
  const std::string l = "layers.0.";
  at::Tensor x = at::embedding(w.at("embed_tokens.weight"), ids) * p.emb_mult;
  at::Tensor h = Rms(x, w.at(l + p.ln1 + ".weight"), p.eps);
  auto proj = [&](const char* n, int64_t heads) {
    return at::linear(h, w.at(l + "self_attn." + n + ".weight"))
        .view({1, s, heads, p.d})
        .transpose(1, 2);
  };
  const at::Tensor inv = InvFreq(p.theta, p.d);
  at::Tensor q = Rope(proj("q_proj", p.heads), inv);
  at::Tensor k = Rope(proj("k_proj", p.kv), inv);
  at::Tensor v = proj("v_proj", p.kv);
  if (p.qk_norm_after_rope) {
    q = Rms(q, w.at(l + "self_attn.query_layernorm.weight"), p.eps);
    k = Rms(k, w.at(l + "self_attn.key_layernorm.weight"), p.eps);
  }
  k = k.repeat_interleave(p.heads / p.kv, 1);
  v = v.repeat_interleave(p.heads / p.kv, 1);
  const double scale = p.scale > 0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(p.d));
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) * scale;
  at::Tensor causal = at::ones({s, s}, at::kBool).triu(1);
  scores = scores.masked_fill(causal, -std::numeric_limits<double>::infinity());
  at::Tensor a = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({1, s, hq});
  x = x + at::linear(a, w.at(l + "self_attn.o_proj.weight")) * p.res_mult;
  h = Rms(x, w.at(l + p.ln2 + ".weight"), p.eps);
  x = x + mlp(h) * p.res_mult;
  return Rms(x, w.at("norm.weight"), p.eps);
}

// GraniteMoeMoE: router logits, their top-k, softmax over those, the parallel experts
// (silu(gate) * up from input_linear's [2I, H] rows, output_linear), weighted.
at::Tensor GraniteExperts(const WeightMap& w, const at::Tensor& h, int64_t top_k) {
  const std::string m = "layers.0.block_sparse_moe.";
  at::Tensor x = h.reshape({-1, h.size(-1)});
  auto [top, idx] = at::topk(at::linear(x, w.at(m + "router.layer.weight")), top_k, -1);
  at::Tensor gates = at::softmax(top, -1);
  at::Tensor y = at::zeros_like(x);
  for (int64_t t = 0; t < x.size(0); ++t) {
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t e = idx[t][j].item<int64_t>();
      auto gu = at::linear(x[t], w.at(m + "input_linear.weight")[e]).chunk(2, -1);
      y[t] +=
          gates[t][j] * at::linear(at::silu(gu[0]) * gu[1], w.at(m + "output_linear.weight")[e]);
    }
  }
  return y.view(h.sizes());
}

json GraniteMoeConfig(const char* model_type, const char* arch) {
  return {
      {"architectures", {arch}},     {"model_type", model_type},   {"hidden_size", 8},
      {"intermediate_size", 6},      {"num_attention_heads", 2},   {"num_key_value_heads", 1},
      {"num_hidden_layers", 1},      {"vocab_size", 32},           {"max_position_embeddings", 64},
      {"rms_norm_eps", 1e-6},        {"rope_theta", 100.0},        {"embedding_multiplier", 3.0},
      {"attention_multiplier", 0.2}, {"residual_multiplier", 0.5}, {"logits_scaling", 4.0},
      {"num_local_experts", 4},      {"num_experts_per_tok", 2}};
}

// modeling_granitemoe.py: GraniteMoeTopKGating (top-k logits, then softmax) over
// GraniteMoeParallelExperts, granite's embedding / attention / residual multipliers.
TEST(GraniteMoeHunyuanTest, GraniteMoeRoutesTopKLogitsThroughParallelExperts) {
  auto m = testing::BuildFull(GraniteMoeConfig("granitemoe", "GraniteMoeModel"));
  ASSERT_TRUE(m);
  EXPECT_EQ(testing::WeightShape(*m, "layers.0.block_sparse_moe.input_linear.weight"),
            (std::vector<int64_t>{4, 12, 8}));
  EXPECT_EQ(testing::WeightShape(*m, "layers.0.block_sparse_moe.router.layer.weight"),
            (std::vector<int64_t>{4, 8}));
  const WeightMap w = m->InitWeights(5, at::kDouble);
  const at::Tensor ids = at::arange(3, 10, at::kLong).view({1, 7});
  const LayerSpec p{.heads = 2, .kv = 1, .d = 4, .scale = 0.2, .emb_mult = 3.0, .res_mult = 0.5};
  const at::Tensor want =
      OneLayer(w, ids, p, [&](const at::Tensor& h) { return GraniteExperts(w, h, 2); });
  EXPECT_LT(testing::MaxAbs(m->Forward(w, {{"input_ids", ids}})[0], want), 1e-10);
}

// modeling_granitemoeshared.py: GraniteMoeSharedMLP on the same input, added to the experts'.
TEST(GraniteMoeHunyuanTest, GraniteMoeSharedAddsTheSharedMlp) {
  json cfg = GraniteMoeConfig("granitemoeshared", "GraniteMoeSharedModel");
  cfg["shared_intermediate_size"] = 10;
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  const WeightMap w = m->InitWeights(6, at::kDouble);
  const at::Tensor ids = at::arange(2, 9, at::kLong).view({1, 7});
  const LayerSpec p{.heads = 2, .kv = 1, .d = 4, .scale = 0.2, .emb_mult = 3.0, .res_mult = 0.5};
  const at::Tensor want = OneLayer(w, ids, p, [&](const at::Tensor& h) {
    auto gu = at::linear(h, w.at("layers.0.shared_mlp.input_linear.weight")).chunk(2, -1);
    return GraniteExperts(w, h, 2) +
           at::linear(at::silu(gu[0]) * gu[1], w.at("layers.0.shared_mlp.output_linear.weight"));
  });
  EXPECT_LT(testing::MaxAbs(m->Forward(w, {{"input_ids", ids}})[0], want), 1e-10);
  cfg["shared_intermediate_size"] = 0;  // no shared MLP (the config class's default)
  auto none = testing::BuildFull(cfg);
  ASSERT_TRUE(none);
  EXPECT_FALSE(testing::HasWeight(*none, "layers.0.shared_mlp.input_linear.weight"));
}

// modular_hunyuan_v1_dense.py: per-head RMSNorm on q and k after the rotary; a dynamic RoPE with
// `alpha` runs at base theta * alpha^(d / (d - 2)).
TEST(GraniteMoeHunyuanTest, HunYuanNormsQueriesAndKeysAfterTheAlphaRotary) {
  const json cfg = {{"architectures", {"HunYuanDenseV1Model"}},
                    {"model_type", "hunyuan_v1_dense"},
                    {"hidden_size", 8},
                    {"intermediate_size", 12},
                    {"num_attention_heads", 2},
                    {"num_key_value_heads", 2},
                    {"head_dim", 4},
                    {"num_hidden_layers", 1},
                    {"vocab_size", 32},
                    {"max_position_embeddings", 64},
                    {"rms_norm_eps", 1e-5},
                    {"rope_theta", 100.0},
                    {"rope_scaling", {{"type", "dynamic"}, {"alpha", 10.0}, {"factor", 1.0}}}};
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  WeightMap w = m->InitWeights(7, at::kDouble);
  // Norm weights away from 1, so that a norm on the wrong side of the rotary shows.
  for (const char* n :
       {"layers.0.self_attn.query_layernorm.weight", "layers.0.self_attn.key_layernorm.weight"}) {
    w[n] = at::linspace(0.5, 2.0, 4, at::kDouble);
  }
  const at::Tensor ids = at::arange(4, 11, at::kLong).view({1, 7});
  const LayerSpec p{.heads = 2,
                    .kv = 2,
                    .d = 4,
                    .eps = 1e-5,
                    .theta = 100.0 * std::pow(10.0, 4.0 / 2.0),
                    .qk_norm_after_rope = true};
  auto mlp = [&](const at::Tensor& h) {
    const std::string l = "layers.0.mlp.";
    return at::linear(at::silu(at::linear(h, w.at(l + "gate_proj.weight"))) *
                          at::linear(h, w.at(l + "up_proj.weight")),
                      w.at(l + "down_proj.weight"));
  };
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
  EXPECT_LT(testing::MaxAbs(got, OneLayer(w, ids, p, mlp)), 1e-10);
  LayerSpec plain = p;
  plain.theta = 100.0;
  EXPECT_GT(testing::MaxAbs(got, OneLayer(w, ids, plain, mlp)), 1e-6);
}


// modular_hunyuan_v1_moe.py HunYuanMoEV1Moe: the dense family's attention, then on every layer
// the shared LlamaMLP plus MixtralExperts weighted by the router's softmax, top moe_topk,
// renormalised to sum to one (route_tokens_to_experts); moe_topk as a uniform per-layer list.
TEST(GraniteMoeHunyuanTest, HunYuanMoeAddsTheSharedMlpToRenormalisedTopKExperts) {
  json cfg = {{"architectures", {"HunYuanMoEV1Model"}},
              {"model_type", "hunyuan_v1_moe"},
              {"hidden_size", 8},
              {"intermediate_size", 6},
              {"num_attention_heads", 2},
              {"num_key_value_heads", 1},
              {"head_dim", 4},
              {"num_hidden_layers", 1},
              {"vocab_size", 32},
              {"max_position_embeddings", 64},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 100.0},
              {"rope_scaling", {{"type", "dynamic"}, {"alpha", 10.0}, {"factor", 1.0}}},
              {"num_experts", 4},
              {"moe_topk", {3}}};
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  const std::string l = "layers.0.mlp.";
  EXPECT_EQ(testing::WeightShape(*m, l + "gate.wg.weight"), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(testing::WeightShape(*m, l + "experts.gate_up_proj"),
            (std::vector<int64_t>{4, 12, 8}));
  EXPECT_EQ(testing::WeightShape(*m, l + "experts.down_proj"), (std::vector<int64_t>{4, 8, 6}));
  EXPECT_EQ(testing::WeightShape(*m, l + "shared_mlp.gate_proj.weight"),
            (std::vector<int64_t>{6, 8}));
  WeightMap w = m->InitWeights(8, at::kDouble);
  for (const char* n :
       {"layers.0.self_attn.query_layernorm.weight", "layers.0.self_attn.key_layernorm.weight"}) {
    w[n] = at::linspace(0.5, 2.0, 4, at::kDouble);
  }
  const at::Tensor ids = at::arange(4, 11, at::kLong).view({1, 7});
  const LayerSpec p{.heads = 2,
                    .kv = 1,
                    .d = 4,
                    .eps = 1e-5,
                    .theta = 100.0 * std::pow(10.0, 4.0 / 2.0),
                    .qk_norm_after_rope = true};
  auto gated = [](const at::Tensor& x, const at::Tensor& g, const at::Tensor& u,
                  const at::Tensor& d) {
    return at::linear(at::silu(at::linear(x, g)) * at::linear(x, u), d);
  };
  auto moe = [&](const at::Tensor& h) {
    at::Tensor x = h.reshape({-1, 8});
    at::Tensor probs = at::softmax(at::linear(x, w.at(l + "gate.wg.weight")), -1);
    auto [top, idx] = at::topk(probs, 3, -1);
    top = top / top.sum(-1, true);
    at::Tensor y = gated(x, w.at(l + "shared_mlp.gate_proj.weight"),
                         w.at(l + "shared_mlp.up_proj.weight"),
                         w.at(l + "shared_mlp.down_proj.weight"));
    for (int64_t t = 0; t < x.size(0); ++t) {
      for (int64_t j = 0; j < 3; ++j) {
        const int64_t e = idx[t][j].item<int64_t>();
        auto gu = w.at(l + "experts.gate_up_proj")[e].chunk(2, 0);
        y[t] += top[t][j] * gated(x[t], gu[0], gu[1], w.at(l + "experts.down_proj")[e]);
      }
    }
    return y.view(h.sizes());
  };
  EXPECT_LT(testing::MaxAbs(m->Forward(w, {{"input_ids", ids}})[0], OneLayer(w, ids, p, moe)),
            1e-10);
  cfg["moe_topk"] = {3, 2};
  cfg["num_hidden_layers"] = 2;
  BuildOptions o;
  o.tiny = false;
  auto uneven = BuildModel(cfg, o);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("moe_topk"), std::string::npos);
}

}  // namespace
}  // namespace ts::zoo
