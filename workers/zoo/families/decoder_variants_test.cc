// The decoder families added for issue 33 (nanochat, gpt_neox_japanese, lfm2) against references
// in double written from the transformers sources each test names (not from the zoo's trunks).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;

// Llama4TextL2Norm: x * rsqrt(mean(x^2) + eps), no weight.
at::Tensor L2Norm(const at::Tensor& x, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps);
}

// cos / sin [S, d] of the llama rotary at arange(S).
std::pair<at::Tensor, at::Tensor> CosSin(int64_t s, int64_t d, double theta) {
  at::Tensor inv = 1.0 / at::pow(theta, at::arange(0, d, 2, at::kDouble) / static_cast<double>(d));
  at::Tensor f = at::outer(at::arange(s, at::kDouble), inv);
  at::Tensor emb = at::cat({f, f}, -1);
  return {emb.cos(), emb.sin()};
}

// modular_nanochat.py: the weight-free norm on the embeddings and around every block, Qwen3's
// biased projections, the rotary with rotate_half (x2, -x1), weight-free q / k norms after it,
// CLIPMLP's fc1 / relu2 / fc2, and Gemma2ForCausalLM's softcapped lm_head.
TEST(DecoderVariantsTest, NanoChatNormsAfterTheFlippedRotaryAndSoftcapsTheLogits) {
  const int64_t heads = 2, kv = 1, d = 4, hid = 8, s = 7, layers = 2;
  const double eps = 1e-6, theta = 100.0, cap = 3.0;
  json cfg = {{"architectures", {"NanoChatForCausalLM"}},
              {"model_type", "nanochat"},
              {"hidden_size", hid},
              {"intermediate_size", 12},
              {"num_attention_heads", heads},
              {"num_key_value_heads", kv},
              {"num_hidden_layers", layers},
              {"vocab_size", 32},
              {"max_position_embeddings", 64},
              {"rms_norm_eps", eps},
              {"rope_theta", theta},
              {"attention_bias", true},
              {"final_logit_softcapping", cap}};
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  // No norm has a weight; o_proj has a bias with attention_bias.
  EXPECT_FALSE(testing::HasWeight(*m, "model.layers.0.input_layernorm.weight"));
  EXPECT_FALSE(testing::HasWeight(*m, "model.norm.weight"));
  EXPECT_FALSE(testing::HasWeight(*m, "model.layers.0.self_attn.q_norm.weight"));
  EXPECT_TRUE(testing::HasWeight(*m, "model.layers.1.self_attn.o_proj.bias"));
  EXPECT_EQ(testing::WeightShape(*m, "model.layers.0.mlp.fc1.weight"),
            (std::vector<int64_t>{12, hid}));
  const WeightMap w = m->InitWeights(3, at::kDouble);
  const at::Tensor ids = at::arange(3, 3 + s, at::kLong).view({1, s});
  auto [cos, sin] = CosSin(s, d, theta);
  auto rope = [&](const at::Tensor& t) {
    at::Tensor t1 = t.narrow(-1, 0, d / 2), t2 = t.narrow(-1, d / 2, d / 2);
    return t * cos + at::cat({t2, -t1}, -1) * sin;
  };
  at::Tensor x = L2Norm(at::embedding(w.at("model.embed_tokens.weight"), ids), eps);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    at::Tensor h = L2Norm(x, eps);
    auto proj = [&](const char* n, int64_t nh) {
      const std::string p = l + "self_attn." + n;
      return at::linear(h, w.at(p + ".weight"), w.at(p + ".bias"))
          .view({1, s, nh, d})
          .transpose(1, 2);
    };
    at::Tensor q = L2Norm(rope(proj("q_proj", heads)), eps);
    at::Tensor k = L2Norm(rope(proj("k_proj", kv)), eps).repeat_interleave(heads / kv, 1);
    at::Tensor v = proj("v_proj", kv).repeat_interleave(heads / kv, 1);
    at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
    scores = scores.masked_fill(at::ones({s, s}, at::kBool).triu(1),
                                -std::numeric_limits<double>::infinity());
    at::Tensor a = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({1, s, hid});
    x = x + at::linear(a, w.at(l + "self_attn.o_proj.weight"), w.at(l + "self_attn.o_proj.bias"));
    at::Tensor u = at::relu(at::linear(L2Norm(x, eps), w.at(l + "mlp.fc1.weight")));
    x = x + at::linear(u * u, w.at(l + "mlp.fc2.weight"));
  }
  at::Tensor logits = at::linear(L2Norm(x, eps), w.at("lm_head.weight"));
  logits = cap * at::tanh(logits / cap);
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}})[0];
  EXPECT_LT(testing::MaxAbs(got, logits), 1e-10);
  // The softcap bounds every logit.
  EXPECT_LT(got.abs().max().item<double>(), cap);
  testing::ExpectConfigError("NanoChatForCausalLM", "final_logit_softcapping", -1.0,
                             "final_logit_softcapping");
  auto base = testing::BuildSibling(*m, "NanoChatModel");
  ASSERT_TRUE(base);
  EXPECT_TRUE(testing::HasWeight(*base, "layers.0.mlp.fc2.weight"));
}

