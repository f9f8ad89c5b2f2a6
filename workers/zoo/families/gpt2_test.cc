// Tests of the gpt2 family's attention scale against transformers' formula (families/gpt2.cc):
// the expected outputs are computed here from GPT2Attention's eager_attention_forward.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

constexpr int64_t kH = 8, kHeads = 2, kHd = kH / kHeads, kS = 6;

nlohmann::json TwoLayers() {
  return {{"architectures", {"GPT2Model"}},
          {"model_type", "gpt2"},
          {"n_embd", kH},
          {"n_head", kHeads},
          {"n_layer", 2},
          {"n_positions", 16},
          {"vocab_size", 16},
          {"layer_norm_epsilon", 1e-5}};
}

at::Tensor LayerNorm(const at::Tensor& x) {
  return at::layer_norm(x, {kH}, at::Tensor(), at::Tensor(), 1e-5);
}

// Weights that leave layer 0 the identity (both c_proj zero) and make layer 1's attention read
// q = k = v = ln_1(x) (c_attn = [I | I | I]) through c_proj = I, its MLP off; unit norms, zero
// biases.
WeightMap Weights(const Model& m) {
  WeightMap w = m.InitWeights(4, at::kDouble);
  for (auto& [name, t] : w) {
    const bool norm = name.find("ln_") != std::string::npos;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0) t = at::zeros_like(t);
    if (norm && name.compare(name.size() - 7, 7, ".weight") == 0) t = at::ones_like(t);
  }
  const at::Tensor eye = at::eye(kH, at::kDouble);
  w["h.0.attn.c_proj.weight"] = at::zeros({kH, kH}, at::kDouble);
  w["h.0.mlp.c_proj.weight"].zero_();
  w["h.1.mlp.c_proj.weight"].zero_();
  w["h.1.attn.c_attn.weight"] = at::cat({eye, eye, eye}, 1);  // Conv1D [in, 3 * out]
  w["h.1.attn.c_proj.weight"] = eye;
  return w;
}

// GPT2Model.forward with those weights: x = wte[ids] + wpe[pos]; layer 1 adds
// softmax(causal(q k^T * scale)) v per head; ln_f.
at::Tensor Expected(const WeightMap& w, const at::Tensor& ids, double scale) {
  const at::Tensor x = w.at("wte.weight").index_select(0, ids) +
                       w.at("wpe.weight").narrow(0, 0, ids.size(0));  // [S, H]
  const at::Tensor h = LayerNorm(x).view({kS, kHeads, kHd}).transpose(0, 1);  // [heads, S, hd]
  at::Tensor scores = at::matmul(h, h.transpose(-1, -2)) * scale;
  const at::Tensor future = at::ones({kS, kS}, at::kBool).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  const at::Tensor a = at::matmul(at::softmax(scores, -1), h).transpose(0, 1).reshape({kS, kH});
  return LayerNorm(x + a);
}

// eager_attention_forward (transformers/models/gpt2/modeling_gpt2.py): attn_weights /
// sqrt(head_dim) if scale_attn_weights, then / (layer_idx + 1) if
// scale_attn_by_inverse_layer_idx.
TEST(Gpt2Test, AttentionScaleFollowsScaleAttnWeightsAndInverseLayerIdx) {
  struct Case {
    bool weights, by_layer;
    double scale;  // layer 1's
  };
  const double d = std::sqrt(static_cast<double>(kHd));
  const Case cases[] = {{true, false, 1.0 / d}, {true, true, 1.0 / d / 2.0}, {false, false, 1.0},
                        {false, true, 0.5}};
  const at::Tensor ids = at::arange(3, 3 + kS, at::kLong);
  for (const Case& k : cases) {
    SCOPED_TRACE(std::to_string(k.weights) + std::to_string(k.by_layer));
    nlohmann::json cfg = TwoLayers();
    cfg["scale_attn_weights"] = k.weights;
    cfg["scale_attn_by_inverse_layer_idx"] = k.by_layer;
    BuildOptions o;
    o.tiny = false;
    auto m = BuildModel(cfg, o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const WeightMap w = Weights(**m);
    const at::Tensor got = (*m)->Forward(w, {{"input_ids", ids.view({1, kS})}})[0][0];
    const at::Tensor want = Expected(w, ids, k.scale);
    const at::Tensor other = Expected(w, ids, k.scale * 2.0);
    ASSERT_GT((want - other).abs().max().item<double>(), 1e-4);  // the scale shows
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-10);
  }
}

// GPTBigCodeAttention (transformers/models/gpt_bigcode/modeling_gpt_bigcode.py): scaling =
// head_dim ** -0.5 if config.scale_attn_weights else 1.0, applied to q k^T. So the model with
// scale_attn_weights false equals the scaled model whose query projection (the first n_embd rows
// of the multi-query c_attn, weight and bias) is multiplied by sqrt(head_dim).
TEST(Gpt2Test, GptBigCodeScaleAttnWeightsFalseLeavesScoresUnscaled) {
  nlohmann::json cfg = {{"architectures", {"GPTBigCodeModel"}}, {"model_type", "gpt_bigcode"},
                        {"n_embd", kH}, {"n_head", kHeads}, {"n_layer", 1},
                        {"n_positions", 16}, {"vocab_size", 16}, {"multi_query", true},
                        {"layer_norm_epsilon", 1e-5}};
  BuildOptions o;
  o.tiny = false;
  auto scaled = BuildModel(cfg, o);
  cfg["scale_attn_weights"] = false;
  auto unscaled = BuildModel(cfg, o);
  ASSERT_TRUE(scaled.ok() && unscaled.ok());
  WeightMap w = (*unscaled)->InitWeights(5, at::kDouble);
  w["h.0.attn.c_attn.weight"] = w.at("h.0.attn.c_attn.weight") * 20;  // scores of order one
  WeightMap wq = w;
  const double sqrt_d = std::sqrt(static_cast<double>(kHd));
  for (const char* name : {"h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias"}) {
    ASSERT_TRUE(wq.count(name)) << name;
    at::Tensor t = wq.at(name).clone();
    t.narrow(0, 0, kH).mul_(sqrt_d);  // Linear [n_embd + 2 * head_dim, n_embd]: q rows first
    wq[name] = t;
  }
  const at::Tensor ids = at::arange(2, 2 + kS, at::kLong).view({1, kS});
  const at::Tensor got = (*unscaled)->Forward(w, {{"input_ids", ids}})[0];
  const at::Tensor want = (*scaled)->Forward(wq, {{"input_ids", ids}})[0];
  const at::Tensor plain = (*scaled)->Forward(w, {{"input_ids", ids}})[0];
  ASSERT_GT((plain - want).abs().max().item<double>(), 1e-4) << "the scale shows";
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-10);
}

}  // namespace
}  // namespace ts::zoo
