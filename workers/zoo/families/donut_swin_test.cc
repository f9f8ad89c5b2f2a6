// donut-swin (families/donut_swin.cc) against modular_donut_swin.py: equal in double to the zoo's
// SwinModel (the family it derives from) with its weights under DonutSwin's names and without
// the final layernorm (LayerNorm(DonutSwin's states) = Swin's, the pooler the token mean of the
// un-normed states), the classifier on that pooler, and the persistent relative_position_index
// buffers with create_relative_position_index's values, written here from at:: ops.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;

// transformers 5 Swin's name for DonutSwin's `name` (4.x Swin's layout), or "" for a name Swin
// does not have.
std::string SwinName(std::string name) {
  // In order: attention.output.dense before the block's output.dense.
  static const std::vector<std::pair<std::string, std::string>> kRenames = {
      {"attention.self.query.", "attention.q_proj."},
      {"attention.self.key.", "attention.k_proj."},
      {"attention.self.value.", "attention.v_proj."},
      {"attention.output.dense.", "attention.o_proj."},
      {"attention.self.relative_position_bias_table",
       "attention.relative_position_bias.relative_position_bias_table"},
      {"intermediate.dense.", "mlp.fc1."},
      {".output.dense.", ".mlp.fc2."}};
  for (const auto& [from, to] : kRenames) {
    const size_t at = name.find(from);
    if (at != std::string::npos) return name.replace(at, from.size(), to);
  }
  return name;
}

// create_relative_position_index: meshgrid of the window's coordinates, pairwise differences
// shifted by ws - 1, the row offset times 2 ws - 1.
at::Tensor RelativePositionIndex(int64_t ws) {
  at::Tensor coords = at::stack(at::meshgrid({at::arange(ws), at::arange(ws)}, "ij"));
  at::Tensor flat = coords.flatten(1);
  at::Tensor rel = (flat.unsqueeze(2) - flat.unsqueeze(1)).permute({1, 2, 0}).contiguous();
  rel.select(2, 0).add_(ws - 1).mul_(2 * ws - 1);
  rel.select(2, 1).add_(ws - 1);
  return rel.sum(-1);
}

TEST(DonutSwinTest, SwinWithoutTheFinalNormUnderItsOwnNames) {
  auto donut = testing::Build("DonutSwinModel");
  ASSERT_TRUE(donut);
  EXPECT_EQ(donut->spec().task, "feature-extraction");
  const json& c = donut->spec().tiny_config;
  EXPECT_TRUE(testing::HasWeight(*donut, "encoder.layers.0.blocks.1.attention.self.query.weight"));
  EXPECT_TRUE(testing::HasWeight(
      *donut, "encoder.layers.0.blocks.0.attention.self.relative_position_bias_table"));
  EXPECT_TRUE(testing::HasWeight(*donut, "encoder.layers.1.blocks.0.output.dense.weight"));
  EXPECT_FALSE(testing::HasWeight(*donut, "layernorm.weight"));
  EXPECT_FALSE(testing::HasWeight(*donut, "encoder.layers.0.blocks.0.attention.q_proj.weight"));

  json swin_cfg = c;
  swin_cfg["model_type"] = "swin";
  swin_cfg["architectures"] = {"SwinModel"};
  auto swin = testing::BuildFull(swin_cfg);
  ASSERT_TRUE(swin);
  WeightMap w = donut->InitWeights(11, at::kDouble);
  WeightMap sw = swin->InitWeights(12, at::kDouble);  // its final layernorm stays its own
  size_t mapped = 0;
  for (const auto& [name, t] : w) {
    const std::string s = SwinName(name);
    ASSERT_TRUE(sw.count(s)) << name << " -> " << s;
    sw[s] = t;
    ++mapped;
  }
  EXPECT_EQ(mapped + 2, sw.size());  // all but layernorm.{weight,bias}
  Batch b = donut->MakeBatch(5, 2);
  b.inputs["pixel_values"] = b.inputs.at("pixel_values").to(at::kDouble);
  std::vector<at::Tensor> got = donut->Forward(w, b.inputs);
  std::vector<at::Tensor> want = swin->Forward(sw, b.inputs);
  ASSERT_EQ(got.size(), 2u);
  const at::Tensor normed =
      at::layer_norm(got[0], {got[0].size(-1)}, sw.at("layernorm.weight"), sw.at("layernorm.bias"),
                     c.value("layer_norm_eps", 1e-5));
  EXPECT_LT(testing::RelDiff(normed, want[0]), 1e-10);
  EXPECT_LT(testing::RelDiff(got[1], got[0].mean(1)), 1e-12);  // AdaptiveAvgPool1d(1), flattened
  EXPECT_GT(testing::RelDiff(got[0], want[0]), 1e-3);          // the norm is really absent

  // DonutSwinForImageClassification: `classifier` on the pooler of the model under `donut.`.
  auto cls = testing::Build("DonutSwinForImageClassification");
  ASSERT_TRUE(cls);
  WeightMap wc = cls->InitWeights(13, at::kDouble);
  WeightMap base;
  for (const auto& [name, t] : wc) {
    if (name.rfind("donut.", 0) == 0) base[name.substr(6)] = t;
  }
  EXPECT_EQ(base.size(), w.size());
  const at::Tensor logits = at::linear(donut->Forward(base, b.inputs)[1],
                                       wc.at("classifier.weight"), wc.at("classifier.bias"));
  EXPECT_LT(testing::RelDiff(cls->Forward(wc, b.inputs)[0], logits), 1e-10);
}

TEST(DonutSwinTest, RelativePositionIndexIsAPersistentBuffer) {
  auto donut = testing::Build("DonutSwinForImageClassification");
  ASSERT_TRUE(donut);
  const int64_t ws = donut->spec().tiny_config.at("window_size").get<int64_t>();
  const at::Tensor want = RelativePositionIndex(ws);
  int found = 0;
  for (const StateDictEntry& e : StateDictShapes(*donut)) {
    if (e.name.find("relative_position_index") == std::string::npos) continue;
    ++found;
    EXPECT_EQ(e.name.rfind("donut.encoder.layers.", 0), 0u) << e.name;
    EXPECT_EQ(e.dtype, at::kLong);
    ASSERT_EQ(e.shape, (std::vector<int64_t>{ws * ws, ws * ws}));
    const at::Tensor got = at::tensor(e.values, at::kDouble).view({ws * ws, ws * ws});
    EXPECT_TRUE(at::equal(got, want.to(at::kDouble))) << e.name;
  }
  int blocks = 0;
  for (const auto& d : donut->spec().tiny_config.at("depths")) blocks += d.get<int>();
  EXPECT_EQ(found, blocks);
}

}  // namespace
}  // namespace ts::zoo
