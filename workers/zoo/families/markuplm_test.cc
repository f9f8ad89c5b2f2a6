// MarkupLM against modeling_markuplm.py (transformers 5): MarkupLMEmbeddings with
// XPathEmbeddings and one layer under the (1 - mask) * -10000 extended mask, in double, expected
// values computed here from that file's formulas, not from the zoo's stack.
#include <gtest/gtest.h>

#include <cmath>
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
using testing::MaxAbs;
using testing::PaddedInputs;
using testing::WrittenOutRef;

constexpr int64_t kSeq = 6, kHid = 12, kHeads = 2, kBatch = 2, kDepth = 3, kUnit = 4;
constexpr double kEps = 1e-5;  // the config's layer_norm_eps

nlohmann::json MarkupSmall(const std::string& arch) {
  return {{"architectures", {arch}},
          {"model_type", "markuplm"},
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
          {"max_depth", kDepth},
          {"xpath_unit_hidden_size", kUnit},
          {"max_xpath_tag_unit_embeddings", 10},
          {"max_xpath_subs_unit_embeddings", 12},
          {"tag_pad_id", 9},
          {"subs_pad_id", 11}};
}

TEST(MarkupLmTest, XPathEmbeddingsAndLayerAsTransformers) {
  auto m = BuildFull(MarkupSmall("MarkupLMModel"));
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(37, at::kDouble);
  at::Tensor ids, mask;
  PaddedInputs(40, 1, kSeq, ids, mask);
  const at::Tensor types = HalfTypes(kSeq);
  const at::Tensor g = at::arange(kBatch * kSeq * kDepth, at::kLong).view({kBatch, kSeq, kDepth});
  const at::Tensor tags = (g * 5 + 1) % 10, subs = (g * 7 + 2) % 12;
  const auto out = m->Forward(w, {{"input_ids", ids},
                                  {"attention_mask", mask},
                                  {"token_type_ids", types},
                                  {"xpath_tags_seq", tags},
                                  {"xpath_subs_seq", subs}});
  const WrittenOutRef r{w};
  const std::string x = "embeddings.xpath_embeddings.";
  std::vector<at::Tensor> te, se;
  for (int64_t d = 0; d < kDepth; ++d) {
    te.push_back(
        r.Emb(x + "xpath_tag_sub_embeddings." + std::to_string(d) + ".weight", tags.select(2, d)));
    se.push_back(
        r.Emb(x + "xpath_subs_sub_embeddings." + std::to_string(d) + ".weight", subs.select(2, d)));
  }
  const at::Tensor xpath =
      r.Lin(at::relu(r.Lin(at::cat(te, -1) + at::cat(se, -1), x + "xpath_unitseq2_inner")),
            x + "inner2emb");
  const at::Tensor keep = ids.ne(1).to(at::kLong);
  const at::Tensor pos = at::cumsum(keep, 1) * keep + 1;
  at::Tensor e = r.Emb("embeddings.word_embeddings.weight", ids) +
                 r.Emb("embeddings.position_embeddings.weight", pos) +
                 r.Emb("embeddings.token_type_embeddings.weight", types) + xpath;
  e = r.Ln(e, "embeddings.LayerNorm", kEps);
  const std::string l = "encoder.layer.0.";
  const int64_t d = kHid / kHeads;
  auto split = [&](const at::Tensor& t) {
    return t.view({kBatch, kSeq, kHeads, d}).permute({0, 2, 1, 3});
  };
  const at::Tensor ext = (1.0 - mask.to(at::kDouble)).view({kBatch, 1, 1, kSeq}) * -10000.0;
  const at::Tensor scores = at::matmul(split(r.Lin(e, l + "attention.self.query")),
                                       split(r.Lin(e, l + "attention.self.key")).transpose(2, 3)) *
                                std::pow(double(d), -0.5) +
                            ext;
  const at::Tensor ctx =
      at::matmul(at::softmax(scores, -1), split(r.Lin(e, l + "attention.self.value")))
          .transpose(1, 2)
          .reshape({kBatch, kSeq, kHid});
  const at::Tensor a =
      r.Ln(r.Lin(ctx, l + "attention.output.dense") + e, l + "attention.output.LayerNorm", kEps);
  const at::Tensor h =
      r.Ln(r.Lin(WrittenOutRef::Gelu(r.Lin(a, l + "intermediate.dense")), l + "output.dense") + a,
           l + "output.LayerNorm", kEps);
  EXPECT_LT(MaxAbs(out[0], h), 1e-10);  // padded rows too: the -10000 mask is what it is
  EXPECT_LT(MaxAbs(out[1], at::tanh(r.Lin(h.select(1, 0), "pooler.dense"))), 1e-10);
}

TEST(MarkupLmTest, BatchesAndStateDict) {
  auto cfg = *ExampleConfig("MarkupLMForTokenClassification");
  BuildOptions o;
  o.arch = "MarkupLMForTokenClassification";
  auto m = BuildModel(cfg, o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Batch b = (*m)->MakeBatch(6, 0);
  const at::Tensor& tags = b.inputs.at("xpath_tags_seq");
  const at::Tensor& subs = b.inputs.at("xpath_subs_seq");
  ASSERT_EQ(tags.dim(), 3);
  EXPECT_LE(tags.max().item<int64_t>(), 216);
  EXPECT_LE(subs.max().item<int64_t>(), 1001);
  EXPECT_TRUE(tags.select(2, 0)
                  .lt(216)
                  .logical_or(b.inputs.at("attention_mask").eq(0))
                  .all()
                  .item<bool>());  // every token has a tag at depth 0
  std::set<std::string> names;
  for (const auto& e : StateDictShapes(**m)) names.insert(e.name);
  EXPECT_TRUE(names.count("markuplm.embeddings.xpath_embeddings.xpath_unitseq2_embeddings.weight"));
  EXPECT_FALSE(names.count("markuplm.pooler.dense.weight"));  // add_pooling_layer=False
}

TEST(MarkupLmTest, RefusesWhatItDoesNotSupport) {
  ExpectConfigError("MarkupLMModel", "tag_pad_id", 256, "tag_pad_id");
  ExpectConfigError("MarkupLMModel", "subs_pad_id", 2000, "subs_pad_id");
  ExpectConfigError("MarkupLMModel", "position_embedding_type", "relative_key",
                    "position_embedding_type");
}

}  // namespace
}  // namespace ts::zoo