// modeling_gpt_neox_japanese.py: query_key_value viewed [B, S, heads, 3 * head] and narrowed,
// the rotary on the first rotary_pct of each head, softmax(q k^T / sqrt(head)), `dense` without
// a bias but for the last layer's `dense_bias`, x + attn, then + mlp(ln2(.)) with gelu over
// int(hidden * intermediate_multiple_size), final_layer_norm, embed_out tied to embed_in.
TEST(DecoderVariantsTest, GptNeoXJapaneseBiasesOnlyTheLastAttentionOutput) {
  const int64_t heads = 2, d = 4, hid = 8, s = 6, layers = 2, rot = 2;
  const double eps = 1e-5, theta = 50.0;
  json cfg = {{"architectures", {"GPTNeoXJapaneseForCausalLM"}},
              {"model_type", "gpt_neox_japanese"},
              {"hidden_size", hid},
              {"num_attention_heads", heads},
              {"num_hidden_layers", layers},
              {"vocab_size", 32},
              {"intermediate_multiple_size", 3},
              {"rotary_pct", 0.5},
              {"rotary_emb_base", theta},
              {"max_position_embeddings", 64},
              {"layer_norm_eps", eps}};
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  const std::string b = "gpt_neox_japanese.layers.";
  EXPECT_FALSE(testing::HasWeight(*m, b + "0.attention.dense_bias"));
  EXPECT_TRUE(testing::HasWeight(*m, b + "1.attention.dense_bias"));
  EXPECT_FALSE(testing::HasWeight(*m, b + "0.attention.query_key_value.bias"));
  EXPECT_FALSE(testing::HasWeight(*m, "embed_out.weight"));  // tied to embed_in
  EXPECT_EQ(testing::WeightShape(*m, b + "0.mlp.dense_h_to_4h.weight"),
            (std::vector<int64_t>{3 * hid, hid}));
  const WeightMap w = m->InitWeights(3, at::kDouble);
  const at::Tensor ids = at::arange(2, 2 + s, at::kLong).view({1, s});
  auto [cos, sin] = CosSin(s, rot, theta);
  auto rope = [&](const at::Tensor& t) {
    at::Tensor r = t.narrow(-1, 0, rot), pass = t.narrow(-1, rot, d - rot);
    at::Tensor r1 = r.narrow(-1, 0, rot / 2), r2 = r.narrow(-1, rot / 2, rot / 2);
    return at::cat({r * cos + at::cat({-r2, r1}, -1) * sin, pass}, -1);
  };
  auto ln = [&](const at::Tensor& x, const std::string& n) {
    return at::layer_norm(x, {hid}, w.at(n + ".weight"), w.at(n + ".bias"), eps);
  };
  at::Tensor x = at::embedding(w.at("gpt_neox_japanese.embed_in.weight"), ids);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string l = b + std::to_string(i) + ".";
    at::Tensor qkv =
        at::linear(ln(x, l + "input_layernorm"), w.at(l + "attention.query_key_value.weight"))
            .view({1, s, heads, 3 * d});
    at::Tensor q = rope(qkv.narrow(-1, 0, d).permute({0, 2, 1, 3}));
    at::Tensor k = rope(qkv.narrow(-1, d, d).permute({0, 2, 1, 3}));
    at::Tensor v = qkv.narrow(-1, 2 * d, d).permute({0, 2, 1, 3});
    at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
    scores = scores.masked_fill(at::ones({s, s}, at::kBool).triu(1),
                                -std::numeric_limits<double>::infinity());
    at::Tensor a =
        at::matmul(at::softmax(scores, -1), v).permute({0, 2, 1, 3}).reshape({1, s, hid});
    a = at::linear(a, w.at(l + "attention.dense.weight"));
    if (i == layers - 1) a = a + w.at(l + "attention.dense_bias");
    x = x + a;
    at::Tensor u = at::gelu(
        at::linear(ln(x, l + "post_attention_layernorm"), w.at(l + "mlp.dense_h_to_4h.weight")));
    x = x + at::linear(u, w.at(l + "mlp.dense_4h_to_h.weight"));
  }
  const at::Tensor logits = at::linear(ln(x, "gpt_neox_japanese.final_layer_norm"),
                                       w.at("gpt_neox_japanese.embed_in.weight"));
  EXPECT_LT(testing::MaxAbs(m->Forward(w, {{"input_ids", ids}})[0], logits), 1e-10);
  auto tiny = testing::Build("GPTNeoXJapaneseForCausalLM");
  ASSERT_TRUE(tiny);
  EXPECT_EQ(tiny->spec().tiny_config.at("num_hidden_layers"), 2);
  auto base = testing::BuildSibling(*m, "GPTNeoXJapaneseModel");
  ASSERT_TRUE(base);
  EXPECT_TRUE(testing::HasWeight(*base, "layers.1.attention.dense_bias"));
}

