// bitnet, diffllama, apertus, gpt_oss, ctrl, the Qwen / GLM VL text models and WhisperForCausalLM
// against references in double written from the transformers sources each test names (not from the
// zoo's trunks).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::InvFreq;
using testing::Rms;
using testing::Rope;

struct Shape {
  int64_t layers = 1, heads = 2, kv = 2, d = 4;
  double eps = 1e-5, theta = 100.0;
  std::string ln1 = "input_layernorm", ln2 = "post_attention_layernorm";
  bool qk_norm = false;  // per-head q_norm / k_norm before the rotary
  at::Tensor inv = {};   // the rotary's inverse frequencies (undefined: InvFreq(theta, d))
};

// The attention output of layer `i` before o_proj ([1, S, heads * d]) from the causal softmax
// probabilities [1, H, S, S] and the values [1, kv, S, d].
using Combine = std::function<at::Tensor(int64_t i, const at::Tensor& probs, const at::Tensor& v)>;
using Mlp = std::function<at::Tensor(int64_t i, const at::Tensor& h)>;

// LlamaModel over `ids` (one row): pre-norm layers, rotary q / k, causal softmax.
at::Tensor Llama(const WeightMap& w, const at::Tensor& ids, const Shape& p, const Combine& combine,
                 const Mlp& mlp) {
  const int64_t s = ids.size(1);
  at::Tensor x = at::embedding(w.at("embed_tokens.weight"), ids);
  for (int64_t i = 0; i < p.layers; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    at::Tensor h = Rms(x, w.at(l + p.ln1 + ".weight"), p.eps);
    auto proj = [&](const char* n, int64_t heads) {
      return at::linear(h, w.at(l + "self_attn." + n + ".weight"))
          .view({1, s, heads, p.d})
          .transpose(1, 2);
    };
    at::Tensor q = proj("q_proj", p.heads), k = proj("k_proj", p.kv);
    if (p.qk_norm) {
      q = Rms(q, w.at(l + "self_attn.q_norm.weight"), p.eps);
      k = Rms(k, w.at(l + "self_attn.k_norm.weight"), p.eps);
    }
    const at::Tensor inv = p.inv.defined() ? p.inv : InvFreq(p.theta, p.d);
    q = Rope(q, inv);
    k = Rope(k, inv).repeat_interleave(p.heads / p.kv, 1);
    at::Tensor v = proj("v_proj", p.kv);
    at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(p.d));
    at::Tensor causal = at::ones({s, s}, at::kBool).triu(1);
    scores = scores.masked_fill(causal, -std::numeric_limits<double>::infinity());
    x = x + at::linear(combine(i, at::softmax(scores, -1), v), w.at(l + "self_attn.o_proj.weight"));
    x = x + mlp(i, Rms(x, w.at(l + p.ln2 + ".weight"), p.eps));
  }
  return Rms(x, w.at("norm.weight"), p.eps);
}

json Config(const char* model_type, const char* arch, const Shape& p) {
  return {{"architectures", {arch}},
          {"model_type", model_type},
          {"hidden_size", 8},
          {"intermediate_size", 12},
          {"num_attention_heads", p.heads},
          {"num_key_value_heads", p.kv},
          {"num_hidden_layers", p.layers},
          {"vocab_size", 32},
          {"max_position_embeddings", 64},
          {"rms_norm_eps", p.eps},
          {"rope_theta", p.theta}};
}

