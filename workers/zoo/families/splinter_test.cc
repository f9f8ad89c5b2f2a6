// Splinter against modeling_splinter.py: BERT's layer and the question-aware span selection head
// in double, the expected values computed here from that file's formulas, not from the zoo's
// stack and head.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using testing::BuildFull;
using testing::HalfTypes;
using testing::HasWeight;
using testing::Kept;
using testing::MaxAbs;
using testing::PaddedInputs;
using testing::WrittenOutRef;

constexpr int64_t kSeq = 6, kHid = 8, kHeads = 2, kQuestion = 7;

nlohmann::json SplinterSmall(const std::string& arch) {
  return {{"architectures", {arch}},
          {"model_type", "splinter"},
          {"hidden_size", kHid},
          {"num_attention_heads", kHeads},
          {"intermediate_size", 12},
          {"num_hidden_layers", 1},
          {"vocab_size", 40},
          {"max_position_embeddings", 20},
          {"type_vocab_size", 2},
          {"pad_token_id", 0},
          {"layer_norm_eps", 1e-12},
          {"hidden_act", "gelu"},
          {"question_token_id", kQuestion}};
}

// SplinterModel: BertEmbeddings, one BertLayer.
at::Tensor RefModel(const WrittenOutRef& r, const std::string& p, const at::Tensor& ids,
                    const at::Tensor& mask, const at::Tensor& types) {
  const at::Tensor pos = at::arange(kSeq, at::kLong).unsqueeze(0).expand({2, kSeq});
  const at::Tensor x = r.Ln(r.Emb(p + "embeddings.word_embeddings.weight", ids) +
                                r.Emb(p + "embeddings.token_type_embeddings.weight", types) +
                                r.Emb(p + "embeddings.position_embeddings.weight", pos),
                            p + "embeddings.LayerNorm", 1e-12);
  const std::string l = p + "encoder.layer.0.";
  const int64_t d = kHid / kHeads;
  auto split = [&](const at::Tensor& t) { return t.view({2, kSeq, kHeads, d}).transpose(1, 2); };
  const at::Tensor ext =
      (1.0 - mask.to(at::kDouble)).view({2, 1, 1, kSeq}) * std::numeric_limits<double>::lowest();
  const at::Tensor scores =
      at::matmul(split(r.Lin(x, l + "attention.self.query")),
                 split(r.Lin(x, l + "attention.self.key")).transpose(-1, -2)) /
      std::sqrt(double(d));
  const at::Tensor ctx =
      at::matmul(at::softmax(scores + ext, -1), split(r.Lin(x, l + "attention.self.value")))
          .transpose(1, 2)
          .reshape({2, kSeq, kHid});
  const at::Tensor a =
      r.Ln(r.Lin(ctx, l + "attention.output.dense") + x, l + "attention.output.LayerNorm", 1e-12);
  return r.Ln(
      r.Lin(WrittenOutRef::Gelu(r.Lin(a, l + "intermediate.dense")), l + "output.dense") + a,
      l + "output.LayerNorm", 1e-12);
}

// SplinterFullyConnectedLayer: LayerNorm(gelu(dense(x))), eps 1e-5.
at::Tensor RefFc(const WrittenOutRef& r, const at::Tensor& x, const std::string& name) {
  const std::string p = "splinter_qass." + name;
  return r.Ln(WrittenOutRef::Gelu(r.Lin(x, p + ".dense")), p + ".LayerNorm", 1e-5);
}

// The shared padded inputs with one question token in row 0 (and no other anywhere): row 1 has
// none, so its question position is 0 (argmax of all false).
void Inputs(at::Tensor& ids, at::Tensor& mask, at::Tensor& types) {
  PaddedInputs(40, 0, kSeq, ids, mask);
  ids = ids.masked_fill(ids.eq(kQuestion), 5);
  ids[0][2] = kQuestion;
  types = HalfTypes(kSeq);
}

