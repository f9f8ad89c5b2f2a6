// BEiT and data2vec-vision against a reference written in double from transformers 5's
// modular_beit.py (not from the zoo's trunk): layer scale, the relative position bias with the
// cls token's three extra distances, mean pooling through pooler.layernorm.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::Lin;
using testing::Ln;

// BeitRelativePositionBias.generate_relative_position_index, with meshgrid as transformers.
at::Tensor RefIndex(int64_t g) {
  const int64_t distances = (2 * g - 1) * (2 * g - 1) + 3, area = g * g;
  auto grid = at::meshgrid({at::arange(g), at::arange(g)}, "ij");
  at::Tensor coords = at::stack(grid).flatten(1);  // 2, area
  at::Tensor rel = (coords.unsqueeze(2) - coords.unsqueeze(1)).permute({1, 2, 0}).contiguous();
  rel.select(2, 0).add_(g - 1);
  rel.select(2, 1).add_(g - 1);
  rel.select(2, 0).mul_(2 * g - 1);
  at::Tensor index = at::zeros({area + 1, area + 1}, rel.options());
  index.slice(0, 1).slice(1, 1).copy_(rel.sum(-1));
  index.select(0, 0).fill_(distances - 3);
  index.select(1, 0).fill_(distances - 2);
  index[0][0].fill_(distances - 1);
  return index;
}

// BeitModel's (last_hidden_state, pooler_output).
std::pair<at::Tensor, at::Tensor> RefBeit(const WeightMap& w, const std::string& pre, const json& c,
                                          const at::Tensor& px) {
  const int64_t h = c.at("hidden_size"), p = c.at("patch_size"),
                heads = c.at("num_attention_heads");
  const int64_t g = c.at("image_size").get<int64_t>() / p, b = px.size(0), hd = h / heads;
  const double eps = c.at("layer_norm_eps");
  at::Tensor x = at::conv2d(px, w.at(pre + "embeddings.patch_embeddings.projection.weight"),
                            w.at(pre + "embeddings.patch_embeddings.projection.bias"), p)
                     .flatten(2)
                     .transpose(1, 2);
  x = at::cat({w.at(pre + "embeddings.cls_token").expand({b, -1, -1}), x}, 1);
  const int64_t s = x.size(1), side = 2 * g - 1;
  const at::Tensor index = RefIndex(g);
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string l = pre + "encoder.layer." + std::to_string(i) + ".";
    const at::Tensor& table = w.at(l + "relative_position_bias.relative_position_bias_table");
    at::Tensor sub =
        table.slice(0, 0, side * side).reshape({1, side, side, -1}).permute({0, 3, 1, 2});
    sub = at::upsample_bilinear2d(sub, {side, side}, false)
              .permute({0, 2, 3, 1})
              .reshape({side * side, -1});
    at::Tensor full = at::cat({sub, table.slice(0, side * side)});
    at::Tensor bias = full.index({index.view(-1)}).view({s, s, -1}).permute({2, 0, 1}).unsqueeze(0);
    at::Tensor y = Ln(w, l + "layernorm_before", x, eps);
    auto split = [&](const at::Tensor& t) { return t.view({b, s, heads, hd}).transpose(1, 2); };
    at::Tensor q = split(Lin(w, l + "attention.q_proj", y));
    at::Tensor k = split(at::linear(y, w.at(l + "attention.k_proj.weight")));
    at::Tensor v = split(Lin(w, l + "attention.v_proj", y));
    at::Tensor att = at::matmul(q, k.transpose(2, 3)) * std::pow(hd, -0.5) + bias;
    at::Tensor ctx = at::matmul(at::softmax(att, -1), v).transpose(1, 2).reshape({b, s, h});
    x = w.at(l + "lambda_1") * Lin(w, l + "attention.o_proj", ctx) + x;
    y = Lin(w, l + "mlp.fc2",
            at::gelu(Lin(w, l + "mlp.fc1", Ln(w, l + "layernorm_after", x, eps))));
    x = w.at(l + "lambda_2") * y + x;
  }
  // use_mean_pooling: layernorm is Identity; BeitPooler norms the patch tokens' mean (none in
  // BeitBackbone's BeitModel).
  if (!w.count(pre + "pooler.layernorm.weight")) return {x, at::Tensor()};
  return {x, Ln(w, pre + "pooler.layernorm", x.slice(1, 1).mean(1), eps)};
}

