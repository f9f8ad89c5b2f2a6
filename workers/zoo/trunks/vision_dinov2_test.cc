// DINOv2 and DINOv2-with-registers against a reference written from modular_dinov2.py and
// modular_dinov2_with_registers.py in double (not from the zoo's trunk).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/trunks/vision_formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::Lin;
using testing::Ln;

// Dinov2Model's sequence_output for config `c` (registers from num_register_tokens).
at::Tensor RefDinov2(const WeightMap& w, const std::string& pre, const json& c,
                     const at::Tensor& pixels) {
  const int64_t h = c.at("hidden_size"), heads = c.at("num_attention_heads");
  const int64_t p = c.at("patch_size"), regs = c.value("num_register_tokens", int64_t{0});
  const double eps = c.value("layer_norm_eps", 1e-6);
  const bool swiglu = c.value("use_swiglu_ffn", false);
  const int64_t b = pixels.size(0);
  at::Tensor x = at::conv2d(pixels, w.at(pre + "embeddings.patch_embeddings.projection.weight"),
                            w.at(pre + "embeddings.patch_embeddings.projection.bias"), p)
                     .flatten(2)
                     .transpose(1, 2);
  x = at::cat({w.at(pre + "embeddings.cls_token").expand({b, 1, h}), x}, 1) +
      w.at(pre + "embeddings.position_embeddings");
  if (regs > 0) {
    x = at::cat({x.narrow(1, 0, 1), w.at(pre + "embeddings.register_tokens").expand({b, regs, h}),
                 x.narrow(1, 1, x.size(1) - 1)},
                1);
  }
  const int64_t s = x.size(1), hd = h / heads;
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string l = pre + "encoder.layer." + std::to_string(i) + ".";
    at::Tensor y = Ln(w, l + "norm1", x, eps);
    auto split = [&](const char* m) {
      return Lin(w, l + "attention." + m, y).view({b, s, heads, hd}).transpose(1, 2);
    };
    at::Tensor probs = at::softmax(
        at::matmul(split("q_proj"), split("k_proj").transpose(-1, -2)) / std::sqrt(1.0 * hd), -1);
    at::Tensor a = Lin(w, l + "attention.o_proj",
                       at::matmul(probs, split("v_proj")).transpose(1, 2).reshape({b, s, h}));
    x = x + a * w.at(l + "layer_scale1.lambda1");
    y = Ln(w, l + "norm2", x, eps);
    at::Tensor m =
        swiglu ? Lin(w, l + "mlp.down_proj",
                     at::silu(Lin(w, l + "mlp.gate_proj", y)) * Lin(w, l + "mlp.up_proj", y))
               : Lin(w, l + "mlp.fc2", at::gelu(Lin(w, l + "mlp.fc1", y)));
    x = x + m * w.at(l + "layer_scale2.lambda1");
  }
  return Ln(w, pre + "layernorm", x, eps);
}

using testing::Ran;

TEST(Dinov2Test, ModelClassifierAndBackboneAsTransformers) {
  for (const char* family : {"Dinov2", "Dinov2WithRegisters"}) {
    SCOPED_TRACE(family);
    const std::string f = family;
    const std::string base = f == "Dinov2" ? "dinov2." : "dinov2_with_registers.";
    Ran model = testing::RunClass(f + "Model");
    ASSERT_TRUE(model.m);
    const json& c = model.m->spec().tiny_config;
    const at::Tensor seq = RefDinov2(model.w, "", c, model.pixels);
    EXPECT_LT(testing::MaxAbs(model.out[0], seq), 1e-10);
    EXPECT_LT(testing::MaxAbs(model.out[1], seq.select(1, 0)), 1e-10);  // pooler: token 0
    const int64_t regs = c.value("num_register_tokens", int64_t{0});
    EXPECT_EQ(regs, f == "Dinov2" ? 0 : 4);

    Ran cls = testing::RunClass(f + "ForImageClassification");
    ASSERT_TRUE(cls.m);
    const at::Tensor s2 = RefDinov2(cls.w, base, cls.m->spec().tiny_config, cls.pixels);
    const at::Tensor feats =
        at::cat({s2.select(1, 0), s2.narrow(1, 1 + regs, s2.size(1) - 1 - regs).mean(1)}, -1);
    EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", feats)), 1e-10);

    Ran bb = testing::RunClass(f + "Backbone");
    ASSERT_TRUE(bb.m);
    EXPECT_EQ(bb.m->spec().task, "backbone");
    const at::Tensor s3 = RefDinov2(bb.w, "", bb.m->spec().tiny_config, bb.pixels);
    const int64_t grid = 32 / 8;
    const at::Tensor map = s3.narrow(1, 1 + regs, grid * grid)
                               .reshape({2, grid, grid, s3.size(2)})
                               .permute({0, 3, 1, 2});
    EXPECT_LT(testing::MaxAbs(bb.out[0], map), 1e-10);
    // mask_token is in the state_dict, not among the weights the forward reads.
    bool mask = false;
    for (const auto& e : StateDictShapes(*bb.m)) mask = mask || e.name == "embeddings.mask_token";
    EXPECT_TRUE(mask);
    EXPECT_FALSE(testing::HasWeight(*bb.m, "embeddings.mask_token"));
  }
  testing::ExpectConfigError("Dinov2Backbone", "out_features", json{"stage2", "stage12"},
                             "out_features");
}

TEST(Dinov2Test, SwiGluFeedForwardAsTransformers) {
  json cfg = *ExampleConfig("Dinov2Model");
  cfg["use_swiglu_ffn"] = true;
  Ran r = testing::RunClass("Dinov2Model", cfg);
  ASSERT_TRUE(r.m);
  // (int(64 * 4 * 2 / 3) + 7) // 8 * 8 = 176
  EXPECT_EQ(testing::WeightShape(*r.m, "encoder.layer.0.mlp.gate_proj.weight"),
            (std::vector<int64_t>{176, 64}));
  EXPECT_LT(testing::MaxAbs(r.out[0], RefDinov2(r.w, "", r.m->spec().tiny_config, r.pixels)),
            1e-10);
}

}  // namespace
}  // namespace ts::zoo
