// imagegpt (families/imagegpt.cc) against a reference written here from modeling_imagegpt.py in
// double from at:: ops (Conv1D as addmm over [in, out] weights, the causal `bias` buffer as a
// torch.where with the dtype's lowest value, ImageGPTLayerNorm's division by the root mean
// square), never from the zoo's own code.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;

at::Tensor Conv1D(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  at::Tensor flat = at::addmm(w.at(p + ".bias"), x.reshape({-1, x.size(-1)}), w.at(p + ".weight"));
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = flat.size(-1);
  return flat.view(shape);
}

// ImageGPTLayerNorm: not mean-centred, eps inside the square root, no bias.
at::Tensor IgptNorm(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  return x / at::sqrt(at::mean(at::square(x), -1, true) + eps) * w.at(p + ".weight");
}

// ImageGPTModel.forward (eager ImageGPTAttention._attn, no attention_mask): last_hidden_state.
at::Tensor RefImageGpt(const WeightMap& w, const std::string& p, const json& c,
                       const at::Tensor& ids) {
  const double eps = c.value("layer_norm_epsilon", 1e-5);
  const int64_t h = c.at("n_embd").get<int64_t>(), heads = c.at("n_head").get<int64_t>();
  const int64_t hd = h / heads, b = ids.size(0), s = ids.size(1);
  at::Tensor x = at::embedding(w.at(p + "wte.weight"), ids) +
                 at::embedding(w.at(p + "wpe.weight"), at::arange(s).unsqueeze(0));
  at::Tensor causal = at::ones({s, s}, at::kBool).tril().view({1, 1, s, s});
  for (int64_t i = 0; i < c.at("n_layer").get<int64_t>(); ++i) {
    const std::string l = p + "h." + std::to_string(i) + ".";
    at::Tensor y = IgptNorm(w, l + "ln_1", x, eps);
    std::vector<at::Tensor> qkv = Conv1D(w, l + "attn.c_attn", y).split(h, 2);
    auto split = [&](const at::Tensor& t) {
      return t.view({b, s, heads, hd}).permute({0, 2, 1, 3});
    };
    at::Tensor scores = at::matmul(split(qkv[0]), split(qkv[1]).transpose(-1, -2));
    if (c.value("scale_attn_weights", true)) scores = scores / std::sqrt(static_cast<double>(hd));
    if (c.value("scale_attn_by_inverse_layer_idx", false)) scores = scores / (i + 1.0);
    scores = at::where(causal, scores,
                       at::scalar_tensor(std::numeric_limits<double>::lowest(), at::kDouble));
    at::Tensor ctx = at::matmul(at::softmax(scores, -1), split(qkv[2]));
    ctx = ctx.permute({0, 2, 1, 3}).contiguous().view({b, s, h});
    x = Conv1D(w, l + "attn.c_proj", ctx) + x;
    y = IgptNorm(w, l + "ln_2", x, eps);
    y = Conv1D(w, l + "mlp.c_fc", y);
    y = y * at::sigmoid(1.702 * y);  // quick_gelu
    x = x + Conv1D(w, l + "mlp.c_proj", y);
  }
  return IgptNorm(w, p + "ln_f", x, eps);
}

