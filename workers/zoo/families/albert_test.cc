// Tests of the albert family (families/albert.cc).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using testing::Build;
using testing::HasWeight;
using testing::RelDiff;

TEST(AlbertTest, SharesOneLayerAcrossDepth) {
  auto m = Build("AlbertModel");
  std::set<std::string> layer_weights;
  for (const auto& [n, s] : m->WeightShapes()) {
    if (n.find("albert_layer_groups") != std::string::npos) layer_weights.insert(n);
  }
  EXPECT_EQ(m->spec().tiny_config["num_hidden_layers"], 2);
  EXPECT_TRUE(layer_weights.count("encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"));
  for (const auto& n : layer_weights)
    EXPECT_NE(n.find("groups.0.albert_layers.0."), std::string::npos) << n;
  EXPECT_EQ(m->WeightShapes()[0].second, (std::vector<int64_t>{512, 11}));  // E = 128/768 * 64
  // Depth matters although weights are shared: 1 layer differs from 2.
  auto cfg = *ExampleConfig("AlbertModel");
  cfg["num_hidden_layers"] = 1;
  auto one = Build("AlbertModel", cfg);
  Batch b = m->MakeBatch(2, 2);
  auto w = m->InitWeights(3);
  EXPECT_GT(RelDiff(one->Forward(w, b.inputs)[0], m->Forward(w, b.inputs)[0]), 1e-3);
}

}  // namespace
}  // namespace ts::zoo
