// LayoutLMv3 (text only) against modeling_layoutlmv3.py (transformers 5): the text embeddings,
// one layer with the bucketed 1D and 2D relative biases and the CogView softmax, in double,
// expected values computed here from that file's formulas (the buckets as loops over
// relative_position_bucket's steps), not from the zoo's stack; the heads' names.
#include <gtest/gtest.h>

#include <algorithm>
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
using testing::HasWeight;
using testing::Kept;
using testing::MaxAbs;
using testing::PaddedInputs;
using testing::WrittenOutRef;

constexpr int64_t kSeq = 7, kHid = 12, kHeads = 2, kBatch = 2;
constexpr double kEps = 1e-5;  // the config's layer_norm_eps

nlohmann::json V3Small(const std::string& arch) {
  return {{"architectures", {arch}},
          {"model_type", "layoutlmv3"},
          {"hidden_size", kHid},
          {"num_attention_heads", kHeads},
          {"intermediate_size", 20},
          {"num_hidden_layers", 1},
          {"vocab_size", 40},
          {"max_position_embeddings", 20},
          {"type_vocab_size", 2},
          {"pad_token_id", 1},
          {"layer_norm_eps", kEps},
          {"hidden_act", "gelu"},
          {"max_2d_position_embeddings", 64},
          {"coordinate_size", 2},
          {"shape_size", 2},
          {"rel_pos_bins", 8},
          {"max_rel_pos", 6},
          {"rel_2d_pos_bins", 8},
          {"max_rel_2d_pos", 40},
          {"visual_embed", true}};
}

// relative_position_bucket, bidirectional, one value at a time.
int64_t Bucket(int64_t rel, int64_t num_buckets, int64_t max_distance) {
  num_buckets /= 2;
  int64_t ret = rel > 0 ? num_buckets : 0;
  const int64_t n = std::abs(rel), max_exact = num_buckets / 2;
  if (n < max_exact) return ret + n;
  const float f = static_cast<float>(n) / static_cast<float>(max_exact);
  const float large = std::log(f) / static_cast<float>(std::log(double(max_distance) / max_exact)) *
                      static_cast<float>(num_buckets - max_exact);
  return ret + std::min<int64_t>(max_exact + static_cast<int64_t>(large), num_buckets - 1);
}

// [B, heads, S, S]: table.t()[bucket(v_j - v_i)].
at::Tensor Bias(const at::Tensor& table, const at::Tensor& v, int64_t bins, int64_t maxd) {
  at::Tensor out = at::zeros({kBatch, kHeads, kSeq, kSeq}, at::kDouble);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t i = 0; i < kSeq; ++i)
      for (int64_t j = 0; j < kSeq; ++j) {
        const int64_t k = Bucket(v[b][j].item<int64_t>() - v[b][i].item<int64_t>(), bins, maxd);
        for (int64_t h = 0; h < kHeads; ++h) out[b][h][i][j] = table[h][k];
      }
  return out;
}