// SplinterForQuestionAnswering: question positions argmax(ids == question_token_id), gathered;
// start_logits = start_classifier(query_start_transform(q)) @ start_transform(h)^T (end alike),
// squeezed, + (1 - mask) * finfo.min.
TEST(SplinterTest, ModelAndSpanSelectionAsTransformers) {
  at::Tensor ids, mask, types;
  Inputs(ids, mask, types);
  const TensorMap in = {{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}};
  auto base = BuildFull(SplinterSmall("SplinterModel"));
  ASSERT_NE(base, nullptr);
  EXPECT_FALSE(HasWeight(*base, "pooler.dense.weight"));
  const WeightMap bw = base->InitWeights(19, at::kDouble);
  const auto bout = base->Forward(bw, in);
  ASSERT_EQ(bout.size(), 1u);
  EXPECT_LT(
      MaxAbs(Kept(bout[0], mask), Kept(RefModel(WrittenOutRef{bw}, "", ids, mask, types), mask)),
      1e-10);

  auto qa = BuildFull(SplinterSmall("SplinterForQuestionAnswering"));
  ASSERT_NE(qa, nullptr);
  const WeightMap w = qa->InitWeights(20, at::kDouble);
  const WrittenOutRef r{w};
  const at::Tensor h = RefModel(r, "splinter.", ids, mask, types);
  const at::Tensor qpos = ids.eq(kQuestion).to(at::kInt).argmax(-1);
  const at::Tensor g = h.index_select(1, qpos).diagonal(0, 0, 1).t().unsqueeze(1);  // [2, 1, H]
  auto logits = [&](const std::string& query, const std::string& token, const std::string& cls) {
    const at::Tensor q =
        at::matmul(RefFc(r, g, query), w.at("splinter_qass." + cls + ".weight").t());
    return at::matmul(q, RefFc(r, h, token).transpose(1, 2)).squeeze(1);
  };
  const at::Tensor start = logits("query_start_transform", "start_transform", "start_classifier");
  const at::Tensor end = logits("query_end_transform", "end_transform", "end_classifier");
  const auto out = qa->Forward(w, in);
  const at::Tensor m = mask.to(at::kDouble);
  EXPECT_LT(MaxAbs(out[0] * m, start * m), 1e-10);
  EXPECT_LT(MaxAbs(out[1] * m, end * m), 1e-10);
  EXPECT_LT(out[0][1][kSeq - 1].item<double>(), -1e38);  // the padded positions
}

// The zoo's Splinter batches carry no padding (the QA class's padded logits at finfo.min would
// swamp the output comparison).
TEST(SplinterTest, QaBatchesAreUnpadded) {
  auto qa = BuildFull(SplinterSmall("SplinterForQuestionAnswering"));
  ASSERT_NE(qa, nullptr);
  const Batch b = qa->MakeBatch(3, 2);
  EXPECT_TRUE(b.inputs.at("attention_mask").eq(1).all().item<bool>());
  ASSERT_TRUE(b.labels.count("start_positions"));
}

// SplinterForPreTraining: the span selection head over question_positions [N, Q]: logits
// [N, Q, S], + (1 - mask) * finfo.min per question; the loss over [N * Q, S].
TEST(SplinterTest, PreTrainingOverQuestionPositions) {
  at::Tensor ids, mask, types;
  Inputs(ids, mask, types);
  const at::Tensor qpos = at::tensor({1, 4, 2, 3}, at::kLong).view({2, 2});
  auto m = BuildFull(SplinterSmall("SplinterForPreTraining"));
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(24, at::kDouble);
  const WrittenOutRef r{w};
  const at::Tensor h = RefModel(r, "splinter.", ids, mask, types);
  const at::Tensor g = at::gather(h, 1, qpos.unsqueeze(-1).expand({2, 2, kHid}));  // [2, Q, H]
  const at::Tensor q = at::matmul(RefFc(r, g, "query_start_transform"),
                                  w.at("splinter_qass.start_classifier.weight").t());
  const at::Tensor start = at::matmul(q, RefFc(r, h, "start_transform").transpose(1, 2));
  const auto out = m->Forward(w, {{"input_ids", ids},
                                  {"attention_mask", mask},
                                  {"token_type_ids", types},
                                  {"question_positions", qpos}});
  ASSERT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 2, kSeq}));
  const at::Tensor m3 = mask.to(at::kDouble).unsqueeze(1);
  EXPECT_LT(MaxAbs(out[0] * m3, start * m3), 1e-10);
  EXPECT_LT(out[0][1][0][kSeq - 1].item<double>(), -1e38);
  // The zoo's batch: two question tokens per row, at its question_positions.
  const Batch b = m->MakeBatch(5, 2);
  const at::Tensor pos = b.inputs.at("question_positions");
  ASSERT_EQ(pos.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(at::gather(b.inputs.at("input_ids"), 1, pos).eq(kQuestion).all().item<bool>());
  EXPECT_EQ(b.inputs.at("input_ids").eq(kQuestion).sum().item<int64_t>(), 4);
  EXPECT_EQ(b.labels.at("start_positions").sizes(), pos.sizes());
}

}  // namespace
}  // namespace ts::zoo
