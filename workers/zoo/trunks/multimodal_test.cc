// Tests of the multimodal kind: CLIP (trunks/multimodal.h, families/clip.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"

namespace ts::zoo {
namespace {

using testing::Build;
using testing::CheckClass;

TEST(MultimodalTest, Clip) {
  CheckClass("CLIPModel", {2, 2});
  CheckClass("CLIPTextModel", {2, 16, 64});
  CheckClass("CLIPVisionModel", {2, 17, 64});
  auto m = Build("CLIPModel");
  EXPECT_EQ(testing::WeightShape(*m, "logit_scale"), (std::vector<int64_t>{}));
  EXPECT_EQ(testing::WeightShape(*m, "visual_projection.weight"), (std::vector<int64_t>{32, 64}));
  auto w = m->InitWeights(1);
  auto batch = m->MakeBatch(1, 2);
  auto out = m->Forward(w, batch.inputs);
  // logits_per_image is the transpose of logits_per_text; embeddings are unit norm.
  EXPECT_TRUE(at::allclose(out[0], out[1].t()));
  EXPECT_TRUE(at::allclose(out[2].norm(2, -1), at::ones({2})));
  // The text tower is causal: a token after the pooled (eos) position does not change the output.
  auto t = Build("CLIPTextModel");
  auto tw = t->InitWeights(1);
  auto tb = t->MakeBatch(1, 2);
  at::Tensor p0 = t->Forward(tw, tb.inputs)[1];
  tb.inputs["input_ids"][1][15] = 3;  // row 1 is padded there
  at::Tensor p1 = t->Forward(tw, tb.inputs)[1];
  EXPECT_TRUE(at::allclose(p0, p1));
}

TEST(MultimodalTest, TowersListClipLayerWeightsInHfOrder) {
  auto m = Build("CLIPVisionModel");
  const auto shapes = m->WeightShapes();
  ASSERT_GE(shapes.size(), 6u);
  // transformers 5's CLIPVisionModel holds the tower's modules without "vision_model.".
  EXPECT_EQ(shapes[5].first, "encoder.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(shapes[9].first, "encoder.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(shapes.back().first, "post_layernorm.bias");
  // The class embedding is drawn with std 1/sqrt(hidden), not initializer_range.
  auto w = m->InitWeights(7);
  const double sd = w.at("embeddings.class_embedding").std().item<double>();
  EXPECT_GT(sd, 0.06);
  EXPECT_LT(sd, 0.25);
}

TEST(MultimodalTest, BadConfigsNameTheField) {
  auto cfg = *ExampleConfig("CLIPModel");
  cfg["text_config"]["num_attention_heads"] = 7;
  auto r = BuildModel(cfg, BuildOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("text_config.num_attention_heads"), std::string::npos)
      << r.status().message();
  cfg = *ExampleConfig("CLIPModel");
  cfg["vision_config"]["patch_size"] = 30;
  r = BuildModel(cfg, BuildOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("vision_config.patch_size"), std::string::npos);
}

// modeling_clip.py (transformers 5) CLIPForImageClassification: the vision tower of a CLIPConfig
// held as `vision_model`, logits = classifier(mean(last_hidden_state[:, 1:])), where
// last_hidden_state is the encoder's output (before post_layernorm, which only the pooled output
// reads).
TEST(MultimodalTest, ClipImageClassificationAveragesThePatchTokens) {
  auto m = Build("CLIPForImageClassification");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->spec().task, "image-classification");
  auto vision =
      testing::BuildSibling(*m, "CLIPVisionModel", m->spec().tiny_config["vision_config"]);
  ASSERT_TRUE(vision);
  const WeightMap w = m->InitWeights(3, at::kDouble);
  const WeightMap wv = testing::Unprefixed(w, "vision_model.");
  EXPECT_EQ(wv.size() + 2, w.size());  // + classifier.weight, classifier.bias
  Batch b = m->MakeBatch(1, 0);
  b.inputs["pixel_values"] = b.inputs.at("pixel_values").to(at::kDouble);
  const at::Tensor h = vision->Forward(wv, b.inputs)[0];
  const at::Tensor want = at::linear(h.narrow(1, 1, h.size(1) - 1).mean(1),
                                     w.at("classifier.weight"), w.at("classifier.bias"));
  EXPECT_LT((m->Forward(w, b.inputs)[0] - want).abs().max().item<double>(), 1e-10);
}

}  // namespace
}  // namespace ts::zoo
