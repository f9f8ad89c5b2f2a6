// Fidelity tests (issue 17 item 1): each expected value comes from the transformers code named in
// the test (transformers 5), never from another zoo path that could share the bug.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"

namespace ts::zoo {
namespace {

using testing::BuildFull;
using testing::MaxAbs;

// ---- Phi-3 longrope ----------------------------------------------------------------------------

// A one-layer Phi-3 at full size: head_dim 8, four longrope factors each.
nlohmann::json Phi3(int64_t max_pos) {
  return {{"architectures", {"Phi3Model"}},
          {"model_type", "phi3"},
          {"hidden_size", 16},
          {"intermediate_size", 32},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 2},
          {"num_hidden_layers", 1},
          {"vocab_size", 32},
          {"max_position_embeddings", max_pos},
          {"original_max_position_embeddings", 4096},
          {"rope_theta", 10000.0},
          {"rope_scaling",
           {{"type", "longrope"},
            {"short_factor", {1.0, 1.5, 2.0, 3.0}},
            {"long_factor", {2.0, 4.0, 8.0, 16.0}}}}};
}

at::Tensor RunPhi3(const nlohmann::json& cfg) {
  auto m = BuildFull(cfg);
  if (!m) return {};
  WeightMap w = m->InitWeights(11, at::kDouble);
  for (auto& [k, v] : w)
    if (k.find("qkv_proj") != std::string::npos) v = v * 3;  // scores of order one, unsaturated
  const at::Tensor ids = at::arange(1, 9, at::kLong).view({1, 8});
  return m->Forward(w, {{"input_ids", ids}})[0];
}

// modeling_rope_utils.py _compute_longrope_parameters (transformers 5): factor = the dict's
// `factor`, else max_position_embeddings / original_max_position_embeddings; attention_factor =
// the dict's, else sqrt(1 + ln(factor) / ln(original)) when factor > 1, else 1. cos and sin are
// multiplied by attention_factor (the rotary embedding's attention_scaling).
TEST(FidelityTest, Phi3LongropeAttentionFactorAndFactorAsTransformers5) {
  const double hf_implicit = std::sqrt(1.0 + std::log(131072.0 / 4096.0) / std::log(4096.0));
  const at::Tensor implicit = RunPhi3(Phi3(131072));
  ASSERT_TRUE(implicit.defined());
  // An explicit attention_factor equal to the formula's value changes nothing.
  nlohmann::json same = Phi3(131072);
  same["rope_scaling"]["attention_factor"] = hf_implicit;
  EXPECT_LT(MaxAbs(RunPhi3(same), implicit), 1e-12);
  // An explicit attention_factor of 1 is what a model without extension (max == original) gets.
  nlohmann::json one = Phi3(131072);
  one["rope_scaling"]["attention_factor"] = 1.0;
  const at::Tensor unscaled = RunPhi3(Phi3(4096));
  EXPECT_GT(MaxAbs(unscaled, implicit), 1e-6) << "the attention factor shows";
  EXPECT_LT(MaxAbs(RunPhi3(one), unscaled), 1e-12);
  // An explicit factor replaces max / original in the formula.
  nlohmann::json f8 = Phi3(131072);
  f8["rope_scaling"]["factor"] = 8.0;
  nlohmann::json f8_want = Phi3(131072);
  f8_want["rope_scaling"]["attention_factor"] =
      std::sqrt(1.0 + std::log(8.0) / std::log(4096.0));
  EXPECT_LT(MaxAbs(RunPhi3(f8), RunPhi3(f8_want)), 1e-12);
  EXPECT_GT(MaxAbs(RunPhi3(f8), implicit), 1e-6);
  // short_mscale / long_mscale are not read by transformers 5: they cannot fail the load.
  nlohmann::json ms = Phi3(131072);
  ms["rope_scaling"]["short_mscale"] = 1.1;
  ms["rope_scaling"]["long_mscale"] = 1.2;
  EXPECT_LT(MaxAbs(RunPhi3(ms), implicit), 1e-12);
  // A non-positive attention_factor names the field.
  nlohmann::json bad = Phi3(131072);
  bad["rope_scaling"]["attention_factor"] = -1.0;
  BuildOptions o;
  o.tiny = false;
  auto r = BuildModel(bad, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rope_scaling.attention_factor"), std::string::npos)
      << r.status().message();
}

// ---- wav2vec2 use_weighted_layer_sum ------------------------------------------------------------

nlohmann::json W2v(const std::string& arch, int64_t layers) {
  return {{"architectures", {arch}},
          {"model_type", "wav2vec2"},
          {"hidden_size", 16},
          {"num_hidden_layers", layers},
          {"num_attention_heads", 2},
          {"intermediate_size", 32},
          {"conv_dim", {8, 8}},
          {"conv_stride", {3, 2}},
          {"conv_kernel", {4, 2}},
          {"num_conv_pos_embeddings", 4},
          {"num_conv_pos_embedding_groups", 2},
          {"classifier_proj_size", 8},
          {"num_labels", 3}};
}

// modeling_wav2vec2.py Wav2Vec2ForSequenceClassification: layer_weights = ones(L + 1) / (L + 1);
// forward stacks outputs.hidden_states (Wav2Vec2Encoder: the input after the encoder's layer norm,
// then each layer's output) on dim 1, multiplies by softmax(layer_weights).view(-1, 1, 1), sums,
// then projector, mean over frames, classifier.
TEST(FidelityTest, Wav2Vec2WeightedLayerSumIsSoftmaxWeightedHiddenStates) {
  nlohmann::json cfg = W2v("Wav2Vec2ForSequenceClassification", 2);
  cfg["use_weighted_layer_sum"] = true;
  auto m = BuildFull(cfg);
  ASSERT_TRUE(m);
  EXPECT_EQ(testing::WeightShape(*m, "layer_weights"), (std::vector<int64_t>{3}));
  WeightMap w = m->InitWeights(4, at::kDouble);
  EXPECT_TRUE(at::allclose(w.at("layer_weights"), at::full({3}, 1.0 / 3.0, at::kDouble)));
  // Weights p = softmax(layer_weights) = [0, 0.3, 0.7]: hidden states 1 and 2 are the last
  // hidden states of the one- and two-layer Wav2Vec2Model on the same weights.
  w["layer_weights"] =
      at::log(at::tensor(std::vector<double>{1e-300, 0.3, 0.7}, at::kDouble));
  at::Tensor values = at::randn({2, 40}, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor got = m->Forward(w, {{"input_values", values}})[0];

  WeightMap base;
  const std::string pre = "wav2vec2.";
  for (const auto& [k, v] : w)
    if (k.rfind(pre, 0) == 0) base[k.substr(pre.size())] = v;
  std::vector<at::Tensor> states;
  for (int64_t layers : {1, 2}) {
    auto bm = BuildFull(W2v("Wav2Vec2Model", layers));
    ASSERT_TRUE(bm);
    WeightMap bw;
    for (const auto& [n, s] : bm->WeightShapes()) bw[n] = base.at(n);
    states.push_back(bm->Forward(bw, {{"input_values", values}})[0]);
  }
  at::Tensor mixed = 0.3 * states[0] + 0.7 * states[1];
  at::Tensor proj = at::linear(mixed, w.at("projector.weight"), w.at("projector.bias"));
  at::Tensor want =
      at::linear(proj.mean(1), w.at("classifier.weight"), w.at("classifier.bias"));
  EXPECT_LT(MaxAbs(got, want), 1e-10);
  // Without the flag there is no layer_weights and the last state alone is classified.
  auto plain = BuildFull(W2v("Wav2Vec2ForSequenceClassification", 2));
  ASSERT_TRUE(plain);
  EXPECT_TRUE(testing::WeightShape(*plain, "layer_weights").empty());
  WeightMap pw = w;
  pw.erase("layer_weights");
  at::Tensor last = at::linear(states[1], w.at("projector.weight"), w.at("projector.bias"));
  EXPECT_LT(MaxAbs(plain->Forward(pw, {{"input_values", values}})[0],
                   at::linear(last.mean(1), w.at("classifier.weight"), w.at("classifier.bias"))),
            1e-10);
}

// ---- gemma3 nested rope_parameters ----------------------------------------------------------

nlohmann::json Gemma3(const std::string& layer_type) {
  return {{"architectures", {"Gemma3TextModel"}},
          {"model_type", "gemma3_text"},
          {"hidden_size", 16},
          {"intermediate_size", 32},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"head_dim", 8},
          {"num_hidden_layers", 1},
          {"vocab_size", 32},
          {"max_position_embeddings", 128},
          {"query_pre_attn_scalar", 8},
          {"sliding_window", 64},  // longer than the run: only the rotary differs
          {"layer_types", {layer_type}}};
}

at::Tensor RunGemma3(const nlohmann::json& cfg) {
  auto m = BuildFull(cfg);
  if (!m) return {};
  WeightMap w = m->InitWeights(7, at::kDouble);
  for (auto& [k, v] : w)
    if (k.find("q_proj") != std::string::npos || k.find("k_proj") != std::string::npos) v = v * 20;
  const at::Tensor ids = at::arange(1, 13, at::kLong).view({1, 12});
  return m->Forward(w, {{"input_ids", ids}})[0];
}

// configuration_gemma3.py (transformers 5) and modeling_rope_utils.py
// RotaryEmbeddingConfigMixin.standardize_rope_params: `rope_parameters` nested by layer type gives
// each layer type its whole entry; a legacy config's `rope_scaling` is the full layers' and the
// sliding layers run default RoPE on rope_local_base_freq.
TEST(FidelityTest, Gemma3NestedRopeParametersPerLayerType) {
  const nlohmann::json full_linear = {{"rope_type", "linear"}, {"factor", 8.0},
                                      {"rope_theta", 1000000.0}};
  // Full layer: legacy rope_scaling == nested full_attention entry.
  nlohmann::json legacy = Gemma3("full_attention");
  legacy["rope_theta"] = 1000000.0;
  legacy["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  legacy["rope_local_base_freq"] = 10000.0;
  nlohmann::json nested = Gemma3("full_attention");
  nested["rope_parameters"] = {{"full_attention", full_linear},
                               {"sliding_attention",
                                {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  const at::Tensor full = RunGemma3(nested);
  ASSERT_TRUE(full.defined());
  EXPECT_LT(MaxAbs(RunGemma3(legacy), full), 1e-12);
  // Sliding layer: its entry's kind and factor are read as the full layers' are: a sliding layer
  // on {linear, 8, 1e6} computes what a full layer on the same entry computes.
  nlohmann::json sliding = Gemma3("sliding_attention");
  sliding["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}},
                                {"sliding_attention", full_linear}};
  EXPECT_LT(MaxAbs(RunGemma3(sliding), full), 1e-12);
  // The legacy sliding layer ignores rope_scaling: default RoPE on rope_local_base_freq, as the
  // nested config's {default, 1e4} sliding entry.
  nlohmann::json legacy_sl = legacy;
  legacy_sl["layer_types"] = {"sliding_attention"};
  nlohmann::json nested_sl = nested;
  nested_sl["layer_types"] = {"sliding_attention"};
  const at::Tensor a = RunGemma3(legacy_sl);
  EXPECT_LT(MaxAbs(a, RunGemma3(nested_sl)), 1e-12);
  EXPECT_GT(MaxAbs(a, full), 1e-6) << "the two entries differ";
}

// ---- helium's interleaved rotary ----------------------------------------------------------------

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return w * (x * at::rsqrt(x.pow(2).mean(-1, true) + eps));
}

// MixtralExperts as transformers 5 computes them (the fused layout): for each token t and each of
// its chosen experts e (idx[t][j], weight wt[t][j]): gate, up = linear(h[t], gate_up_proj[e])
// .chunk(2), wt * down_proj[e] @ (silu(gate) * up), summed. h [S, H].
at::Tensor RoutedExperts(const at::Tensor& h, const at::Tensor& idx, const at::Tensor& wt,
                         const at::Tensor& gate_up, const at::Tensor& down) {
  at::Tensor y = at::zeros_like(h);
  for (int64_t t = 0; t < h.size(0); ++t) {
    for (int64_t j = 0; j < idx.size(1); ++j) {
      const int64_t e = idx[t][j].item<int64_t>();
      const auto gu = at::linear(h[t], gate_up[e]).chunk(2, -1);
      y[t] += wt[t][j] * at::linear(at::silu(gu[0]) * gu[1], down[e]);
    }
  }
  return y;
}

// One llama-layout layer and the final norm, in double, as transformers' LlamaModel computes it
// (modeling_llama.py): RMSNorm, q/k/v (bias when present), rotary on arange(S) with
// inv_freq = 1 / theta^(arange(0, d, 2) / d) (rotate_half over the halves, or over even/odd pairs
// with each frequency repeated when `interleaved`), `q_hook` on the rotated queries, causal
// softmax(q k^T / sqrt(d)) v, o_proj, residual; RMSNorm, down(silu(gate) * up), residual; norm.
at::Tensor OneLayerLlamaReference(const WeightMap& w, const at::Tensor& ids, int64_t heads,
                                  int64_t d, double theta, double eps, bool interleaved,
                                  const std::function<at::Tensor(const at::Tensor&)>& q_hook) {
  const int64_t s = ids.size(1), hid = heads * d;
  const std::string l = "layers.0.";
  auto lin = [&](const at::Tensor& x, const std::string& n) {
    const std::string b = l + n + ".bias";
    return at::linear(x, w.at(l + n + ".weight"), w.count(b) ? w.at(b) : at::Tensor());
  };
  at::Tensor x = w.at("embed_tokens.weight").index_select(0, ids.view(-1)).view({1, s, hid});
  at::Tensor h = RmsNorm(x, w.at(l + "input_layernorm.weight"), eps);
  auto split = [&](const at::Tensor& t) { return t.view({1, s, heads, d}).transpose(1, 2); };
  at::Tensor q = split(lin(h, "self_attn.q_proj")), k = split(lin(h, "self_attn.k_proj"));
  at::Tensor v = split(lin(h, "self_attn.v_proj"));
  at::Tensor inv = 1.0 / at::pow(theta, at::arange(0, d, 2, at::kDouble) / d);
  at::Tensor freqs = at::outer(at::arange(s, at::kDouble), inv);  // [S, d/2]
  at::Tensor cos = at::cat({freqs, freqs}, -1).cos(), sin = at::cat({freqs, freqs}, -1).sin();
  std::function<at::Tensor(const at::Tensor&)> rot = [&](const at::Tensor& t) {
    return at::cat({-t.narrow(-1, d / 2, d / 2), t.narrow(-1, 0, d / 2)}, -1);
  };
  if (interleaved) {
    cos = cos.narrow(-1, 0, d / 2).repeat_interleave(2, -1);
    sin = sin.narrow(-1, 0, d / 2).repeat_interleave(2, -1);
    rot = [&](const at::Tensor& t) {
      const at::Tensor even = t.slice(-1, 0, d, 2), odd = t.slice(-1, 1, d, 2);
      return at::stack({-odd, even}, -1).flatten(-2);
    };
  }
  q = q_hook(q * cos + rot(q) * sin);
  k = k * cos + rot(k) * sin;
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
  scores = scores.masked_fill(at::ones({s, s}, at::kBool).triu(1), -INFINITY);
  at::Tensor a = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({1, s, hid});
  x = x + lin(a, "self_attn.o_proj");
  h = RmsNorm(x, w.at(l + "post_attention_layernorm.weight"), eps);
  x = x + lin(at::silu(lin(h, "mlp.gate_proj")) * lin(h, "mlp.up_proj"), "mlp.down_proj");
  return RmsNorm(x, w.at("norm.weight"), eps);
}

// Norm weights off 1 so that the reference's norms are exercised.
void SpreadNorms(WeightMap& w, int64_t hid) {
  for (auto& [k, v] : w)
    if (k.find("norm") != std::string::npos) v = v + 0.1 * at::arange(hid, at::kDouble);
}

// modular_helium.py (transformers 5): HeliumModel is LlamaModel with HeliumRMSNorm, HeliumMLP
// (LlamaMLP: down(silu(gate x) * up x)) and HeliumAttention, whose apply_rotary_pos_emb
// interleaves: cos = cos[..., :d/2].repeat_interleave(2), rotate_half(x) =
// stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2); o_proj has no bias; scaling 1/sqrt(d).
// LlamaRotaryEmbedding: inv_freq = 1 / theta^(arange(0, d, 2) / d), positions arange(S).
TEST(FidelityTest, HeliumRotaryIsInterleavedAsTransformers) {
  const int64_t hid = 8, heads = 2, d = 4, s = 6;
  const double eps = 1e-8, theta = 100.0;  // a small base: every pair turns visibly
  const nlohmann::json cfg = {{"architectures", {"HeliumModel"}}, {"model_type", "helium"},
                              {"hidden_size", hid}, {"intermediate_size", 16},
                              {"num_attention_heads", heads}, {"num_key_value_heads", heads},
                              {"head_dim", d}, {"num_hidden_layers", 1}, {"vocab_size", 32},
                              {"max_position_embeddings", 64}, {"rms_norm_eps", eps},
                              {"rope_theta", theta}, {"attention_bias", true}};
  auto m = BuildFull(cfg);
  ASSERT_NE(m, nullptr);
  WeightMap w = m->InitWeights(5, at::kDouble);
  EXPECT_EQ(w.count("layers.0.self_attn.o_proj.bias"), 0u);
  EXPECT_EQ(w.count("layers.0.self_attn.q_proj.bias"), 1u);
  SpreadNorms(w, hid);
  const at::Tensor ids = at::arange(3, 3 + s, at::kLong).view({1, s});
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
  auto none = [](const at::Tensor& q) { return q; };
  const at::Tensor want = OneLayerLlamaReference(w, ids, heads, d, theta, eps, true, none);
  EXPECT_LT(MaxAbs(got, want), 1e-10);
  // rotate_half over the halves (Llama's) is not what transformers computes for helium.
  EXPECT_GT(MaxAbs(got, OneLayerLlamaReference(w, ids, heads, d, theta, eps, false, none)),
            1e-4);
}

// modeling_ministral3.py (transformers 5) Ministral3Attention: after apply_rotary_pos_emb,
// query_states *= 1 + beta * log(1 + floor(cache_position / original_max_position_embeddings)),
// beta and the original length read from rope_parameters; otherwise MistralAttention.
TEST(FidelityTest, Ministral3ScalesQueriesByPositionAsTransformers) {
  const int64_t hid = 8, heads = 2, d = 4, s = 12;
  const double eps = 1e-5, theta = 100.0, beta = 0.5;
  nlohmann::json cfg = {{"architectures", {"Ministral3Model"}}, {"model_type", "ministral3"},
                        {"hidden_size", hid}, {"intermediate_size", 16},
                        {"num_attention_heads", heads}, {"num_key_value_heads", heads},
                        {"head_dim", d}, {"num_hidden_layers", 1}, {"vocab_size", 32},
                        {"max_position_embeddings", 64}, {"rms_norm_eps", eps},
                        {"sliding_window", nullptr},
                        {"rope_parameters",
                         {{"rope_type", "default"}, {"rope_theta", theta},
                          {"llama_4_scaling_beta", beta},
                          {"original_max_position_embeddings", 4}}}};
  auto m = BuildFull(cfg);
  ASSERT_NE(m, nullptr);
  WeightMap w = m->InitWeights(8, at::kDouble);
  SpreadNorms(w, hid);
  const at::Tensor ids = at::arange(2, 2 + s, at::kLong).view({1, s});
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
  auto scaled = [&](const at::Tensor& q) {
    const at::Tensor pos = at::arange(s, at::kDouble);
    return q * (1 + beta * at::log(1 + at::floor(pos / 4.0))).view({1, 1, s, 1});
  };
  EXPECT_LT(MaxAbs(got, OneLayerLlamaReference(w, ids, heads, d, theta, eps, false, scaled)),
            1e-10);
  auto none = [](const at::Tensor& q) { return q; };
  EXPECT_GT(MaxAbs(got, OneLayerLlamaReference(w, ids, heads, d, theta, eps, false, none)),
            1e-4);
  // transformers reads beta unconditionally: a config without it is refused, naming it.
  cfg["rope_parameters"].erase("llama_4_scaling_beta");
  auto bad = BuildModel(cfg, BuildOptions());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("rope_parameters.llama_4_scaling_beta"),
            std::string::npos);
}

// ---- olmoe: whole-projection q/k norms, clip_qkv after them, the softmax top-k router -------

// One OLMoE layer and the final norm, in double, as modular_olmoe.py (transformers 5) computes
// it: RMSNorm; q_norm(q_proj h) and k_norm(k_proj h) over the whole projection (OlmoeRMSNorm,
// LlamaRMSNorm), then q, k, v clamped to +-clip_qkv; rotate_half rotary; causal softmax(q k^T /
// sqrt(d)) v; o_proj; residual. RMSNorm; OlmoeTopKRouter (Qwen2MoeTopKRouter): softmax over the
// experts' logits, the top k kept unnormalised (norm_topk_prob false); MixtralExperts:
// gate, up = linear(h, gate_up_proj[e]).chunk(2), down_proj[e] @ (silu(gate) * up), weighted
// and summed; residual; final norm.
at::Tensor OneLayerOlmoeReference(const WeightMap& w, const at::Tensor& ids, int64_t heads,
                                  int64_t d, double theta, double eps, double clip, int64_t top_k) {
  const int64_t s = ids.size(1), hid = heads * d;
  const std::string l = "layers.0.";
  auto lin = [&](const at::Tensor& x, const std::string& n) {
    return at::linear(x, w.at(l + n + ".weight"));
  };
  at::Tensor x = w.at("embed_tokens.weight").index_select(0, ids.view(-1)).view({1, s, hid});
  at::Tensor h = RmsNorm(x, w.at(l + "input_layernorm.weight"), eps);
  at::Tensor q = RmsNorm(lin(h, "self_attn.q_proj"), w.at(l + "self_attn.q_norm.weight"), eps);
  at::Tensor k = RmsNorm(lin(h, "self_attn.k_proj"), w.at(l + "self_attn.k_norm.weight"), eps);
  at::Tensor v = lin(h, "self_attn.v_proj");
  q = q.clamp(-clip, clip);
  k = k.clamp(-clip, clip);
  v = v.clamp(-clip, clip);
  auto split = [&](const at::Tensor& t) { return t.view({1, s, heads, d}).transpose(1, 2); };
  q = split(q);
  k = split(k);
  v = split(v);
  at::Tensor inv = 1.0 / at::pow(theta, at::arange(0, d, 2, at::kDouble) / d);
  at::Tensor freqs = at::outer(at::arange(s, at::kDouble), inv);
  at::Tensor cos = at::cat({freqs, freqs}, -1).cos(), sin = at::cat({freqs, freqs}, -1).sin();
  auto rot = [&](const at::Tensor& t) {
    return at::cat({-t.narrow(-1, d / 2, d / 2), t.narrow(-1, 0, d / 2)}, -1);
  };
  q = q * cos + rot(q) * sin;
  k = k * cos + rot(k) * sin;
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
  scores = scores.masked_fill(at::ones({s, s}, at::kBool).triu(1), -INFINITY);
  at::Tensor a = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({1, s, hid});
  x = x + lin(a, "self_attn.o_proj");
  h = RmsNorm(x, w.at(l + "post_attention_layernorm.weight"), eps).view({s, hid});
  const at::Tensor probs = at::softmax(at::linear(h, w.at(l + "mlp.gate.weight")), -1);
  const auto [top, idx] = at::topk(probs, top_k, -1);
  const at::Tensor y = RoutedExperts(h, idx, top, w.at(l + "mlp.experts.gate_up_proj"),
                                     w.at(l + "mlp.experts.down_proj"));
  x = x + y.view({1, s, hid});
  return RmsNorm(x, w.at("norm.weight"), eps);
}

TEST(FidelityTest, OlmoeNormsClipsAndRoutesAsTransformers) {
  const int64_t hid = 8, heads = 2, d = 4, s = 7, experts = 4, top_k = 2;
  const double eps = 1e-6, theta = 100.0, clip = 0.8;
  const nlohmann::json cfg = {{"architectures", {"OlmoeModel"}},
                              {"model_type", "olmoe"},
                              {"hidden_size", hid},
                              {"intermediate_size", 6},
                              {"num_attention_heads", heads},
                              {"num_key_value_heads", heads},
                              {"num_hidden_layers", 1},
                              {"vocab_size", 32},
                              {"max_position_embeddings", 64},
                              {"rms_norm_eps", eps},
                              {"rope_theta", theta},
                              {"clip_qkv", clip},
                              {"num_experts", experts},
                              {"num_experts_per_tok", top_k}};
  auto m = BuildFull(cfg);
  ASSERT_NE(m, nullptr);
  WeightMap w = m->InitWeights(12, at::kDouble);
  EXPECT_EQ(w.at("layers.0.mlp.experts.gate_up_proj").sizes(), at::IntArrayRef({4, 12, 8}));
  EXPECT_EQ(w.at("layers.0.self_attn.q_norm.weight").sizes(), at::IntArrayRef({8}));
  SpreadNorms(w, hid);
  w["layers.0.self_attn.k_norm.weight"] = w["layers.0.self_attn.k_norm.weight"] * 3.0;
  const at::Tensor ids = at::arange(3, 3 + s, at::kLong).view({1, s});
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
  const at::Tensor want = OneLayerOlmoeReference(w, ids, heads, d, theta, eps, clip, top_k);
  EXPECT_LT(MaxAbs(got, want), 1e-10);
  // The clip bites after the norms (a clip before them would leave the normed keys unclamped).
  EXPECT_GT(MaxAbs(got, OneLayerOlmoeReference(w, ids, heads, d, theta, eps, 1e9, top_k)), 1e-6);
}

// ---- olmo3: a flat rope_scaling is the full layers' alone --------------------------------------

// Olmo3Config (transformers 5): `rope_parameters["full_attention"].update(rope_scaling)`; the
// sliding layers run default RoPE on rope_theta. So with every layer sliding, YaRN changes
// nothing; with every layer full, it does.
TEST(FidelityTest, Olmo3ScalesOnlyTheFullLayersRope) {
  auto run = [](const char* type, bool yarn) {
    nlohmann::json cfg = {{"architectures", {"Olmo3Model"}},
                          {"model_type", "olmo3"},
                          {"hidden_size", 16},
                          {"intermediate_size", 32},
                          {"num_attention_heads", 2},
                          {"num_key_value_heads", 2},
                          {"num_hidden_layers", 2},
                          {"vocab_size", 32},
                          {"max_position_embeddings", 64},
                          {"rope_theta", 100.0},
                          {"sliding_window", 4},
                          {"layer_types", {type, type}}};
    if (yarn) {
      cfg["rope_scaling"] = {
          {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 16}};
    }
    auto m = BuildFull(cfg);
    if (!m) return at::Tensor();
    const WeightMap w = m->InitWeights(3, at::kDouble);
    return m->Forward(w, {{"input_ids", at::arange(2, 14, at::kLong).view({1, 12})}})[0];
  };
  EXPECT_LT(MaxAbs(run("sliding_attention", true), run("sliding_attention", false)), 1e-12);
  EXPECT_GT(MaxAbs(run("full_attention", true), run("full_attention", false)), 1e-6);
}

// ---- roformer: the sinusoid table and the interleaved rotary -----------------------------------

// transformers' own test (test_modeling_roformer.py,
// RoFormerSinusoidalPositionalEmbeddingTest): RoFormerSinusoidalPositionalEmbedding(6, 6)'s row 1.
TEST(FidelityTest, SinusoidTableIsTransformersRoFormerTable) {
  const at::Tensor t = nn::SinusoidHalvesTable(6, 6);
  const at::Tensor want = at::tensor({0.8415, 0.0464, 0.0022, 0.5403, 0.9989, 1.0000});
  EXPECT_LT((t[1] - want).abs().max().item<double>(), 1e-4);
  EXPECT_EQ(t[0][0].item<double>(), 0.0);  // sin(0)
  EXPECT_EQ(t[0][5].item<double>(), 1.0);  // cos(0)
}

// One RoFormer layer in double, as modeling_roformer.py computes it: LN(word + token_type);
// q, k, v per head; apply_rotary_position_embeddings: sin, cos = table[:S].chunk(2), each stacked
// pairwise ([s0, s0, s1, s1, ...]), x * cos + stack([-x[..., 1::2], x[..., ::2]]) * sin on q and
// k; softmax(q k^T / sqrt(d)) v; LN(dense + x); LN(output(gelu(intermediate)) + y).
TEST(FidelityTest, RoFormerRotatesInterleavedPairsAsTransformers) {
  const int64_t hid = 8, heads = 2, d = 4, s = 7;
  const nlohmann::json cfg = {{"architectures", {"RoFormerModel"}}, {"model_type", "roformer"},
                              {"hidden_size", hid}, {"intermediate_size", 16},
                              {"num_attention_heads", heads}, {"num_hidden_layers", 1},
                              {"vocab_size", 32}, {"max_position_embeddings", 16},
                              {"type_vocab_size", 2}, {"layer_norm_eps", 1e-12}};
  auto m = BuildFull(cfg);
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(9, at::kDouble);
  EXPECT_EQ(w.count("embeddings.position_embeddings.weight"), 0u);
  const at::Tensor& table = w.at("encoder.embed_positions.weight");
  ASSERT_EQ(table.sizes(), at::IntArrayRef({16, d}));
  EXPECT_LT(MaxAbs(table, nn::SinusoidHalvesTable(16, d).to(at::kDouble)), 1e-12);
  const at::Tensor ids = at::arange(3, 3 + s, at::kLong).view({1, s});
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
  auto ln = [&](const at::Tensor& x, const std::string& p) {
    return at::layer_norm(x, {hid}, w.at(p + ".weight"), w.at(p + ".bias"), 1e-12);
  };
  auto lin = [&](const at::Tensor& x, const std::string& p) {
    return at::linear(x, w.at(p + ".weight"), w.at(p + ".bias"));
  };
  at::Tensor x = ln(w.at("embeddings.word_embeddings.weight").index_select(0, ids.view(-1)) +
                        w.at("embeddings.token_type_embeddings.weight")[0],
                    "embeddings.LayerNorm")
                     .view({1, s, hid});
  const std::string l = "encoder.layer.0.";
  auto split = [&](const at::Tensor& t) { return t.view({1, s, heads, d}).transpose(1, 2); };
  const auto sc = table.narrow(0, 0, s).chunk(2, -1);
  const at::Tensor sin_pos = at::stack({sc[0], sc[0]}, -1).reshape({s, d});
  const at::Tensor cos_pos = at::stack({sc[1], sc[1]}, -1).reshape({s, d});
  auto rotary = [&](const at::Tensor& t) {
    at::Tensor half = at::stack({-t.slice(-1, 1, d, 2), t.slice(-1, 0, d, 2)}, -1).reshape_as(t);
    return t * cos_pos + half * sin_pos;
  };
  at::Tensor q = rotary(split(lin(x, l + "attention.self.query")));
  at::Tensor k = rotary(split(lin(x, l + "attention.self.key")));
  at::Tensor v = split(lin(x, l + "attention.self.value"));
  at::Tensor a = at::matmul(at::softmax(at::matmul(q, k.transpose(-1, -2)) / std::sqrt(4.0), -1), v)
                     .transpose(1, 2)
                     .reshape({1, s, hid});
  at::Tensor y = ln(lin(a, l + "attention.output.dense") + x, l + "attention.output.LayerNorm");
  at::Tensor f = lin(at::gelu(lin(y, l + "intermediate.dense")), l + "output.dense");
  EXPECT_LT(MaxAbs(got, ln(f + y, l + "output.LayerNorm")), 1e-10);
}

// ---- mpnet: the shared relative position bias ---------------------------------------------------

// MPNetEncoder.relative_position_bucket(relative_position = key - query), its defaults
// num_buckets 32, max_distance 128: n = -rp; +16 when n < 0; |n| below 8 exact, else
// 8 + int(log(|n| / 8) / log(128 / 8) * 8), at most 15.
int64_t MpnetBucket(int64_t query, int64_t key) {
  const int64_t n = query - key;
  int64_t ret = n < 0 ? 16 : 0;
  const int64_t a = std::abs(n);
  if (a < 8) return ret + a;
  const int64_t large = 8 + static_cast<int64_t>(std::log(a / 8.0) / std::log(16.0) * 8.0);
  return ret + std::min<int64_t>(large, 15);
}

// One MPNet layer in double, as modeling_mpnet.py computes it: LN(word + position) with positions
// pad + cumsum(ids != pad); q / k / v / o under attention.attn; scores q k^T / sqrt(d) +
// relative_attention_bias[bucket(key - query)] per head; LN(o + x) (attention.LayerNorm);
// LN(output(gelu(intermediate)) + y).
TEST(FidelityTest, MpnetAddsTheSharedRelativeBiasAsTransformers) {
  const int64_t hid = 8, heads = 2, d = 4, s = 20;  // distances past 8: log buckets too
  const nlohmann::json cfg = {{"architectures", {"MPNetModel"}}, {"model_type", "mpnet"},
                              {"hidden_size", hid}, {"intermediate_size", 16},
                              {"num_attention_heads", heads}, {"num_hidden_layers", 1},
                              {"vocab_size", 40}, {"max_position_embeddings", 30},
                              {"layer_norm_eps", 1e-5}, {"pad_token_id", 1}};
  auto m = BuildFull(cfg);
  ASSERT_NE(m, nullptr);
  WeightMap w = m->InitWeights(4, at::kDouble);
  ASSERT_EQ(w.at("encoder.relative_attention_bias.weight").sizes(), at::IntArrayRef({32, heads}));
  EXPECT_EQ(w.count("embeddings.token_type_embeddings.weight"), 0u);
  w["encoder.relative_attention_bias.weight"] = w["encoder.relative_attention_bias.weight"] * 3.0;
  const at::Tensor ids = at::arange(3, 3 + s, at::kLong).view({1, s});
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
  auto ln = [&](const at::Tensor& x, const std::string& p) {
    return at::layer_norm(x, {hid}, w.at(p + ".weight"), w.at(p + ".bias"), 1e-5);
  };
  auto lin = [&](const at::Tensor& x, const std::string& p) {
    return at::linear(x, w.at(p + ".weight"), w.at(p + ".bias"));
  };
  const at::Tensor pos = at::arange(2, 2 + s, at::kLong);  // no pads: 2, 3, ...
  at::Tensor x = ln(w.at("embeddings.word_embeddings.weight").index_select(0, ids.view(-1)) +
                        w.at("embeddings.position_embeddings.weight").index_select(0, pos),
                    "embeddings.LayerNorm")
                     .view({1, s, hid});
  at::Tensor bias = at::zeros({1, heads, s, s}, at::kDouble);
  const at::Tensor& table = w.at("encoder.relative_attention_bias.weight");
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < s; ++j)
      for (int64_t h = 0; h < heads; ++h) bias[0][h][i][j] = table[MpnetBucket(i, j)][h];
  const std::string l = "encoder.layer.0.";
  auto split = [&](const at::Tensor& t) { return t.view({1, s, heads, d}).transpose(1, 2); };
  at::Tensor q = split(lin(x, l + "attention.attn.q")), k = split(lin(x, l + "attention.attn.k"));
  at::Tensor v = split(lin(x, l + "attention.attn.v"));
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(4.0) + bias;
  at::Tensor a = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({1, s, hid});
  at::Tensor y = ln(lin(a, l + "attention.attn.o") + x, l + "attention.LayerNorm");
  at::Tensor f = lin(at::gelu(lin(y, l + "intermediate.dense")), l + "output.dense");
  EXPECT_LT(MaxAbs(got, ln(f + y, l + "output.LayerNorm")), 1e-10);
  EXPECT_EQ(MpnetBucket(0, 19), 16 + 10);  // key 19 right of the query: 16-22 -> bucket 10
  EXPECT_EQ(MpnetBucket(19, 0), 10);
}

// ---- deepseek: multi-head latent attention and the DeepSeek routers -----------------------------

// One DeepSeek layer (a MoE layer: first_k_dense_replace 0) and the final norm, in double, as
// modeling_deepseek_v3.py / modeling_deepseek_v2.py compute it. Attention (DeepseekV3Attention):
// q = q_b(RMSNorm(q_a(h))) (v2 here: q_proj(h)), per head [nope | rope]; kv_a_proj_with_mqa(h) =
// [latent | k_rope]; kv_b(RMSNorm(latent)) per head [k_nope | v]; apply_rotary_pos_emb_interleave
// (view(..., d/2, 2).transpose(4, 3).reshape, then x * cos + rotate_half(x) * sin) on q_rope and
// the shared k_rope; softmax([q_nope | q_rope] . [k_nope | k_rope] * (nope + rope)^-0.5) v; o_proj.
// MoE: v3 route_tokens_to_experts (sigmoid, + e_score_correction_bias for the choice, groups by
// their top-2 sum, topk_group kept, top-k, weights the unbiased sigmoid renormalised + 1e-20,
// * routed_scaling_factor); v2 DeepseekV2Moe (softmax, greedy top-k, * routed_scaling_factor);
// experts gate_up.chunk(2) / silu / down; plus the shared experts' gated MLP.
at::Tensor OneLayerDeepseekReference(const WeightMap& w, const at::Tensor& ids, bool v3,
                                     int64_t heads, int64_t nope, int64_t rope, int64_t vd,
                                     int64_t kv_lora, double theta, double eps, int64_t top_k,
                                     double scaling) {
  const int64_t s = ids.size(1), hid = w.at("embed_tokens.weight").size(1);
  const std::string l = "layers.0.", a = l + "self_attn.", m = l + "mlp.";
  auto lin = [&](const at::Tensor& x, const std::string& n) { return at::linear(x, w.at(n)); };
  at::Tensor x = w.at("embed_tokens.weight").index_select(0, ids.view(-1)).view({1, s, hid});
  at::Tensor h = RmsNorm(x, w.at(l + "input_layernorm.weight"), eps);
  at::Tensor q = v3 ? lin(RmsNorm(lin(h, a + "q_a_proj.weight"), w.at(a + "q_a_layernorm.weight"),
                                  eps),
                          a + "q_b_proj.weight")
                    : lin(h, a + "q_proj.weight");
  q = q.view({1, s, heads, nope + rope}).transpose(1, 2);
  at::Tensor ckv = lin(h, a + "kv_a_proj_with_mqa.weight");
  at::Tensor kv = lin(RmsNorm(ckv.narrow(-1, 0, kv_lora), w.at(a + "kv_a_layernorm.weight"), eps),
                      a + "kv_b_proj.weight")
                      .view({1, s, heads, nope + vd})
                      .transpose(1, 2);
  at::Tensor inv = 1.0 / at::pow(theta, at::arange(0, rope, 2, at::kDouble) / rope);
  at::Tensor freqs = at::outer(at::arange(s, at::kDouble), inv);
  at::Tensor cos = at::cat({freqs, freqs}, -1).cos(), sin = at::cat({freqs, freqs}, -1).sin();
  auto rotary = [&](at::Tensor t) {
    const auto sz = t.sizes().vec();
    t = t.reshape({sz[0], sz[1], sz[2], rope / 2, 2}).transpose(4, 3).reshape(sz);
    at::Tensor half = at::cat({-t.narrow(-1, rope / 2, rope / 2), t.narrow(-1, 0, rope / 2)}, -1);
    return t * cos + half * sin;
  };
  at::Tensor q_rot = rotary(q.narrow(-1, nope, rope));
  at::Tensor k_rot = rotary(ckv.narrow(-1, kv_lora, rope).view({1, 1, s, rope}));
  at::Tensor qs = at::cat({q.narrow(-1, 0, nope), q_rot}, -1);
  at::Tensor ks = at::cat({kv.narrow(-1, 0, nope), k_rot.expand({1, heads, s, rope})}, -1);
  at::Tensor scores = at::matmul(qs, ks.transpose(-1, -2)) / std::sqrt(double(nope + rope));
  scores = scores.masked_fill(at::ones({s, s}, at::kBool).triu(1), -INFINITY);
  at::Tensor att = at::matmul(at::softmax(scores, -1), kv.narrow(-1, nope, vd));
  x = x + lin(att.transpose(1, 2).reshape({1, s, heads * vd}), a + "o_proj.weight");
  h = RmsNorm(x, w.at(l + "post_attention_layernorm.weight"), eps).view({s, hid});
  const at::Tensor logits = at::linear(h, w.at(m + "gate.weight"));
  const int64_t e = logits.size(1);
  at::Tensor idx, wt;
  if (v3) {
    const at::Tensor sc = at::sigmoid(logits);
    const at::Tensor b = sc + w.at(m + "gate.e_score_correction_bias");
    const at::Tensor gs = std::get<0>(b.view({s, 2, e / 2}).topk(2, -1)).sum(-1);  // 2 groups
    const at::Tensor g = std::get<1>(gs.topk(1, -1));                              // keep 1
    at::Tensor keep = at::zeros({s, 2}, at::kDouble).scatter(1, g, 1.0);
    keep = keep.unsqueeze(-1).expand({s, 2, e / 2}).reshape({s, e});
    idx = std::get<1>(b.masked_fill(keep.eq(0), -INFINITY).topk(top_k, -1));
    wt = sc.gather(1, idx);
    wt = wt / (wt.sum(-1, true) + 1e-20);
  } else {
    std::tie(wt, idx) = at::softmax(logits, -1).topk(top_k, -1);
  }
  wt = wt * scaling;
  at::Tensor y = RoutedExperts(h, idx, wt, w.at(m + "experts.gate_up_proj"),
                               w.at(m + "experts.down_proj"));
  y = y + lin(at::silu(lin(h, m + "shared_experts.gate_proj.weight")) *
                  lin(h, m + "shared_experts.up_proj.weight"),
              m + "shared_experts.down_proj.weight");
  return RmsNorm(x + y.view({1, s, hid}), w.at("norm.weight"), eps);
}

TEST(FidelityTest, DeepseekLatentAttentionAndRoutersAsTransformers) {
  for (bool v3 : {true, false}) {
    SCOPED_TRACE(v3 ? "deepseek_v3" : "deepseek_v2");
    const int64_t hid = 8, heads = 2, nope = 4, rope = 4, vd = 6, kv_lora = 6, s = 9;
    const double theta = 100.0, eps = 1e-6, scaling = v3 ? 2.5 : 1.5;
    nlohmann::json cfg = {{"architectures", {v3 ? "DeepseekV3Model" : "DeepseekV2Model"}},
                          {"model_type", v3 ? "deepseek_v3" : "deepseek_v2"},
                          {"hidden_size", hid}, {"intermediate_size", 12},
                          {"moe_intermediate_size", 6}, {"num_attention_heads", heads},
                          {"num_key_value_heads", heads}, {"num_hidden_layers", 1},
                          {"vocab_size", 32}, {"max_position_embeddings", 64},
                          {"rms_norm_eps", eps}, {"rope_theta", theta},
                          {"q_lora_rank", v3 ? nlohmann::json(6) : nlohmann::json(nullptr)},
                          {"kv_lora_rank", kv_lora}, {"qk_nope_head_dim", nope},
                          {"qk_rope_head_dim", rope}, {"v_head_dim", vd},
                          {"n_routed_experts", 4}, {"num_experts_per_tok", 2},
                          {"n_shared_experts", 1}, {"n_group", 2}, {"topk_group", 1},
                          {"routed_scaling_factor", scaling}, {"first_k_dense_replace", 0}};
    auto m = BuildFull(cfg);
    ASSERT_NE(m, nullptr);
    WeightMap w = m->InitWeights(21, at::kDouble);
    EXPECT_EQ(w.count("layers.0.mlp.gate.e_score_correction_bias"), v3 ? 1u : 0u);
    EXPECT_EQ(w.count("layers.0.self_attn.q_proj.weight"), v3 ? 0u : 1u);
    EXPECT_EQ(w.at("layers.0.self_attn.kv_b_proj.weight").sizes(),
              at::IntArrayRef({heads * (nope + vd), kv_lora}));
    for (auto& [k, t] : w)
      if (k.find("norm") != std::string::npos) t = t + 0.05 * at::randn_like(t);
    if (v3) w["layers.0.mlp.gate.e_score_correction_bias"] = at::tensor({0.3, -0.2, 0.1, 0.4},
                                                                       at::kDouble);
    const at::Tensor ids = at::arange(3, 3 + s, at::kLong).view({1, s});
    const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
    const at::Tensor want = OneLayerDeepseekReference(w, ids, v3, heads, nope, rope, vd, kv_lora,
                                                      theta, eps, 2, scaling);
    EXPECT_LT(MaxAbs(got, want), 1e-10);
  }
}

// ---- openai-gpt: the post-LN block ------------------------------------------------------------

// One OpenAIGPTModel layer in double, as modeling_openai.py computes it: tokens_embed +
// positions_embed at arange(S); Attention: c_attn (Conv1D: x @ W + b) split into q | k | v,
// softmax(q k^T / sqrt(d)) with the causal mask, merge, c_proj; Block: n = ln_1(x + a),
// h = ln_2(n + c_proj(gelu_new(c_fc(n)))); no final norm.
TEST(FidelityTest, OpenAiGptPostLnBlockAsTransformers) {
  const int64_t hid = 8, heads = 2, d = 4, s = 6;
  const nlohmann::json cfg = {{"architectures", {"OpenAIGPTModel"}}, {"model_type", "openai-gpt"},
                              {"n_embd", hid}, {"n_head", heads}, {"n_layer", 1},
                              {"n_positions", 16}, {"vocab_size", 32}, {"afn", "gelu"},
                              {"layer_norm_epsilon", 1e-5}};
  auto m = BuildFull(cfg);
  ASSERT_NE(m, nullptr);
  WeightMap w = m->InitWeights(7, at::kDouble);
  EXPECT_EQ(w.count("ln_f.weight"), 0u);
  EXPECT_EQ(w.at("h.0.attn.c_attn.weight").sizes(), at::IntArrayRef({hid, 3 * hid}));
  for (auto& [k, t] : w)
    if (k.find("ln_") != std::string::npos) t = t + 0.1 * at::arange(hid, at::kDouble);
  const at::Tensor ids = at::arange(3, 3 + s, at::kLong).view({1, s});
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
  auto conv1d = [&](const at::Tensor& x, const std::string& p) {
    return at::matmul(x, w.at(p + ".weight")) + w.at(p + ".bias");
  };
  auto ln = [&](const at::Tensor& x, const std::string& p) {
    return at::layer_norm(x, {hid}, w.at(p + ".weight"), w.at(p + ".bias"), 1e-5);
  };
  at::Tensor x = (w.at("tokens_embed.weight").index_select(0, ids.view(-1)) +
                  w.at("positions_embed.weight").narrow(0, 0, s))
                     .view({1, s, hid});
  const auto qkv = conv1d(x, "h.0.attn.c_attn").split(hid, -1);
  auto split = [&](const at::Tensor& t) { return t.view({1, s, heads, d}).transpose(1, 2); };
  at::Tensor scores = at::matmul(split(qkv[0]), split(qkv[1]).transpose(-1, -2)) / 2.0;
  scores = scores.masked_fill(at::ones({s, s}, at::kBool).triu(1), -INFINITY);
  at::Tensor a = at::matmul(at::softmax(scores, -1), split(qkv[2])).transpose(1, 2).reshape(
      {1, s, hid});
  at::Tensor n = ln(x + conv1d(a, "h.0.attn.c_proj"), "h.0.ln_1");
  at::Tensor mlp =
      conv1d(at::gelu(conv1d(n, "h.0.mlp.c_fc"), "tanh"), "h.0.mlp.c_proj");
  EXPECT_LT(MaxAbs(got, ln(n + mlp, "h.0.ln_2")), 1e-10);
}

// ---- a non-object rope_scaling ----------------------------------------------------------------

// Every class whose transformers model reads rope_scaling (RotaryEmbeddingConfigMixin: a dict or
// None) refuses a non-object one, naming the field; a class that does not read it (GPT-J) loads.
TEST(FidelityTest, NonObjectRopeScalingIsAnErrorNamingTheField) {
  for (const char* arch :
       {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Phi3ForCausalLM",
        "Gemma3ForCausalLM", "GemmaForCausalLM", "Qwen3ForCausalLM", "GPTNeoXForCausalLM",
        "StableLmForCausalLM", "HeliumForCausalLM", "Exaone4ForCausalLM", "GraniteForCausalLM",
        "CohereForCausalLM", "PersimmonForCausalLM", "MixtralForCausalLM"}) {
    for (const nlohmann::json& bad : {nlohmann::json("linear"), nlohmann::json(8),
                                      nlohmann::json::array({1, 2})}) {
      for (const char* field : {"rope_scaling", "rope_parameters"}) {
        SCOPED_TRACE(std::string(arch) + " " + field + " " + bad.dump());
        testing::ExpectConfigError(arch, field, bad, std::string(field) + ":");
      }
    }
  }
  auto gptj = *ExampleConfig("GPTJForCausalLM");
  gptj["rope_scaling"] = "gptj";
  BuildOptions o;
  o.arch = "GPTJForCausalLM";
  EXPECT_TRUE(BuildModel(gptj, o).ok());
}

}  // namespace
}  // namespace ts::zoo
