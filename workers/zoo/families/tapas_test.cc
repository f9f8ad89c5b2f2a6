// TAPAS against modeling_tapas.py: TapasEmbeddings (the per-cell position reset as
// reduce_min / gather over the (column, row) segments of each batch row, written here as loops)
// and one BERT layer in double, expected values computed here from that file's formulas, not from
// the zoo's stack.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using testing::BuildFull;
using testing::ExpectConfigError;
using testing::Kept;
using testing::MaxAbs;
using testing::WrittenOutRef;

constexpr int64_t kSeq = 9, kHid = 16, kHeads = 2, kBatch = 2, kMaxPos = 6;
constexpr double kEps = 1e-12;  // TapasConfig.layer_norm_eps

nlohmann::json TapasSmall(const std::string& arch, bool reset) {
  return {{"architectures", {arch}},
          {"model_type", "tapas"},
          {"hidden_size", kHid},
          {"num_attention_heads", kHeads},
          {"intermediate_size", 24},
          {"num_hidden_layers", 1},
          {"vocab_size", 40},
          {"max_position_embeddings", reset ? kMaxPos : 16},
          {"type_vocab_sizes", {3, 5, 6, 2, 7, 7, 10}},
          {"pad_token_id", 0},
          {"hidden_act", "gelu"},
          {"reset_position_index_per_cell", reset}};
}

// reduce_min(position_ids, ProductIndexMap(col, row)) then gather, per batch row.
at::Tensor CellPositions(const at::Tensor& types) {
  at::Tensor pos = at::zeros({kBatch, kSeq}, at::kLong);
  for (int64_t b = 0; b < kBatch; ++b) {
    std::vector<int64_t> first(5 * 6, std::numeric_limits<int64_t>::max());
    for (int64_t t = 0; t < kSeq; ++t) {
      const int64_t seg = types[b][t][1].item<int64_t>() * 6 + types[b][t][2].item<int64_t>();
      first[seg] = std::min(first[seg], t);
    }
    for (int64_t t = 0; t < kSeq; ++t) {
      const int64_t seg = types[b][t][1].item<int64_t>() * 6 + types[b][t][2].item<int64_t>();
      pos[b][t] = std::min<int64_t>(kMaxPos - 1, t - first[seg]);
    }
  }
  return pos;
}