// modular_bitnet.py: BitNetAttention's attn_sub_norm on the attention output before o_proj,
// BitNetMLP's ffn_sub_norm on relu2(gate) * up before down_proj (GemmaMLP, no bias).
TEST(LlamaVariantsTest, BitNetNormsTheAttentionOutputAndTheGatedProduct) {
  const Shape p{.layers = 1, .heads = 2, .kv = 1, .d = 4};
  auto m = testing::BuildFull(Config("bitnet", "BitNetModel", p));
  ASSERT_TRUE(m);
  EXPECT_EQ(testing::WeightShape(*m, "layers.0.self_attn.attn_sub_norm.weight"),
            (std::vector<int64_t>{8}));
  EXPECT_EQ(testing::WeightShape(*m, "layers.0.mlp.ffn_sub_norm.weight"),
            (std::vector<int64_t>{12}));
  WeightMap w = m->InitWeights(3, at::kDouble);
  // Sub-norm weights away from 1, so that a norm left out or misplaced shows.
  w["layers.0.self_attn.attn_sub_norm.weight"] = at::linspace(0.5, 2.0, 8, at::kDouble);
  w["layers.0.mlp.ffn_sub_norm.weight"] = at::linspace(2.0, 0.25, 12, at::kDouble);
  const at::Tensor ids = at::arange(3, 10, at::kLong).view({1, 7});
  auto combine = [&](int64_t, const at::Tensor& probs, const at::Tensor& v) {
    at::Tensor a = at::matmul(probs, v.repeat_interleave(2, 1)).transpose(1, 2).reshape({1, 7, 8});
    return Rms(a, w.at("layers.0.self_attn.attn_sub_norm.weight"), p.eps);
  };
  auto mlp = [&](int64_t, const at::Tensor& h) {
    const std::string l = "layers.0.mlp.";
    at::Tensor g = at::relu(at::linear(h, w.at(l + "gate_proj.weight")));
    at::Tensor prod = g * g * at::linear(h, w.at(l + "up_proj.weight"));
    return at::linear(Rms(prod, w.at(l + "ffn_sub_norm.weight"), p.eps),
                      w.at(l + "down_proj.weight"));
  };
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
  EXPECT_LT(testing::MaxAbs(got, Llama(w, ids, p, combine, mlp)), 1e-10);
  // BitNetConfig's num_key_value_heads defaults to 5, not to the heads.
  json five = Config("bitnet", "BitNetModel", Shape{.heads = 10, .kv = 1, .d = 4});
  five["hidden_size"] = 40;
  five.erase("num_key_value_heads");
  auto m5 = testing::BuildFull(five);
  ASSERT_TRUE(m5);
  EXPECT_EQ(testing::WeightShape(*m5, "layers.0.self_attn.k_proj.weight"),
            (std::vector<int64_t>{20, 40}));
}

// modular_diffllama.py DiffLlamaAttention: values of head pairs side by side, repeated; the two
// halves of the heads combined as a1 - lambda * a2, lambda = exp(sum(q1 * k1)) -
// exp(sum(q2 * k2)) + lambda_init, lambda_init = 0.8 - 0.6 * exp(-0.3 * layer_idx); a weight-free
// RMSNorm over 2 * head_dim, times 1 - lambda_init. Two layers, so that lambda_init differs.
TEST(LlamaVariantsTest, DiffLlamaCombinesHeadHalvesWithPerLayerLambda) {
  const Shape p{.layers = 2, .heads = 4, .kv = 2, .d = 2};
  auto m = testing::BuildFull(Config("diffllama", "DiffLlamaModel", p));
  ASSERT_TRUE(m);
  EXPECT_EQ(testing::WeightShape(*m, "layers.1.self_attn.lambda_k2.weight").size(), 0u);
  EXPECT_EQ(testing::WeightShape(*m, "layers.1.self_attn.lambda_k2"), (std::vector<int64_t>{2}));
  WeightMap w = m->InitWeights(4, at::kDouble);
  for (const char* n : {"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"}) {
    for (int i = 0; i < 2; ++i) {  // away from 0, so that lambda moves off lambda_init
      w["layers." + std::to_string(i) + ".self_attn." + n] =
          at::linspace(-0.6 + 0.3 * i, 0.9, 2, at::kDouble);
    }
  }
  const at::Tensor ids = at::arange(5, 11, at::kLong).view({1, 6});
  auto combine = [&](int64_t i, const at::Tensor& probs, const at::Tensor& v) {
    const std::string l = "layers." + std::to_string(i) + ".self_attn.";
    const double init = 0.8 - 0.6 * std::exp(-0.3 * static_cast<double>(i));
    at::Tensor vr = v.repeat_interleave(p.heads / p.kv, 1);  // [1, 4, S, 2]
    auto pairs = vr.chunk(2, 1);
    at::Tensor vv = at::cat({pairs[0], pairs[1]}, -1).repeat({1, 2, 1, 1});  // [1, 4, S, 4]
    auto halves = at::matmul(probs, vv).chunk(2, 1);
    at::Tensor lambda = at::exp((w.at(l + "lambda_q1") * w.at(l + "lambda_k1")).sum()) -
                        at::exp((w.at(l + "lambda_q2") * w.at(l + "lambda_k2")).sum()) + init;
    at::Tensor o = halves[0] - lambda * halves[1];  // [1, 2, S, 4]
    o = o * at::rsqrt(o.pow(2).mean(-1, true) + p.eps) * (1.0 - init);
    return o.transpose(1, 2).reshape({1, 6, 8});
  };
  auto mlp = [&](int64_t i, const at::Tensor& h) {
    const std::string l = "layers." + std::to_string(i) + ".mlp.";
    return at::linear(at::silu(at::linear(h, w.at(l + "gate_proj.weight"))) *
                          at::linear(h, w.at(l + "up_proj.weight")),
                      w.at(l + "down_proj.weight"));
  };
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
  EXPECT_LT(testing::MaxAbs(got, Llama(w, ids, p, combine, mlp)), 1e-10);
  // An odd head count cannot pair its heads.
  json odd = Config("diffllama", "DiffLlamaModel", Shape{.heads = 1, .kv = 1, .d = 8});
  BuildOptions o;
  o.tiny = false;
  auto r = BuildModel(odd, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("num_attention_heads"), std::string::npos);
}

