// Tests of the gemma and gemma2 families against transformers' formulas (families/gemma.cc,
// families/gemma2.cc): the expected values are computed here from the HF modeling code, never
// taken from another zoo model.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

constexpr int64_t kH = 8;

// A one-layer Gemma-style config at full size (no tiny scaling): hidden = intermediate = 8.
nlohmann::json OneLayer(const std::string& arch, const std::string& model_type) {
  return {{"architectures", {arch}},
          {"model_type", model_type},
          {"hidden_size", kH},
          {"intermediate_size", kH},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"head_dim", 4},
          {"num_hidden_layers", 1},
          {"vocab_size", 16},
          {"max_position_embeddings", 64},
          {"rms_norm_eps", 1e-6}};
}

using testing::BuildFull;

// GemmaRMSNorm with a zero weight: x * rsqrt(mean(x^2) + eps) * (1 + 0).
at::Tensor GemmaNorm(const at::Tensor& x) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + 1e-6);
}

at::Tensor GeluErf(const at::Tensor& x) { return 0.5 * x * (1.0 + at::erf(x / std::sqrt(2.0))); }

at::Tensor GeluTanh(const at::Tensor& x) {
  const double c = std::sqrt(2.0 / std::acos(-1.0));
  return 0.5 * x * (1.0 + at::tanh(c * (x + 0.044715 * x.pow(3))));
}

// GemmaModel with o_proj = 0 (no attention), identity MLP projections and zero (1 + w) norm
// weights: transformers' GemmaModel.forward reduces to
//   x = embed[ids] * sqrt(H); n = norm(x); out = norm(x + act(n) * n)
// (GemmaDecoderLayer: residual + self_attn(...) = x; residual + mlp(post_attention_layernorm)).
at::Tensor MlpOnlyForward(const nlohmann::json& cfg, const at::Tensor& ids, WeightMap& w) {
  auto m = BuildFull(cfg);
  if (!m) return at::Tensor();
  w = m->InitWeights(5, at::kDouble);
  for (auto& [name, t] : w) {
    if (name.find("norm") != std::string::npos) t = at::zeros_like(t);
  }
  w["layers.0.self_attn.o_proj.weight"].zero_();
  for (const char* p : {"gate_proj", "up_proj", "down_proj"})
    w[std::string("layers.0.mlp.") + p + ".weight"] = at::eye(kH, at::kDouble);
  return m->Forward(w, {{"input_ids", ids}})[0];
}

TEST(GemmaTest, MlpUsesHiddenActSoGeluIsExactErf) {
  // google/gemma-2b's config says hidden_act "gelu"; transformers 5's GemmaConfig has no
  // hidden_activation and GemmaMLP (= LlamaMLP) applies ACT2FN[config.hidden_act]
  // (transformers/models/gemma/modular_gemma.py GemmaMLP, llama/modeling_llama.py LlamaMLP).
  nlohmann::json cfg = OneLayer("GemmaModel", "gemma");
  cfg["hidden_act"] = "gelu";
  cfg["hidden_activation"] = "gelu_pytorch_tanh";
  const at::Tensor ids = at::arange(1, 7, at::kLong).view({1, 6});
  WeightMap w;
  at::Tensor out = MlpOnlyForward(cfg, ids, w);
  ASSERT_TRUE(out.defined());
  const at::Tensor x = w.at("embed_tokens.weight").index_select(0, ids[0]).unsqueeze(0) *
                       std::sqrt(static_cast<double>(kH));
  const at::Tensor n = GemmaNorm(x);
  const at::Tensor erf = GemmaNorm(x + GeluErf(n) * n);
  const at::Tensor tanh = GemmaNorm(x + GeluTanh(n) * n);
  ASSERT_GT((erf - tanh).abs().max().item<double>(), 1e-6);  // the two GELUs are told apart
  EXPECT_LT((out - erf).abs().max().item<double>(), 1e-10);
  // Without hidden_act, GemmaConfig's default "gelu_pytorch_tanh".
  cfg.erase("hidden_act");
  cfg.erase("hidden_activation");
  out = MlpOnlyForward(cfg, ids, w);
  EXPECT_LT((out - tanh).abs().max().item<double>(), 1e-10);
}

TEST(GemmaTest, Gemma2SequenceClassificationLogitsAreNotSoftCapped) {
  // Gemma2ForSequenceClassification is GemmaForSequenceClassification
  // (= LlamaForSequenceClassification): logits = score(hidden_states) pooled at the last token;
  // final_logit_softcapping is applied only in Gemma2ForCausalLM.forward
  // (transformers/models/gemma2/modeling_gemma2.py).
  nlohmann::json cfg = OneLayer("Gemma2ForSequenceClassification", "gemma2");
  cfg["final_logit_softcapping"] = 1e-3;
  cfg["num_labels"] = 3;
  auto cls = BuildFull(cfg);
  cfg["architectures"] = {"Gemma2Model"};
  auto base = BuildFull(cfg);
  ASSERT_TRUE(cls && base);
  WeightMap w = cls->InitWeights(2, at::kDouble);
  WeightMap bw;
  for (const auto& [name, t] : w) {
    if (name.rfind("model.", 0) == 0) bw[name.substr(6)] = t;
  }
  const at::Tensor ids = at::arange(2, 12, at::kLong).view({2, 5});
  at::Tensor hidden = base->Forward(bw, {{"input_ids", ids}})[0];  // [2, 5, H]
  at::Tensor want = at::matmul(hidden.select(1, 4), w.at("score.weight").t());
  at::Tensor got = cls->Forward(w, {{"input_ids", ids}})[0];
  ASSERT_GT(want.abs().max().item<double>(), 1e-2);  // a cap of 1e-3 would show
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-10);
  // The causal LM does cap: cap * tanh(logits / cap).
  cfg["architectures"] = {"Gemma2ForCausalLM"};
  auto lm = BuildFull(cfg);
  ASSERT_TRUE(lm);
  at::Tensor logits = lm->Forward(lm->InitWeights(2, at::kDouble), {{"input_ids", ids}})[0];
  EXPECT_LE(logits.abs().max().item<double>(), 1e-3);
}

}  // namespace
}  // namespace ts::zoo