TEST(BeitTest, ModelAndClassifierAsTransformersForBeitAndData2VecVision) {
  for (const std::string family : {"Beit", "Data2VecVision"}) {
    SCOPED_TRACE(family);
    const std::string base = family == "Beit" ? "beit." : "data2vec_vision.";
    auto m = testing::Build(family + "Model");
    ASSERT_TRUE(m);
    WeightMap w = m->InitWeights(9, at::kDouble);
    at::Tensor px = m->MakeBatch(4, 2).inputs.at("pixel_values").to(at::kDouble);
    auto out = m->Forward(w, {{"pixel_values", px}});
    auto [seq, pooled] = RefBeit(w, "", m->spec().tiny_config, px);
    EXPECT_LT(testing::MaxAbs(out[0], seq), 1e-10);
    EXPECT_LT(testing::MaxAbs(out[1], pooled), 1e-10);
    // lambda_1 starts away from 1 (U(0.5, 1.5)): a scale on the wrong branch shows.
    EXPECT_GT((w.at("encoder.layer.0.lambda_1") - 1.0).abs().max().item<double>(), 0.05);

    auto c = testing::Build(family + "ForImageClassification");
    ASSERT_TRUE(c);
    WeightMap cw = c->InitWeights(9, at::kDouble);
    at::Tensor cpx = c->MakeBatch(4, 2).inputs.at("pixel_values").to(at::kDouble);
    auto [cseq, cpooled] = RefBeit(cw, base, c->spec().tiny_config, cpx);
    EXPECT_LT(
        testing::MaxAbs(c->Forward(cw, {{"pixel_values", cpx}})[0], Lin(cw, "classifier", cpooled)),
        1e-10);
  }
}

TEST(BeitTest, BackboneIsTheLastLayersPatchTokensAsAMap) {
  auto m = testing::Build("BeitBackbone");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->spec().task, "backbone");
  WeightMap w = m->InitWeights(9, at::kDouble);
  at::Tensor px = m->MakeBatch(4, 2).inputs.at("pixel_values").to(at::kDouble);
  // BeitBackbone.encoder is a BeitModel: encoder.embeddings, encoder.encoder.layer.N.
  const json& c = m->spec().tiny_config;
  at::Tensor seq = RefBeit(w, "encoder.", c, px).first;
  const int64_t g = c.at("image_size").get<int64_t>() / c.at("patch_size").get<int64_t>();
  at::Tensor map = seq.slice(1, 1).permute({0, 2, 1}).reshape({2, -1, g, g});
  EXPECT_LT(testing::MaxAbs(m->Forward(w, {{"pixel_values", px}})[0], map), 1e-10);
  // Without mean pooling BeitModel builds a final layernorm the backbone never calls: in the
  // state_dict, not among the weights.
  json no_mean = *ExampleConfig("BeitBackbone");
  no_mean["use_mean_pooling"] = false;
  auto nm = testing::Build("BeitBackbone", no_mean);
  ASSERT_TRUE(nm);
  bool norm = false;
  for (const auto& e : StateDictShapes(*nm)) norm = norm || e.name == "encoder.layernorm.weight";
  EXPECT_TRUE(norm);
  EXPECT_FALSE(testing::HasWeight(*nm, "encoder.layernorm.weight"));
  testing::ExpectConfigError("BeitBackbone", "add_fpn", true, "add_fpn");
  testing::ExpectConfigError("BeitBackbone", "out_features", json{"stage3"}, "out_features");
}

}  // namespace
}  // namespace ts::zoo
