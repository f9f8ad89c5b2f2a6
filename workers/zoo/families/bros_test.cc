// BROS against modeling_bros.py: two layers in double, the expected values computed here from
// that file's formulas in its own layout (calculate_bbox_pos_emb over bbox.transpose(0, 1), the
// [S, S, B, d] view permuted to [B, S, d, S] and matmul'd with the query), not from the zoo's
// stack.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using testing::BuildFull;
using testing::ExpectConfigError;
using testing::HalfTypes;
using testing::Kept;
using testing::MaxAbs;
using testing::PaddedInputs;
using testing::WrittenOutRef;

constexpr int64_t kSeq = 5, kHid = 64, kHeads = 2, kBatch = 2;
constexpr double kEps = 1e-12;  // BrosConfig.layer_norm_eps

nlohmann::json BrosSmall(const std::string& arch) {
  return {{"architectures", {arch}}, {"model_type", "bros"},
          {"hidden_size", kHid},     {"num_attention_heads", kHeads},
          {"intermediate_size", 24}, {"num_hidden_layers", 2},
          {"vocab_size", 40},        {"max_position_embeddings", 16},
          {"type_vocab_size", 2},    {"pad_token_id", 0},
          {"hidden_act", "gelu"},    {"bbox_scale", 100.0}};
}

// BrosEmbeddings.calculate_bbox_pos_emb with BrosPositionalEmbedding2D: [S, S, B, head size].
at::Tensor BoxPosEmb(const WrittenOutRef& r, const at::Tensor& bbox4) {
  const at::Tensor idx = at::tensor(std::vector<int64_t>{0, 1, 2, 1, 2, 3, 0, 3});
  const at::Tensor bbox = bbox4.index_select(-1, idx) * 100.0;
  const at::Tensor bt = bbox.transpose(0, 1);                // [S, B, 8]
  const at::Tensor pos = bt.unsqueeze(0) - bt.unsqueeze(1);  // [S, S, B, 8]
  const int64_t d1 = kHid / 4 / 8;
  // 1 / (10000 ** (arange(0.0, d1, 2.0) / d1)), a float32 buffer.
  const at::Tensor inv =
      (1.0 / at::pow(10000.0, at::arange(0.0, double(d1), 2.0, at::kFloat) / double(d1)))
          .to(at::kDouble);
  std::vector<at::Tensor> stack;
  for (int64_t i = 0; i < 8; ++i) {
    const at::Tensor in = pos.select(-1, i).unsqueeze(-1) * inv.view({1, 1, 1, -1});
    stack.push_back(at::cat({in.sin(), in.cos()}, -1));
  }
  return at::matmul(at::cat(stack, -1), r.w.at("embeddings.bbox_projection.weight").t());
}

at::Tensor LayerRef(const WrittenOutRef& r, const std::string& l, const at::Tensor& x,
                    const at::Tensor& box_emb, const at::Tensor& ext) {
  const int64_t d = kHid / kHeads;
  auto split = [&](const at::Tensor& t) {
    return t.view({kBatch, kSeq, kHeads, d}).permute({0, 2, 1, 3});
  };
  const at::Tensor q = split(r.Lin(x, l + "attention.self.query"));
  const at::Tensor k = split(r.Lin(x, l + "attention.self.key"));
  const at::Tensor v = split(r.Lin(x, l + "attention.self.value"));
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2));
  const at::Tensor be = box_emb.view({kSeq, kSeq, kBatch, d}).permute({2, 0, 3, 1});
  scores = scores + at::matmul(q.unsqueeze(3), be.unsqueeze(1)).squeeze(3);
  scores = scores / std::sqrt(double(d)) + ext;
  const at::Tensor ctx =
      at::matmul(at::softmax(scores, -1), v).permute({0, 2, 1, 3}).reshape({kBatch, kSeq, kHid});
  const at::Tensor a =
      r.Ln(r.Lin(ctx, l + "attention.output.dense") + x, l + "attention.output.LayerNorm", kEps);
  return r.Ln(
      r.Lin(WrittenOutRef::Gelu(r.Lin(a, l + "intermediate.dense")), l + "output.dense") + a,
      l + "output.LayerNorm", kEps);
}