// modular_apertus.py: ApertusAttention's q_norm / k_norm before the rotary, the norms renamed
// attention_layernorm / feedforward_layernorm, NemotronMLP down(xielu(up x)) with
// activations.py XIELUActivation._xielu_python (learnable alpha_p / alpha_n, buffers beta 0.5 and
// eps -1e-6, which the state_dict holds); without rope fields, ApertusConfig's llama3 rotary.
TEST(LlamaVariantsTest, ApertusXieluMlpQkNormAndLlama3Default) {
  Shape p{.layers = 1, .heads = 2, .kv = 1, .d = 4};
  p.ln1 = "attention_layernorm";
  p.ln2 = "feedforward_layernorm";
  p.qk_norm = true;
  json cfg = Config("apertus", "ApertusModel", p);
  cfg["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 100.0}};
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  EXPECT_EQ(testing::WeightShape(*m, "layers.0.mlp.act_fn.alpha_p"), (std::vector<int64_t>{1}));
  EXPECT_FALSE(testing::HasWeight(*m, "layers.0.mlp.gate_proj.weight"));
  WeightMap w = m->InitWeights(9, at::kDouble);
  w["layers.0.mlp.act_fn.alpha_p"] = at::full({1}, 0.7, at::kDouble);
  w["layers.0.mlp.act_fn.alpha_n"] = at::full({1}, -1.2, at::kDouble);
  for (const char* n : {"layers.0.self_attn.q_norm.weight", "layers.0.self_attn.k_norm.weight"}) {
    w[n] = at::linspace(0.5, 2.0, 4, at::kDouble);
  }
  auto combine = [&](int64_t, const at::Tensor& probs, const at::Tensor& v) {
    return at::matmul(probs, v.repeat_interleave(2, 1)).transpose(1, 2).reshape({1, 7, 8});
  };
  auto mlp = [&](int64_t, const at::Tensor& h) {
    const std::string l = "layers.0.mlp.";
    at::Tensor x = at::linear(h, w.at(l + "up_proj.weight"));
    at::Tensor ap = at::softplus(w.at(l + "act_fn.alpha_p"));
    at::Tensor an = 0.5 + at::softplus(w.at(l + "act_fn.alpha_n"));
    at::Tensor y = at::where(
        x > 0, ap * x * x + 0.5 * x,
        (at::expm1(at::minimum(x, at::scalar_tensor(-1e-6, at::kDouble))) - x) * an + 0.5 * x);
    return at::linear(y, w.at(l + "down_proj.weight"));
  };
  const at::Tensor ids = at::arange(3, 10, at::kLong).view({1, 7});
  EXPECT_LT(testing::MaxAbs(m->Forward(w, {{"input_ids", ids}})[0], Llama(w, ids, p, combine, mlp)),
            1e-10);
  // The state_dict's constant buffers.
  const TensorMap sd = StateDict(*m, w, 1);
  ASSERT_TRUE(sd.count("layers.0.mlp.act_fn.beta"));
  EXPECT_EQ(sd.at("layers.0.mlp.act_fn.beta").dim(), 0);
  EXPECT_DOUBLE_EQ(sd.at("layers.0.mlp.act_fn.beta").item<double>(), 0.5);
  EXPECT_FLOAT_EQ(sd.at("layers.0.mlp.act_fn.eps").item<float>(), -1e-6f);
  // No rope fields: llama3 at theta 12e6, factor 8 over original 8192 (low 1, high 4): with
  // head_dim 4 the second frequency's wavelength (2 pi sqrt(12e6)) passes 8192 and is divided
  // by 8; the first's (2 pi) is under 2048 and stays.
  cfg.erase("rope_parameters");
  cfg.erase("rope_theta");
  auto d = testing::BuildFull(cfg);
  ASSERT_TRUE(d);
  Shape l3 = p;
  l3.inv = InvFreq(12000000.0, 4);
  l3.inv[1] = l3.inv[1] / 8.0;
  EXPECT_LT(
      testing::MaxAbs(d->Forward(w, {{"input_ids", ids}})[0], Llama(w, ids, l3, combine, mlp)),
      1e-10);
  // xielu with a gated MLP is refused naming the field.
  json gated = Config("bitnet", "BitNetModel", Shape{});
  gated["hidden_act"] = "xielu";
  BuildOptions o;
  o.tiny = false;
  auto r = BuildModel(gated, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hidden_act"), std::string::npos);
}

// modular_gpt_oss.py: GptOssAttention (biased q / k / v / o, eager_attention_forward's sink
// column: logits minus their max, softmax, the sink dropped), the sliding layer's window
// (query i sees keys i - W < j <= i), GptOssTopKRouter (top-k logits, softmax over them) and
// GptOssExperts (gate_up [E, H, 2I] + bias, gate = even columns clamped at the limit, up = odd
// columns clamped to +-limit, (up + 1) * gate * sigmoid(1.702 gate), down + bias). Two layers:
// sliding, then full.
TEST(LlamaVariantsTest, GptOssSinksWindowsAndClampedExperts) {
  const int64_t heads = 2, kv = 1, d = 4, hidden = 8, inter = 12, experts = 4, top_k = 2, win = 3;
  const double eps = 1e-5, theta = 100.0, limit = 0.5;
  json cfg = Config("gpt_oss", "GptOssModel", Shape{.layers = 2, .heads = heads, .kv = kv, .d = d});
  cfg["head_dim"] = d;
  cfg["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", theta}};
  cfg["layer_types"] = {"sliding_attention", "full_attention"};
  cfg["sliding_window"] = win;
  cfg["num_local_experts"] = experts;
  cfg["num_experts_per_tok"] = top_k;
  cfg["swiglu_limit"] = limit;  // small, so that the clamps bite
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  EXPECT_EQ(testing::WeightShape(*m, "layers.0.mlp.experts.gate_up_proj"),
            (std::vector<int64_t>{experts, hidden, 2 * inter}));
  EXPECT_EQ(testing::WeightShape(*m, "layers.0.mlp.experts.down_proj"),
            (std::vector<int64_t>{experts, inter, hidden}));
  EXPECT_EQ(testing::WeightShape(*m, "layers.1.self_attn.sinks"), (std::vector<int64_t>{heads}));
  EXPECT_EQ(testing::WeightShape(*m, "layers.0.mlp.router.bias"), (std::vector<int64_t>{experts}));
  WeightMap w = m->InitWeights(11, at::kDouble);
  for (int i = 0; i < 2; ++i) {  // sinks large enough to take a visible share
    w["layers." + std::to_string(i) + ".self_attn.sinks"] =
        at::linspace(-1.0 + i, 2.0, heads, at::kDouble);
  }
  const int64_t s = 7;
  const at::Tensor ids = at::arange(3, 3 + s, at::kLong).view({1, s});
  at::Tensor x = at::embedding(w.at("embed_tokens.weight"), ids);
  const at::Tensor inv = InvFreq(theta, d);
  for (int64_t i = 0; i < 2; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    at::Tensor h = Rms(x, w.at(l + "input_layernorm.weight"), eps);
    auto proj = [&](const char* n, int64_t nh) {
      const std::string p = l + "self_attn." + n;
      return at::linear(h, w.at(p + ".weight"), w.at(p + ".bias"))
          .view({1, s, nh, d})
          .transpose(1, 2);
    };
    at::Tensor q = Rope(proj("q_proj", heads), inv);
    at::Tensor k = Rope(proj("k_proj", kv), inv).repeat_interleave(heads / kv, 1);
    at::Tensor v = proj("v_proj", kv).repeat_interleave(heads / kv, 1);
    at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / 2.0;  // 1 / sqrt(4)
    at::Tensor qi = at::arange(s, at::kLong).view({s, 1}),
               kj = at::arange(s, at::kLong).view({1, s});
    at::Tensor blocked = kj > qi;
    if (i == 0) blocked = blocked | (qi - kj >= win);
    scores = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
    at::Tensor sink = w.at(l + "self_attn.sinks").view({1, heads, 1, 1}).expand({1, heads, s, 1});
    at::Tensor logits = at::cat({scores, sink}, -1);
    logits = logits - std::get<0>(logits.max(-1, true));
    at::Tensor probs = at::softmax(logits, -1).narrow(-1, 0, s);
    at::Tensor a = at::matmul(probs, v).transpose(1, 2).reshape({1, s, heads * d});
    x = x + at::linear(a, w.at(l + "self_attn.o_proj.weight"), w.at(l + "self_attn.o_proj.bias"));
    h = Rms(x, w.at(l + "post_attention_layernorm.weight"), eps).reshape({s, hidden});
    const std::string e = l + "mlp.";
    at::Tensor rl = at::linear(h, w.at(e + "router.weight"), w.at(e + "router.bias"));
    auto [tv, ti] = at::topk(rl, top_k, -1);
    at::Tensor rw = at::softmax(tv, -1);
    at::Tensor y = at::zeros_like(h);
    for (int64_t t = 0; t < s; ++t) {
      for (int64_t j = 0; j < top_k; ++j) {
        const int64_t ex = ti[t][j].item<int64_t>();
        at::Tensor gu = at::matmul(h[t], w.at(e + "experts.gate_up_proj")[ex]) +
                        w.at(e + "experts.gate_up_proj_bias")[ex];
        std::vector<at::Tensor> gate_v, up_v;
        for (int64_t c = 0; c < inter; ++c) {
          gate_v.push_back(gu[2 * c]);
          up_v.push_back(gu[2 * c + 1]);
        }
        at::Tensor gate = at::stack(gate_v).clamp_max(limit);
        at::Tensor up = at::stack(up_v).clamp(-limit, limit);
        at::Tensor out = at::matmul((up + 1) * gate * at::sigmoid(gate * 1.702),
                                    w.at(e + "experts.down_proj")[ex]) +
                         w.at(e + "experts.down_proj_bias")[ex];
        y[t] += rw[t][j] * out;
      }
    }
    x = x + y.view({1, s, hidden});
  }
  const at::Tensor want = Rms(x, w.at("norm.weight"), eps);
  EXPECT_LT(testing::MaxAbs(m->Forward(w, {{"input_ids", ids}})[0], want), 1e-10);
  cfg["output_router_logits"] = true;
  BuildOptions o;
  o.tiny = false;
  auto r = BuildModel(cfg, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("output_router_logits"), std::string::npos);
}

// modeling_rope_utils.py _compute_yarn_parameters with truncate false (gpt-oss's rope_scaling):
// the correction range's bounds are not floored / ceiled.
TEST(LlamaVariantsTest, YarnWithoutTruncateKeepsFractionalBounds) {
  const json cfg = {{"rope_scaling",
                     {{"rope_type", "yarn"},
                      {"factor", 32.0},
                      {"beta_fast", 32.0},
                      {"beta_slow", 1.0},
                      {"truncate", false},
                      {"original_max_position_embeddings", 4096}}},
                    {"rope_theta", 150000.0}};
  auto rope = ParseRope(cfg, 131072);
  ASSERT_TRUE(rope.ok()) << rope.status().ToString();
  EXPECT_FALSE(rope->truncate);
  const int64_t d = 64;
  const double base = 150000.0, orig = 4096.0, factor = 32.0;
  auto corr = [&](double rot) {
    return d * std::log(orig / (rot * 2.0 * M_PI)) / (2.0 * std::log(base));
  };
  const double low = std::max(corr(32.0), 0.0), high = std::min(corr(1.0), d - 1.0);
  at::Tensor pos_freqs = at::pow(base, at::arange(0, d, 2, at::kDouble) / static_cast<double>(d));
  at::Tensor ramp = ((at::arange(d / 2, at::kDouble) - low) / (high - low)).clamp(0.0, 1.0);
  at::Tensor extrap = 1.0 - ramp;
  at::Tensor inv = (1.0 / (factor * pos_freqs)) * (1.0 - extrap) + (1.0 / pos_freqs) * extrap;
  const at::Tensor pos = at::arange(5, at::kLong);
  auto [cos, sin] = nn::RotaryCosSin(*rope, d, pos, at::kDouble);
  at::Tensor f = at::outer(pos.to(at::kDouble), inv);
  const double mscale = 0.1 * std::log(factor) + 1.0;  // attention_factor
  EXPECT_LT(testing::MaxAbs(cos, at::cat({f, f}, -1).cos() * mscale), 1e-10);
  json truncated = cfg;
  truncated["rope_scaling"].erase("truncate");
  auto t = ParseRope(truncated, 131072);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->truncate);
  EXPECT_GT(testing::MaxAbs(nn::RotaryCosSin(*t, d, pos, at::kDouble).first, cos), 1e-6);
}

