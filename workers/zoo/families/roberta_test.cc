// Tests of the roberta family (families/roberta.cc).
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

TEST(RobertaTest, PositionsStartAfterPadding) {
  auto m = Build("RobertaModel");
  Batch b = m->MakeBatch(1, 2);
  auto w = m->InitWeights(1);
  at::Tensor base = m->Forward(w, b.inputs)[0];
  // Position row pad+1 (=2) is the first token's; rows 0 and 1 are unused (pad row is zero).
  WeightMap w2 = w;
  w2["embeddings.position_embeddings.weight"] =
      w.at("embeddings.position_embeddings.weight").clone();
  w2["embeddings.position_embeddings.weight"][0].add_(1.0);
  EXPECT_TRUE(at::equal(m->Forward(w2, b.inputs)[0], base));
  w2["embeddings.position_embeddings.weight"][2].add_(1.0);
  EXPECT_FALSE(at::equal(m->Forward(w2, b.inputs)[0], base));
  EXPECT_EQ(m->spec().tiny_config["touchstone_tiny"]["seq_len"], 32);
}

}  // namespace
}  // namespace ts::zoo