// The trunk with its own norm, two layers scaled by the inverse layer index; the batch's ids
// stay below the SOS id.
TEST(ImageGptTest, TrunkAsTransformers) {
  json cfg = *ExampleConfig("ImageGPTModel");
  cfg["n_layer"] = 2;
  cfg["scale_attn_by_inverse_layer_idx"] = true;
  cfg["n_inner"] = 1024;
  auto m = testing::Build("ImageGPTModel", cfg);
  ASSERT_TRUE(m);
  const json& c = m->spec().tiny_config;
  EXPECT_EQ(c.at("n_layer").get<int64_t>(), 1);  // every block alike: one
  EXPECT_EQ(c.at("n_inner").get<int64_t>(), 128);
  EXPECT_EQ(c.at("vocab_size").get<int64_t>(), 513);
  EXPECT_FALSE(testing::HasWeight(*m, "ln_f.bias"));
  EXPECT_FALSE(testing::HasWeight(*m, "h.0.ln_1.bias"));
  json full = c;
  full["n_layer"] = 2;
  auto m2 = testing::BuildFull(full);
  ASSERT_TRUE(m2);
  WeightMap w = m2->InitWeights(5, at::kDouble);
  for (const char* n : {"h.0.ln_1.weight", "h.1.ln_2.weight", "ln_f.weight"}) {
    EXPECT_TRUE(at::all(w.at(n) == 1).item<bool>()) << n;
    w[n] = w.at(n) + 0.1 * at::randn_like(w.at(n));  // a weight that is not one counts
  }
  Batch b = m2->MakeBatch(4, 2);
  const at::Tensor ids = b.inputs.at("input_ids");
  EXPECT_EQ(ids.sizes(), (at::IntArrayRef{2, 32}));
  EXPECT_LT(ids.max().item<int64_t>(), 512);  // never the SOS id 512
  EXPECT_GE(ids.min().item<int64_t>(), 0);
  at::Tensor got = m2->Forward(w, b.inputs)[0];
  EXPECT_LT(testing::RelDiff(got, RefImageGpt(w, "", full, ids)), 1e-10);

  // scale_attn_weights false.
  full["scale_attn_weights"] = false;
  auto m3 = testing::BuildFull(full);
  ASSERT_TRUE(m3);
  EXPECT_LT(testing::RelDiff(m3->Forward(w, b.inputs)[0], RefImageGpt(w, "", full, ids)), 1e-10);
}

// ImageGPTForCausalImageModeling's vocab_size - 1 logits and shifted loss, and
// ImageGPTForImageClassification's mean-pooled `score`.
TEST(ImageGptTest, HeadsAsTransformers) {
  auto lm = testing::Build("ImageGPTForCausalImageModeling");
  ASSERT_TRUE(lm);
  const json& c = lm->spec().tiny_config;
  const int64_t h = c.at("n_embd").get<int64_t>();
  EXPECT_TRUE(testing::HasWeight(*lm, "transformer.wte.weight"));
  WeightMap w = lm->InitWeights(3, at::kDouble);
  EXPECT_EQ(w.at("lm_head.weight").sizes(), (at::IntArrayRef{512, h}));
  Batch b = lm->MakeBatch(6, 2);
  const at::Tensor ids = b.inputs.at("input_ids");
  at::Tensor logits =
      at::matmul(RefImageGpt(w, "transformer.", c, ids), w.at("lm_head.weight").t());
  EXPECT_LT(testing::RelDiff(lm->Forward(w, b.inputs)[0], logits), 1e-10);
  const int64_t s = ids.size(1);
  at::Tensor shift = logits.slice(1, 0, s - 1).reshape({-1, 512});
  at::Tensor labels = b.labels.at("labels").slice(1, 1, s).reshape({-1});
  EXPECT_NEAR(lm->Loss(w, b).item<double>(), at::cross_entropy_loss(shift, labels).item<double>(),
              1e-10);

  json cfg = *ExampleConfig("ImageGPTForImageClassification");
  cfg["num_labels"] = 3;
  auto cls = testing::Build("ImageGPTForImageClassification", cfg);
  ASSERT_TRUE(cls);
  EXPECT_FALSE(testing::HasWeight(*cls, "score.bias"));
  WeightMap wc = cls->InitWeights(8, at::kDouble);
  Batch bc = cls->MakeBatch(9, 2);
  at::Tensor pooled =
      RefImageGpt(wc, "transformer.", cls->spec().tiny_config, bc.inputs.at("input_ids")).mean(1);
  at::Tensor cl = at::matmul(pooled, wc.at("score.weight").t());
  EXPECT_LT(testing::RelDiff(cls->Forward(wc, bc.inputs)[0], cl), 1e-10);
  EXPECT_NEAR(cls->Loss(wc, bc).item<double>(),
              at::cross_entropy_loss(cl, bc.labels.at("labels")).item<double>(), 1e-10);

  testing::ExpectConfigError("ImageGPTForCausalImageModeling", "tie_word_embeddings", true,
                             "tie_word_embeddings");
  testing::ExpectConfigError("ImageGPTModel", "reorder_and_upcast_attn", true,
                             "reorder_and_upcast_attn");
  testing::ExpectConfigError("ImageGPTModel", "add_cross_attention", true, "add_cross_attention");
  testing::ExpectConfigError("ImageGPTModel", "n_head", 7, "n_head");
}

}  // namespace
}  // namespace ts::zoo