// modeling_ctrl.py: CTRLModel's w * sqrt(n_embd) + positional_encoding (angle_defn: pos /
// 10000^(2 (i // 2) / d); sin of the even dims, then cos of the odd), EncoderLayer (layernorm1,
// MultiHeadAttention with biased Wq / Wk / Wv / dense, causal; layernorm2, ffn.0 / ReLU / ffn.2),
// the final layernorm; CTRLLMHeadModel's lm_head tied to w with its own bias.
TEST(LlamaVariantsTest, CtrlSinusoidHalvesScaledEmbeddingAndBiasedTiedHead) {
  const int64_t d = 8, heads = 2, hd = 4, s = 6, vocab = 32;
  const json cfg = {{"architectures", {"CTRLLMHeadModel"}},
                    {"model_type", "ctrl"},
                    {"vocab_size", vocab},
                    {"n_positions", 16},
                    {"n_embd", d},
                    {"dff", 12},
                    {"n_layer", 1},
                    {"n_head", heads},
                    {"layer_norm_epsilon", 1e-6}};
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  EXPECT_TRUE(testing::HasWeight(*m, "transformer.h.0.multi_head_attention.Wq.bias"));
  EXPECT_TRUE(testing::HasWeight(*m, "transformer.h.0.ffn.2.weight"));
  EXPECT_TRUE(testing::HasWeight(*m, "lm_head.bias"));
  EXPECT_FALSE(testing::HasWeight(*m, "lm_head.weight"));  // tied to transformer.w
  const WeightMap w = m->InitWeights(12, at::kDouble);
  const at::Tensor ids = at::arange(4, 4 + s, at::kLong).view({1, s});
  const std::string t = "transformer.", l = "transformer.h.0.";
  auto ln = [&](const at::Tensor& x, const std::string& p) {
    return at::layer_norm(x, {d}, w.at(p + ".weight"), w.at(p + ".bias"), 1e-6);
  };
  auto lin = [&](const at::Tensor& x, const std::string& p) {
    return at::linear(x, w.at(p + ".weight"), w.at(p + ".bias"));
  };
  at::Tensor i = at::arange(d, at::kDouble);
  at::Tensor angle = at::arange(s, at::kDouble).unsqueeze(1) /
                     at::pow(10000.0, at::floor(i / 2.0) * 2.0 / static_cast<double>(d));
  at::Tensor pe = at::cat({at::sin(angle.slice(1, 0, d, 2)), at::cos(angle.slice(1, 1, d, 2))}, 1);
  at::Tensor x = at::embedding(w.at(t + "w.weight"), ids) * std::sqrt(8.0) + pe.unsqueeze(0);
  at::Tensor h = ln(x, l + "layernorm1");
  auto split = [&](const at::Tensor& y) { return y.view({1, s, heads, hd}).permute({0, 2, 1, 3}); };
  const std::string a = l + "multi_head_attention.";
  at::Tensor q = split(lin(h, a + "Wq")), k = split(lin(h, a + "Wk")), v = split(lin(h, a + "Wv"));
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / 2.0;  // sqrt(depth 4)
  scores = scores + at::ones({s, s}, at::kDouble).triu(1) * -1e4;
  at::Tensor o = at::matmul(at::softmax(scores, -1), v).permute({0, 2, 1, 3}).reshape({1, s, d});
  x = x + lin(o, a + "dense");
  x = x + lin(at::relu(lin(ln(x, l + "layernorm2"), l + "ffn.0")), l + "ffn.2");
  x = ln(x, t + "layernorm");
  const at::Tensor want = at::linear(x, w.at(t + "w.weight"), w.at("lm_head.bias"));
  EXPECT_LT(testing::MaxAbs(m->Forward(w, {{"input_ids", ids}})[0], want), 1e-8);
  json other = cfg;
  other["layer_norm_epsilon"] = 1e-5;
  BuildOptions opt;
  opt.tiny = false;
  auto r = BuildModel(other, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("layer_norm_epsilon"), std::string::npos);
}

