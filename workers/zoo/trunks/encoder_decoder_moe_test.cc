// Tests for the encoder-decoder trunk's sparse feed-forward layers (encoder_decoder_moe.cc) and
// the families on them (switch_transformers), written from modular_switch_transformers.py.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/encoder_decoder.h"

namespace ts::zoo {
namespace {

using testing::Build;
using testing::BuildSibling;
using testing::ExpectConfigError;
using testing::HasWeight;
using testing::RelDiff;

// SwitchTransformersTop1Router + SwitchTransformersExperts, token by token: probs =
// softmax(W x), e = argmax, out = probs[e] * wo_e relu(wi_e x).
TEST(EncDecMoeTest, SwitchSparseMlpIsTheTopOneExpertTimesItsProbability) {
  at::Generator gen = at::detail::createCPUGenerator(11);
  const int64_t d = 8, ff = 12, e = 4, n = 10;
  auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor x = at::randn({2, n / 2, d}, gen, opts);
  at::Tensor rw = at::randn({e, d}, gen, opts), rb = at::randn({e}, gen, opts);
  std::vector<at::Tensor> wi, wo;
  for (int64_t k = 0; k < e; ++k) {
    wi.push_back(at::randn({ff, d}, gen, opts));
    wo.push_back(at::randn({d, ff}, gen, opts));
  }
  at::Tensor got = internal::SwitchSparseMlp(x, rw, rb, wi, wo, Activation::kRelu);
  ASSERT_EQ(got.sizes(), x.sizes());
  at::Tensor flat = x.reshape({n, d});
  std::vector<int> used(e, 0);
  for (int64_t t = 0; t < n; ++t) {
    at::Tensor xt = flat[t];
    at::Tensor probs = at::softmax(at::mv(rw, xt) + rb, 0);
    const int64_t best = probs.argmax().item<int64_t>();
    ++used[best];
    at::Tensor want = probs[best] * at::mv(wo[best], at::relu(at::mv(wi[best], xt)));
    EXPECT_LT(RelDiff(got.reshape({n, d})[t], want), 1e-12) << t;
  }
  int distinct = 0;
  for (int u : used) distinct += u > 0;
  EXPECT_GE(distinct, 2) << "the draw should route to more than one expert";
}

// With every expert equal to one DenseActDense and the router at zero, each sparse layer is that
// MLP times 1/num_experts: SwitchTransformersForConditionalGeneration is then
// T5ForConditionalGeneration with `mlp` named `DenseReluDense` and the sparse layers' wo / E.
TEST(EncDecMoeTest, SwitchTransformersIsT5WithSparseLayersEveryStep) {
  auto sw = Build("SwitchTransformersForConditionalGeneration");
  ASSERT_TRUE(sw);
  const auto& cfg = sw->spec().tiny_config;
  ASSERT_EQ(cfg["num_layers"], 2);
  ASSERT_EQ(cfg["encoder_sparse_step"], 2);
  const int64_t experts = cfg["num_experts"];
  ASSERT_EQ(experts, 4);
  EXPECT_TRUE(HasWeight(*sw, "encoder.block.0.layer.1.mlp.wi.weight"));
  EXPECT_TRUE(HasWeight(*sw, "encoder.block.1.layer.1.mlp.router.classifier.weight"));
  EXPECT_FALSE(HasWeight(*sw, "encoder.block.1.layer.1.mlp.router.classifier.bias"));
  EXPECT_TRUE(HasWeight(*sw, "decoder.block.1.layer.2.mlp.experts.expert_3.wo.weight"));
  EXPECT_FALSE(HasWeight(*sw, "decoder.block.1.layer.2.mlp.wi.weight"));
  auto t5 = BuildSibling(*sw, "T5ForConditionalGeneration");
  ASSERT_TRUE(t5);
  WeightMap w = sw->InitWeights(4, at::kDouble);
  WeightMap tw;
  for (const auto& [name, shape] : t5->WeightShapes()) {
    std::string n = name;
    const auto at_ffn = n.find("DenseReluDense");
    if (at_ffn != std::string::npos) n.replace(at_ffn, 14, "mlp");
    if (w.count(n)) {
      tw[name] = w.at(n);
      continue;
    }
    // A sparse layer (`<p>wi.weight` / `<p>wo.weight`): expert 0's weights for every expert,
    // the router at zero.
    const std::string leaf = n.substr(n.size() - 9), p = n.substr(0, n.size() - 9);
    const std::string e0 = p + "experts.expert_0." + leaf;
    ASSERT_TRUE(w.count(e0)) << name;
    for (int64_t k = 1; k < experts; ++k)
      w[p + "experts.expert_" + std::to_string(k) + "." + leaf] = w.at(e0);
    w.at(p + "router.classifier.weight").zero_();
    tw[name] = leaf == "wi.weight" ? w.at(e0) : w.at(e0) / static_cast<double>(experts);
  }
  Batch b = sw->MakeBatch(3, 2);
  const auto got = sw->Forward(w, b.inputs);
  const auto want = t5->Forward(tw, b.inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(RelDiff(got[i], want[i]), 1e-12) << i;
  EXPECT_NEAR(sw->Loss(w, b).item<double>(), t5->Loss(tw, b).item<double>(), 1e-10);
  // A different expert 2 in a sparse layer changes the outputs once the router is live.
  WeightMap live = sw->InitWeights(4, at::kDouble);
  WeightMap moved = live;
  moved["encoder.block.1.layer.1.mlp.experts.expert_2.wo.weight"] =
      live.at("encoder.block.1.layer.1.mlp.experts.expert_2.wo.weight") * 3.0;
  EXPECT_GT(RelDiff(sw->Forward(moved, b.inputs)[0], sw->Forward(live, b.inputs)[0]), 1e-9);
}

// SwitchTransformersConfig: without encoder_sparse_step / decoder_sparse_step the steps are
// num_layers // num_sparse_*_layers; SwitchTransformersStack makes layer i sparse when
// i % step == 1, or every layer for step 1.
TEST(EncDecMoeTest, SwitchTransformersSparseLayersFollowTheConfigsStep) {
  nlohmann::json cfg = *ExampleConfig("SwitchTransformersModel");
  cfg.erase("encoder_sparse_step");
  cfg.erase("decoder_sparse_step");
  cfg["num_layers"] = 7;
  cfg["num_sparse_encoder_layers"] = 2;  // step 3: layers 1 and 4
  cfg["num_decoder_layers"] = 3;
  cfg["num_sparse_decoder_layers"] = 3;  // step 1: every layer
  cfg["d_model"] = 16;
  cfg["d_kv"] = 4;
  cfg["d_ff"] = 8;
  cfg["num_heads"] = 4;
  cfg["num_experts"] = 2;
  cfg["vocab_size"] = 64;
  cfg["expert_capacity"] = 128;  // a full-size run has 128 tokens
  auto m = testing::BuildFull(cfg);
  ASSERT_TRUE(m);
  for (int i = 0; i < 7; ++i) {
    const std::string p = "encoder.block." + std::to_string(i) + ".layer.1.mlp.";
    const bool sparse = i == 1 || i == 4;
    EXPECT_EQ(HasWeight(*m, p + "router.classifier.weight"), sparse) << i;
    EXPECT_EQ(HasWeight(*m, p + "wi.weight"), !sparse) << i;
  }
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(HasWeight(
        *m, "decoder.block." + std::to_string(i) + ".layer.2.mlp.experts.expert_1.wi.weight"))
        << i;
}

TEST(EncDecMoeTest, SwitchTransformersRefusesWhatItDoesNotRun) {
  const std::string a = "SwitchTransformersModel";
  ExpectConfigError(a, "router_dtype", "bfloat16", "router_dtype");
  ExpectConfigError(a, "expert_capacity", 16, "expert_capacity");
  ExpectConfigError(a, "num_experts", 0, "num_experts");
  ExpectConfigError(a, "encoder_sparse_step", -1, "encoder_sparse_step");
  ExpectConfigError(a, "dense_act_fn", "nope", "dense_act_fn");
}

}  // namespace
}  // namespace ts::zoo