TEST(LayoutLmV3Test, TextPathAsTransformers) {
  auto m = BuildFull(V3Small("LayoutLMv3Model"));
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(41, at::kDouble);
  at::Tensor ids, mask;
  PaddedInputs(40, 1, kSeq, ids, mask);
  const at::Tensor types = HalfTypes(kSeq);
  const at::Tensor g = at::arange(kBatch * kSeq * 2, at::kLong).view({kBatch, kSeq, 2});
  const at::Tensor lo = (g * 13) % 30;
  const at::Tensor bbox = at::cat({lo, lo + (g * 5) % 20}, -1);
  const auto out = m->Forward(
      w, {{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}, {"bbox", bbox}});
  const WrittenOutRef r{w};
  const at::Tensor keep = ids.ne(1).to(at::kLong);
  const at::Tensor pos = at::cumsum(keep, 1) * keep + 1;
  auto b = [&](int64_t i) { return bbox.select(-1, i); };
  const std::string e = "embeddings.";
  const at::Tensor spatial =
      at::cat({r.Emb(e + "x_position_embeddings.weight", b(0)),
               r.Emb(e + "y_position_embeddings.weight", b(1)),
               r.Emb(e + "x_position_embeddings.weight", b(2)),
               r.Emb(e + "y_position_embeddings.weight", b(3)),
               r.Emb(e + "h_position_embeddings.weight", at::clamp(b(3) - b(1), 0, 1023)),
               r.Emb(e + "w_position_embeddings.weight", at::clamp(b(2) - b(0), 0, 1023))},
              -1);
  at::Tensor x =
      r.Emb(e + "word_embeddings.weight", ids) + r.Emb(e + "token_type_embeddings.weight", types);
  x = x + r.Emb(e + "position_embeddings.weight", pos);
  x = r.Ln(x + spatial, e + "LayerNorm", kEps);
  const at::Tensor ar = at::arange(kSeq, at::kLong).unsqueeze(0).expand({kBatch, kSeq});
  const at::Tensor rel = Bias(w.at("encoder.rel_pos_bias.weight"), ar, 8, 6);
  const at::Tensor rel2d = Bias(w.at("encoder.rel_pos_x_bias.weight"), b(0), 8, 40) +
                           Bias(w.at("encoder.rel_pos_y_bias.weight"), b(3), 8, 40);
  const std::string l = "encoder.layer.0.";
  const int64_t d = kHid / kHeads;
  auto split = [&](const at::Tensor& t) {
    return t.view({kBatch, kSeq, kHeads, d}).permute({0, 2, 1, 3});
  };
  const at::Tensor ext = (1.0 - mask.to(at::kDouble)).view({kBatch, 1, 1, kSeq}) *
                         std::numeric_limits<double>::lowest();
  at::Tensor scores = at::matmul(split(r.Lin(x, l + "attention.self.query")) / std::sqrt(double(d)),
                                 split(r.Lin(x, l + "attention.self.key")).transpose(-1, -2));
  scores = scores + (rel + rel2d) / std::sqrt(double(d)) + ext;
  const at::Tensor scaled = scores / 32;
  const at::Tensor probs = at::softmax((scaled - std::get<0>(scaled.max(-1, true))) * 32, -1);
  const at::Tensor ctx = at::matmul(probs, split(r.Lin(x, l + "attention.self.value")))
                             .permute({0, 2, 1, 3})
                             .reshape({kBatch, kSeq, kHid});
  const at::Tensor a =
      r.Ln(r.Lin(ctx, l + "attention.output.dense") + x, l + "attention.output.LayerNorm", kEps);
  const at::Tensor f = r.Lin(a, l + "intermediate.dense");
  const at::Tensor h =
      r.Ln(r.Lin(WrittenOutRef::Gelu(f), l + "output.dense") + a, l + "output.LayerNorm", kEps);
  EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(h, mask)), 1e-10);
  EXPECT_EQ(out.size(), 1u);  // no pooler
}

TEST(LayoutLmV3Test, HeadsAndStateDict) {
  auto qa = BuildFull(V3Small("LayoutLMv3ForQuestionAnswering"));
  ASSERT_NE(qa, nullptr);
  EXPECT_TRUE(HasWeight(*qa, "qa_outputs.dense.weight"));
  EXPECT_TRUE(HasWeight(*qa, "qa_outputs.out_proj.weight"));
  nlohmann::json many = V3Small("LayoutLMv3ForTokenClassification");
  many["num_labels"] = 10;
  auto tok10 = BuildFull(many);
  ASSERT_NE(tok10, nullptr);
  EXPECT_TRUE(HasWeight(*tok10, "classifier.dense.weight"));
  EXPECT_TRUE(HasWeight(*tok10, "classifier.out_proj.weight"));
  many["num_labels"] = 9;
  auto tok9 = BuildFull(many);
  ASSERT_NE(tok9, nullptr);
  EXPECT_TRUE(HasWeight(*tok9, "classifier.weight"));
  EXPECT_FALSE(HasWeight(*tok9, "classifier.dense.weight"));
  std::set<std::string> names;
  for (const auto& s : StateDictShapes(*tok9)) names.insert(s.name);
  for (const char* n : {"layoutlmv3.patch_embed.proj.weight", "layoutlmv3.cls_token",
                        "layoutlmv3.pos_embed", "layoutlmv3.norm.weight",
                        "layoutlmv3.LayerNorm.weight", "layoutlmv3.encoder.rel_pos_x_bias.weight"})
    EXPECT_TRUE(names.count(n)) << n;
}

TEST(LayoutLmV3Test, RefusesWhatItDoesNotSupport) {
  ExpectConfigError("LayoutLMv3Model", "coordinate_size", 100, "coordinate_size");
  ExpectConfigError("LayoutLMv3Model", "text_embed", false, "text_embed");
  ExpectConfigError("LayoutLMv3Model", "position_embedding_type", "relative_key",
                    "position_embedding_type");
}

}  // namespace
}  // namespace ts::zoo