void CheckTapas(bool reset) {
  SCOPED_TRACE(reset ? "reset" : "absolute");
  auto m = BuildFull(TapasSmall("TapasModel", reset));
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(31, at::kDouble);
  at::Tensor ids = (at::arange(kBatch * kSeq, at::kLong).view({kBatch, kSeq}) * 7 + 3) % 40;
  ids = ids.masked_fill(ids.eq(0), 4);
  at::Tensor mask = at::ones({kBatch, kSeq}, at::kLong);
  mask[1].narrow(0, kSeq - 2, 2).fill_(0);
  ids = ids.masked_fill(mask.eq(0), 0);
  // Question tokens 0-1, then cells; row 1's cells differ from row 0's; types 3-6 arbitrary.
  const std::vector<std::vector<int64_t>> cols = {{0, 0, 1, 1, 2, 2, 1, 1, 2},
                                                  {0, 0, 1, 2, 2, 1, 1, 0, 0}};
  const std::vector<std::vector<int64_t>> rows = {{0, 0, 1, 1, 1, 1, 2, 2, 2},
                                                  {0, 0, 1, 1, 1, 2, 2, 0, 0}};
  at::Tensor types = at::zeros({kBatch, kSeq, 7}, at::kLong);
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t t = 0; t < kSeq; ++t) {
      types[b][t][0] = t >= 2 ? 1 : 0;
      types[b][t][1] = cols[b][t];
      types[b][t][2] = rows[b][t];
      types[b][t][3] = (b + t) % 2;
      types[b][t][4] = (3 * t + b) % 7;
      types[b][t][5] = (5 * t + 2 * b) % 7;
      types[b][t][6] = (t * t + b) % 10;
    }
  }
  const auto out =
      m->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}});
  const WrittenOutRef r{w};
  const at::Tensor pos = reset ? CellPositions(types)
                               : at::arange(kSeq, at::kLong).unsqueeze(0).expand({kBatch, kSeq});
  if (reset) {
    EXPECT_EQ(pos[0][5].item<int64_t>(), 1);            // cell (2, 1) of row 0 starts at token 4
    EXPECT_EQ(pos[1][8].item<int64_t>(), kMaxPos - 1);  // with the question's (0, 0): capped
  }
  at::Tensor x = r.Emb("embeddings.word_embeddings.weight", ids) +
                 r.Emb("embeddings.position_embeddings.weight", pos);
  for (int i = 0; i < 7; ++i) {
    x = x + r.Emb("embeddings.token_type_embeddings_" + std::to_string(i) + ".weight",
                  types.select(2, i));
  }
  x = r.Ln(x, "embeddings.LayerNorm", kEps);
  const std::string l = "encoder.layer.0.";
  const int64_t d = kHid / kHeads;
  auto split = [&](const at::Tensor& t) {
    return t.view({kBatch, kSeq, kHeads, d}).permute({0, 2, 1, 3});
  };
  const at::Tensor ext = (1.0 - mask.to(at::kDouble)).view({kBatch, 1, 1, kSeq}) *
                         std::numeric_limits<double>::lowest();
  const at::Tensor scores =
      at::matmul(split(r.Lin(x, l + "attention.self.query")),
                 split(r.Lin(x, l + "attention.self.key")).transpose(-1, -2)) /
          std::sqrt(double(d)) +
      ext;
  const at::Tensor ctx =
      at::matmul(at::softmax(scores, -1), split(r.Lin(x, l + "attention.self.value")))
          .permute({0, 2, 1, 3})
          .reshape({kBatch, kSeq, kHid});
  const at::Tensor a =
      r.Ln(r.Lin(ctx, l + "attention.output.dense") + x, l + "attention.output.LayerNorm", kEps);
  const at::Tensor h =
      r.Ln(r.Lin(WrittenOutRef::Gelu(r.Lin(a, l + "intermediate.dense")), l + "output.dense") + a,
           l + "output.LayerNorm", kEps);
  EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(h, mask)), 1e-10);
  EXPECT_LT(MaxAbs(out[1], at::tanh(r.Lin(h.select(1, 0), "pooler.dense"))), 1e-10);
}

TEST(TapasTest, PerCellPositionsAndSevenTokenTypesAsTransformers) { CheckTapas(true); }
TEST(TapasTest, AbsolutePositionsAsTransformers) { CheckTapas(false); }

TEST(TapasTest, BatchesCarrySevenTokenTypesInRange) {
  auto cfg = *ExampleConfig("TapasForMaskedLM");
  BuildOptions o;
  o.arch = "TapasForMaskedLM";
  auto m = BuildModel(cfg, o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Batch b = (*m)->MakeBatch(4, 0);
  const at::Tensor& t = b.inputs.at("token_type_ids");
  ASSERT_EQ(t.dim(), 3);
  ASSERT_EQ(t.size(2), 7);
  const std::vector<int64_t> vocabs = {3, 256, 256, 2, 256, 256, 10};
  for (int64_t i = 0; i < 7; ++i) {
    EXPECT_GE(t.select(2, i).min().item<int64_t>(), 0);
    EXPECT_LT(t.select(2, i).max().item<int64_t>(), vocabs[i]);
  }
  EXPECT_GT(t.select(2, 1).max().item<int64_t>(), 1);  // several columns
  EXPECT_GT(t.select(2, 2).max().item<int64_t>(), 1);  // several rows
}

TEST(TapasTest, RefusesWhatItDoesNotSupport) {
  ExpectConfigError("TapasModel", "type_vocab_sizes", nlohmann::json({3, 256}), "type_vocab_sizes");
  ExpectConfigError("TapasModel", "position_embedding_type", "relative_key",
                    "position_embedding_type");
}

}  // namespace
}  // namespace ts::zoo
