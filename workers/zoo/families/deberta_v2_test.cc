// Tests of the deberta-v2 family (families/deberta_v2.cc).
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

TEST(DebertaV2Test, RelativeAttentionUsesBucketsAndRelEmbeddings) {
  auto m = Build("DebertaV2ForSequenceClassification");
  const auto& tc = m->spec().tiny_config;
  EXPECT_EQ(tc["position_buckets"], 32);
  EXPECT_TRUE(HasWeight(*m, "deberta.encoder.rel_embeddings.weight"));
  EXPECT_TRUE(HasWeight(*m, "deberta.encoder.LayerNorm.weight"));
  EXPECT_FALSE(HasWeight(*m, "deberta.embeddings.position_embeddings.weight"));
  EXPECT_FALSE(HasWeight(*m, "deberta.encoder.layer.0.attention.self.pos_key_proj.weight"));
  Batch b = m->MakeBatch(1, 2);
  auto w = m->InitWeights(1);
  at::Tensor base = m->Forward(w, b.inputs)[0];
  WeightMap w2 = w;
  // Reversed rows (the LayerNorm over rel_embeddings makes pure rescaling invisible).
  w2["deberta.encoder.rel_embeddings.weight"] =
      w.at("deberta.encoder.rel_embeddings.weight").flip({0});
  EXPECT_GT(RelDiff(m->Forward(w2, b.inputs)[0], base), 1e-4);
  auto cfg = *ExampleConfig("DebertaV2Model");
  cfg["share_att_key"] = false;
  auto ns = Build("DebertaV2Model", cfg);
  EXPECT_TRUE(HasWeight(*ns, "encoder.layer.0.attention.self.pos_key_proj.weight"));
  EXPECT_TRUE(HasWeight(*ns, "encoder.layer.0.attention.self.pos_query_proj.bias"));
  Batch nb = ns->MakeBatch(1, 2);
  EXPECT_TRUE(at::isfinite(ns->Forward(ns->InitWeights(1), nb.inputs)[0]).all().item<bool>());
}

}  // namespace
}  // namespace ts::zoo