// modeling_qwen2_vl.py / modeling_qwen3_vl.py: over text the TextModels' position ids are one
// arange repeated for the three mrope sections (Qwen2VLTextModel.forward), so
// apply_multimodal_rotary_pos_emb (and Qwen3-VL's interleaved variant) pick every dim's cos / sin
// from identical tables: the 1D rotary. Qwen2VLTextModel is then Qwen2Model's layout and
// Qwen3VLTextModel Qwen3Model's, to the last bit of their outputs in double; the legacy "mrope"
// type reads as "default", and the tiny config's mrope_section sums to the tiny head's half.
TEST(LlamaVariantsTest, QwenVlTextModelsAreTheirTextFamilyOverText) {
  for (const auto& [vl, text, type] : {std::tuple<std::string, std::string, std::string>{
                                           "Qwen2VLTextModel", "qwen2", "qwen2_vl_text"},
                                       {"Qwen2_5_VLTextModel", "qwen2", "qwen2_5_vl_text"},
                                       {"Qwen3VLTextModel", "qwen3", "qwen3_vl_text"}}) {
    SCOPED_TRACE(vl);
    json cfg = Config(type.c_str(), vl.c_str(), Shape{.layers = 1, .heads = 2, .kv = 1, .d = 4});
    cfg["head_dim"] = 4;
    cfg["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {1, 0, 1}}};
    auto m = testing::BuildFull(cfg);
    ASSERT_TRUE(m);
    json plain = cfg;
    plain["model_type"] = text;
    plain["architectures"] = {text == "qwen2" ? "Qwen2Model" : "Qwen3Model"};
    plain.erase("rope_scaling");
    if (text == "qwen2") plain.erase("head_dim");
    auto ref = testing::BuildFull(plain);
    ASSERT_TRUE(ref);
    ASSERT_EQ(m->WeightShapes(), ref->WeightShapes());
    const WeightMap w = m->InitWeights(13, at::kDouble);
    const at::Tensor ids = at::arange(2, 9, at::kLong).view({1, 7});
    EXPECT_LT(testing::MaxAbs(m->Forward(w, {{"input_ids", ids}})[0],
                              ref->Forward(w, {{"input_ids", ids}})[0]),
              1e-12);
    auto tiny = TinyConfig(*ExampleConfig(vl), vl);
    ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
    const json& t = *tiny;
    const int64_t hd = t.contains("head_dim") ? t["head_dim"].get<int64_t>()
                                              : t["hidden_size"].get<int64_t>() /
                                                    t["num_attention_heads"].get<int64_t>();
    int64_t sum = 0;
    for (const json& v : t["rope_scaling"]["mrope_section"]) sum += v.get<int64_t>();
    EXPECT_EQ(sum, hd / 2);
  }
}

// modeling_glm4v.py Glm4vTextModel over text: Glm4Model's computation (sandwich norms, fused
// gate_up_proj, interleaved partial rotary) with q / k / v biases always on and head_dim =
// hidden / heads; partial_rotary_factor 1.0 when absent (the rope init's default), and the tiny
// mrope_section sums to half the rotated dims.
TEST(LlamaVariantsTest, Glm4vTextModelIsGlm4OverText) {
  json cfg =
      Config("glm4v_text", "Glm4vTextModel", Shape{.layers = 1, .heads = 2, .kv = 1, .d = 4});
  cfg["partial_rotary_factor"] = 0.5;
  cfg["attention_bias"] = false;  // Glm4vTextAttention ignores it
  cfg["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", {0, 1, 0}}};
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  EXPECT_TRUE(testing::HasWeight(*m, "layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(testing::HasWeight(*m, "layers.0.self_attn.o_proj.bias"));
  json plain = cfg;
  plain["model_type"] = "glm4";
  plain["architectures"] = {"Glm4Model"};
  plain["attention_bias"] = true;
  plain["head_dim"] = 4;
  plain.erase("rope_scaling");
  auto ref = testing::BuildFull(plain);
  ASSERT_TRUE(ref);
  ASSERT_EQ(m->WeightShapes(), ref->WeightShapes());
  const WeightMap w = m->InitWeights(14, at::kDouble);
  const at::Tensor ids = at::arange(2, 9, at::kLong).view({1, 7});
  EXPECT_LT(testing::MaxAbs(m->Forward(w, {{"input_ids", ids}})[0],
                            ref->Forward(w, {{"input_ids", ids}})[0]),
            1e-12);
  // Without the field the whole head rotates: not glm4's half.
  json full = cfg;
  full.erase("partial_rotary_factor");
  auto f = testing::BuildFull(full);
  ASSERT_TRUE(f);
  EXPECT_GT(testing::MaxAbs(f->Forward(w, {{"input_ids", ids}})[0],
                            ref->Forward(w, {{"input_ids", ids}})[0]),
            1e-6);
  auto tiny = TinyConfig(*ExampleConfig("Glm4vTextModel"), "Glm4vTextModel");
  ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
  const json& t = *tiny;
  const int64_t hd = t["hidden_size"].get<int64_t>() / t["num_attention_heads"].get<int64_t>();
  int64_t sum = 0;
  for (const json& v : t["rope_scaling"]["mrope_section"]) sum += v.get<int64_t>();
  EXPECT_EQ(sum, hd / 4);  // half of the rotated half
}

// modeling_whisper.py WhisperForCausalLM: WhisperDecoderWrapper (`model.decoder`) without encoder
// states, proj_out tied to its embed_tokens, CrossEntropyLoss(logits, labels) unshifted; its
// state_dict keeps the decoder layers' cross-attention and proj_out.
TEST(LlamaVariantsTest, WhisperCausalLmIsTheDecoderWithAnUnshiftedLoss) {
  auto m = testing::Build("WhisperForCausalLM");
  ASSERT_TRUE(m);
  EXPECT_TRUE(testing::HasWeight(*m, "model.decoder.embed_tokens.weight"));
  EXPECT_TRUE(testing::HasWeight(*m, "model.decoder.embed_positions.weight"));
  EXPECT_TRUE(testing::HasWeight(*m, "model.decoder.layers.0.self_attn.k_proj.weight"));
  EXPECT_FALSE(testing::HasWeight(*m, "model.decoder.layers.0.self_attn.k_proj.bias"));
  EXPECT_FALSE(testing::HasWeight(*m, "model.decoder.layers.0.encoder_attn.q_proj.weight"));
  for (const auto& [n, s] : m->WeightShapes()) {
    EXPECT_EQ(n.rfind("model.decoder.", 0), 0u) << n;
  }
  std::set<std::string> sd;
  for (const StateDictEntry& e : StateDictShapes(*m)) sd.insert(e.name);
  EXPECT_TRUE(sd.count("proj_out.weight"));
  EXPECT_TRUE(sd.count("model.decoder.layers.0.encoder_attn.q_proj.weight"));
  EXPECT_TRUE(sd.count("model.decoder.layers.0.encoder_attn_layer_norm.bias"));
  EXPECT_FALSE(sd.count("model.decoder.layers.0.encoder_attn.k_proj.bias"));

  const WeightMap w = m->InitWeights(5, at::kDouble);
  const Batch batch = m->MakeBatch(6, 2);
  ASSERT_TRUE(batch.inputs.count("input_ids"));
  ASSERT_FALSE(batch.inputs.count("input_features"));
  const at::Tensor logits = m->Forward(w, batch.inputs)[0];
  const at::Tensor& labels = batch.labels.at("labels");
  EXPECT_TRUE(labels.eq(-100).any().item<bool>());  // padding is not scored
  const int64_t v = logits.size(-1);
  const at::Tensor want = at::cross_entropy_loss(logits.reshape({-1, v}), labels.reshape({-1}), {},
                                                 at::Reduction::Mean, -100);
  EXPECT_LT(std::abs(m->Loss(w, batch).item<double>() - want.item<double>()), 1e-10);
  // Not BartForCausalLM's shifted loss.
  const at::Tensor shifted = at::cross_entropy_loss(
      logits.narrow(1, 0, logits.size(1) - 1).reshape({-1, v}),
      labels.narrow(1, 1, labels.size(1) - 1).reshape({-1}), {}, at::Reduction::Mean, -100);
  EXPECT_GT(std::abs(want.item<double>() - shifted.item<double>()), 1e-6);
}

}  // namespace
}  // namespace ts::zoo