TEST(BrosTest, LayersAsTransformers) {
  auto m = BuildFull(BrosSmall("BrosModel"));
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(23, at::kDouble);
  at::Tensor ids, mask;
  PaddedInputs(40, 0, kSeq, ids, mask);
  const at::Tensor types = HalfTypes(kSeq);
  const at::Tensor g = at::arange(kBatch * kSeq * 2, at::kDouble).view({kBatch, kSeq, 2});
  const at::Tensor lo = (g * 0.137).remainder(0.5);
  const at::Tensor bbox = at::cat({lo, lo + (g * 0.071).remainder(0.4)}, -1);
  const auto out = m->Forward(
      w, {{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}, {"bbox", bbox}});
  const WrittenOutRef r{w};
  at::Tensor x = r.Emb("embeddings.word_embeddings.weight", ids) +
                 r.Emb("embeddings.token_type_embeddings.weight", types);
  x = x + r.Emb("embeddings.position_embeddings.weight",
                at::arange(kSeq, at::kLong).unsqueeze(0).expand({kBatch, kSeq}));
  x = r.Ln(x, "embeddings.LayerNorm", kEps);
  const at::Tensor box = BoxPosEmb(r, bbox);
  const at::Tensor ext = (1.0 - mask.to(at::kDouble)).view({kBatch, 1, 1, kSeq}) *
                         std::numeric_limits<double>::lowest();
  for (int i = 0; i < 2; ++i)
    x = LayerRef(r, "encoder.layer." + std::to_string(i) + ".", x, box, ext);
  EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(x, mask)), 1e-10);
  EXPECT_LT(MaxAbs(out[1], at::tanh(r.Lin(x.select(1, 0), "pooler.dense"))), 1e-10);
  // The box term is not a no-op: other boxes give other states.
  const auto moved = m->Forward(w, {{"input_ids", ids},
                                    {"attention_mask", mask},
                                    {"token_type_ids", types},
                                    {"bbox", bbox.flip(1)}});
  EXPECT_GT(MaxAbs(Kept(moved[0], mask), Kept(x, mask)), 1e-3);
}

TEST(BrosTest, TokenClassificationAndStateDict) {
  auto m = BuildFull(BrosSmall("BrosForTokenClassification"));
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(5, at::kDouble);
  Batch b = m->MakeBatch(3, 2);
  const at::Tensor& bbox = b.inputs.at("bbox");
  EXPECT_EQ(bbox.scalar_type(), at::kFloat);
  EXPECT_GE(bbox.min().item<double>(), 0.0);
  EXPECT_LE(bbox.max().item<double>(), 1.0);
  EXPECT_TRUE(bbox.select(-1, 2).ge(bbox.select(-1, 0)).all().item<bool>());
  EXPECT_TRUE(bbox.select(-1, 3).ge(bbox.select(-1, 1)).all().item<bool>());
  const auto out = m->Forward(w, b.inputs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, b.inputs.at("input_ids").size(1), 2}));
  std::set<std::string> names;
  for (const auto& e : StateDictShapes(*m)) {
    names.insert(e.name);
    if (e.name == "bros.embeddings.bbox_sinusoid_emb.x_pos_emb.inv_freq") {
      ASSERT_EQ(e.values.size(), 1u);  // d1 = 64 / 4 / 8 = 2: arange(0, 2, 2)
      EXPECT_EQ(e.values[0], 1.0);
    }
  }
  for (const char* n : {"bros.embeddings.bbox_sinusoid_emb.x_pos_emb.inv_freq",
                        "bros.embeddings.bbox_sinusoid_emb.y_pos_emb.inv_freq",
                        "bros.embeddings.bbox_projection.weight", "bros.pooler.dense.weight",
                        "bros.pooler.dense.bias", "classifier.weight"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(BrosTest, RefusesWhatItDoesNotSupport) {
  ExpectConfigError("BrosModel", "dim_bbox", 4, "dim_bbox");
  ExpectConfigError("BrosModel", "hidden_size", 96, "hidden_size");
  ExpectConfigError("BrosModel", "position_embedding_type", "relative_key",
                    "position_embedding_type");
}

}  // namespace
}  // namespace ts::zoo
