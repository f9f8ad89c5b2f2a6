// Tests for multimodal.cc (see README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"

namespace ts::zoo {
namespace {

std::unique_ptr<Model> Build(const std::string& arch) {
  auto cfg = ExampleConfig(arch);
  EXPECT_TRUE(cfg.ok()) << arch;
  auto m = BuildModel(*cfg, BuildOptions());
  EXPECT_TRUE(m.ok()) << arch << ": " << m.status().ToString();
  return std::move(*m);
}

std::vector<int64_t> Shape(const Model& m, const std::string& name) {
  for (const auto& [n, s] : m.WeightShapes()) {
    if (n == name) return s;
  }
  return {};
}

// Forward shapes, determinism, fp64 vs fp32 agreement and a finite loss with gradients.
void CheckCommon(const std::string& arch, std::vector<int64_t> out_shape) {
  SCOPED_TRACE(arch);
  auto m = Build(arch);
  ASSERT_TRUE(m);
  auto w = m->InitWeights(3);
  auto batch = m->MakeBatch(3, 2);
  auto out = m->Forward(w, batch.inputs);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].sizes().vec(), out_shape);
  EXPECT_TRUE(at::isfinite(out[0]).all().item<bool>());
  EXPECT_TRUE(at::equal(out[0], m->Forward(w, batch.inputs)[0]));
  WeightMap w64;
  for (const auto& [k, v] : w) w64[k] = v.to(at::kDouble);
  TensorMap in64;
  for (const auto& [k, v] : batch.inputs) in64[k] = at::isFloatingType(v.scalar_type()) ? v.to(at::kDouble) : v;
  at::Tensor o64 = m->Forward(w64, in64)[0];
  EXPECT_EQ(o64.scalar_type(), at::kDouble);
  const double scale = out[0].abs().max().item<double>() + 1e-6;
  EXPECT_LT((o64.to(at::kFloat) - out[0]).abs().max().item<double>() / scale, 1e-4);
  for (auto& [k, v] : w) v.requires_grad_(true);
  at::Tensor loss = m->Loss(w, batch);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  // Under emulation the model still runs (grouped convs round too).
  {
    at::NoGradGuard ng;
    ScopedBf16MatmulEmulation emu;
    at::Tensor e = m->Forward(w, batch.inputs)[0];
    EXPECT_TRUE(at::isfinite(e).all().item<bool>());
  }
}

TEST(MultimodalTest, Clip) {
  CheckCommon("CLIPModel", {2, 2});
  CheckCommon("CLIPTextModel", {2, 16, 64});
  CheckCommon("CLIPVisionModel", {2, 17, 64});
  auto m = Build("CLIPModel");
  EXPECT_EQ(Shape(*m, "logit_scale"), (std::vector<int64_t>{}));
  EXPECT_EQ(Shape(*m, "visual_projection.weight"), (std::vector<int64_t>{32, 64}));
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

}  // namespace
}  // namespace ts::zoo