// modular_lfm2.py: a conv layer (Lfm2ShortConv.slow_forward: padded positions zeroed, in_proj
// chunked into B, C, x over the channels, C * conv1d(B * x, padding kernel - 1)[..., :S],
// out_proj) and an attention layer (q_layernorm / k_layernorm per head before the rotary,
// out_proj), operator_norm / ffn_norm pre-norm blocks, the SwiGLU feed_forward (w1, w3, w2) of
// the adjusted width, embedding_norm, the tied head; two rows, the second right-padded.
TEST(DecoderVariantsTest, Lfm2ShortConvAndAttentionLayersAsTransformers) {
  const int64_t heads = 2, kv = 1, d = 4, hid = 8, s = 6, kernel = 3;
  const double eps = 1e-5, theta = 100.0;
  json cfg = {{"architectures", {"Lfm2ForCausalLM"}},
              {"model_type", "lfm2"},
              {"hidden_size", hid},
              {"intermediate_size", 36},
              {"num_attention_heads", heads},
              {"num_key_value_heads", kv},
              {"num_hidden_layers", 2},
              {"vocab_size", 32},
              {"max_position_embeddings", 64},
              {"norm_eps", eps},
              {"theta", theta},
              {"conv_bias", true},
              {"conv_L_cache", kernel},
              {"block_multiple_of", 8},
              {"block_ffn_dim_multiplier", 1.0},
              {"full_attn_idxs", {1}}};
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  // int(2 * 36 / 3) = 24, rounded up to a multiple of 8: 24.
  EXPECT_EQ(testing::WeightShape(*m, "model.layers.0.feed_forward.w1.weight"),
            (std::vector<int64_t>{24, hid}));
  EXPECT_EQ(testing::WeightShape(*m, "model.layers.0.conv.conv.weight"),
            (std::vector<int64_t>{hid, 1, kernel}));
  EXPECT_FALSE(testing::HasWeight(*m, "model.layers.0.self_attn.q_proj.weight"));
  EXPECT_FALSE(testing::HasWeight(*m, "model.layers.1.conv.in_proj.weight"));
  EXPECT_FALSE(testing::HasWeight(*m, "lm_head.weight"));  // tie_word_embeddings
  const WeightMap w = m->InitWeights(3, at::kDouble);
  const at::Tensor ids = at::arange(2, 2 + 2 * s, at::kLong).view({2, s});
  at::Tensor mask = at::ones({2, s}, at::kLong);
  mask[1].narrow(0, s - 2, 2).fill_(0);
  auto rms = [&](const at::Tensor& x, const std::string& n) {
    return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * w.at(n + ".weight");
  };
  auto lin = [&](const at::Tensor& x, const std::string& n, bool bias) {
    return bias ? at::linear(x, w.at(n + ".weight"), w.at(n + ".bias"))
                : at::linear(x, w.at(n + ".weight"));
  };
  auto mlp = [&](const at::Tensor& x, const std::string& l) {
    const std::string f = l + "feed_forward.";
    return lin(at::silu(lin(x, f + "w1", false)) * lin(x, f + "w3", false), f + "w2", false);
  };
  at::Tensor x = at::embedding(w.at("model.embed_tokens.weight"), ids);
  {  // layer 0: conv
    const std::string l = "model.layers.0.", c = l + "conv.";
    at::Tensor h = rms(x, l + "operator_norm") * mask.unsqueeze(-1).to(at::kDouble);
    at::Tensor bcx = lin(h, c + "in_proj", true).transpose(-1, -2);
    auto parts = bcx.chunk(3, -2);
    at::Tensor conv = at::conv1d(parts[0] * parts[2], w.at(c + "conv.weight"),
                                 w.at(c + "conv.bias"), 1, kernel - 1, 1, hid);
    at::Tensor y = (parts[1] * conv.narrow(-1, 0, s)).transpose(-1, -2);
    x = x + lin(y, c + "out_proj", true);
    x = x + mlp(rms(x, l + "ffn_norm"), l);
  }
  {  // layer 1: attention
    const std::string l = "model.layers.1.", a = l + "self_attn.";
    at::Tensor h = rms(x, l + "operator_norm");
    auto [cos, sin] = CosSin(s, d, theta);
    auto rope = [&](const at::Tensor& t) {
      at::Tensor t1 = t.narrow(-1, 0, d / 2), t2 = t.narrow(-1, d / 2, d / 2);
      return t * cos + at::cat({-t2, t1}, -1) * sin;
    };
    at::Tensor q = rope(
        rms(lin(h, a + "q_proj", false).view({2, s, heads, d}), a + "q_layernorm").transpose(1, 2));
    at::Tensor k =
        rope(
            rms(lin(h, a + "k_proj", false).view({2, s, kv, d}), a + "k_layernorm").transpose(1, 2))
            .repeat_interleave(heads / kv, 1);
    at::Tensor v =
        lin(h, a + "v_proj", false).view({2, s, kv, d}).transpose(1, 2).repeat_interleave(2, 1);
    at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
    at::Tensor blocked =
        at::ones({s, s}, at::kBool).triu(1).view({1, 1, s, s}) | mask.eq(0).view({2, 1, 1, s});
    scores = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
    at::Tensor o = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({2, s, hid});
    x = x + lin(o, a + "out_proj", false);
    x = x + mlp(rms(x, l + "ffn_norm"), l);
  }
  const at::Tensor logits =
      at::linear(rms(x, "model.embedding_norm"), w.at("model.embed_tokens.weight"));
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}})[0];
  const at::Tensor attended = mask.unsqueeze(-1).to(at::kBool);
  EXPECT_LT(testing::MaxAbs(got.masked_select(attended), logits.masked_select(attended)), 1e-10);
  auto tiny = testing::Build("Lfm2ForCausalLM");
  ASSERT_TRUE(tiny);
  EXPECT_EQ(tiny->spec().tiny_config.at("layer_types"), json({"conv", "full_attention"}));
  testing::ExpectConfigError("Lfm2ForCausalLM", "layer_types", json{"conv", "mamba"},
                             "layer_types");
  auto base = testing::BuildSibling(*m, "Lfm2Model");
  ASSERT_TRUE(base);
  EXPECT_TRUE(testing::HasWeight(*base, "layers.0.conv.out_proj.bias"));
}

}  // namespace
}  // namespace ts::zoo
