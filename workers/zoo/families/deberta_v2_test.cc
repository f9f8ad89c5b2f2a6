// Tests of the deberta-v2 family (families/deberta_v2.cc).
#include <gtest/gtest.h>

#include <cmath>
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

// transformers' DisentangledSelfAttention.forward: scale_factor = 1 + ("c2p" in pos_att_type) +
// ("p2c" in pos_att_type) and scores = q k^T / sqrt(head_dim * scale_factor), whether or not
// relative_attention adds the c2p / p2c terms (transformers/models/deberta_v2/
// modeling_deberta_v2.py). With relative_attention false, one layer, attention.output.dense = I
// and output.dense = 0, DebertaV2Model is LN(LN(attn(e) + e)) with e = LN(word + position).
TEST(DebertaV2Test, PosAttTypeScalesScoresEvenWithoutRelativeAttention) {
  const nlohmann::json cfg = {{"architectures", {"DebertaV2Model"}},
                              {"model_type", "deberta-v2"},
                              {"vocab_size", 16},
                              {"hidden_size", 8},
                              {"num_attention_heads", 2},
                              {"intermediate_size", 8},
                              {"num_hidden_layers", 1},
                              {"max_position_embeddings", 16},
                              {"type_vocab_size", 0},
                              {"layer_norm_eps", 1e-7},
                              {"relative_attention", false},
                              {"pos_att_type", "p2c|c2p"}};
  BuildOptions o;
  o.tiny = false;
  auto m = BuildModel(cfg, o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  WeightMap w = (*m)->InitWeights(9, at::kDouble);
  const std::string lp = "encoder.layer.0.";
  for (auto& [name, t] : w) {
    if (name.find("LayerNorm.weight") != std::string::npos) t = at::ones_like(t);
    if (name.find("LayerNorm.bias") != std::string::npos) t = at::zeros_like(t);
  }
  w[lp + "attention.output.dense.weight"] = at::eye(8, at::kDouble);
  w[lp + "attention.output.dense.bias"].zero_();
  w[lp + "output.dense.weight"].zero_();
  w[lp + "output.dense.bias"].zero_();
  const int64_t s = 6;
  const at::Tensor ids = at::arange(1, 1 + s, at::kLong);
  auto ln = [](const at::Tensor& x) {
    return at::layer_norm(x, {8}, at::Tensor(), at::Tensor(), 1e-7);
  };
  const at::Tensor e = ln(w.at("embeddings.word_embeddings.weight").index_select(0, ids) +
                          w.at("embeddings.position_embeddings.weight").narrow(0, 0, s));
  auto proj = [&](const char* n) {
    const std::string p = lp + "attention.self." + n;
    return at::linear(e, w.at(p + ".weight"), w.at(p + ".bias")).view({s, 2, 4}).transpose(0, 1);
  };
  const at::Tensor q = proj("query_proj"), k = proj("key_proj"), v = proj("value_proj");
  auto forward = [&](double scale_factor) {
    const at::Tensor p = at::softmax(at::matmul(q, k.transpose(-1, -2)) /
                                         std::sqrt(4.0 * scale_factor), -1);
    return ln(ln(at::matmul(p, v).transpose(0, 1).reshape({s, 8}) + e));
  };
  const at::Tensor want = forward(3.0);
  ASSERT_GT((want - forward(1.0)).abs().max().item<double>(), 1e-4);
  const at::Tensor ids2 = ids.view({1, s});
  const TensorMap in = {{"input_ids", ids2}, {"attention_mask", at::ones_like(ids2)}};
  const at::Tensor got = (*m)->Forward(w, in)[0][0];
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-9);
  EXPECT_FALSE(HasWeight(**m, "encoder.rel_embeddings.weight"));
}

}  // namespace
}  // namespace ts::zoo
