// Tests for encoders_more.cc (see README.md).
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

const char* kPrefixes[] = {"Roberta", "XLMRoberta", "Camembert", "DistilBert",
                           "Albert",  "Electra",    "DebertaV2"};

TEST(EncodersMoreTest, EveryHeadHasItsOutputShapesAndFiniteLoss) {
  for (const char* p : kPrefixes) {
    for (const char* h : {"Model", "ForSequenceClassification", "ForTokenClassification",
                          "ForQuestionAnswering", "ForMaskedLM", "ForMultipleChoice"}) {
      const std::string arch = std::string(p) + h;
      SCOPED_TRACE(arch);
      auto m = Build(arch);
      ASSERT_TRUE(m);
      Batch b = m->MakeBatch(1, 2);
      auto out = m->Forward(m->InitWeights(1), b.inputs);
      ASSERT_EQ(out.size(), m->OutputNames().size());
      const auto& tc = m->spec().tiny_config;
      const int64_t s = tc["touchstone_tiny"]["seq_len"].get<int64_t>();
      const int64_t hidden = tc.contains("dim") ? tc["dim"].get<int64_t>() : tc["hidden_size"].get<int64_t>();
      const std::string head = h;
      if (head == "Model") {
        EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, s, hidden}));
      } else if (head == "ForQuestionAnswering") {
        EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, s}));
        EXPECT_EQ(out[1].sizes(), (std::vector<int64_t>{2, s}));
      } else if (head == "ForMaskedLM") {
        EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, s, tc["vocab_size"].get<int64_t>()}));
      } else if (head == "ForMultipleChoice") {
        EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 2}));
      } else if (head == "ForTokenClassification") {
        EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, s, 2}));
      } else {
        EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 2}));
      }
      EXPECT_TRUE(std::isfinite(m->Loss(m->InitWeights(1), b).item<double>()));
    }
  }
  for (const char* arch : {"BertForTokenClassification", "BertForQuestionAnswering", "BertForMultipleChoice"}) {
    auto m = Build(arch);
    ASSERT_TRUE(m);
    EXPECT_TRUE(HasWeight(*m, "bert.encoder.layer.0.attention.self.query.weight")) << arch;
    EXPECT_EQ(HasWeight(*m, "bert.pooler.dense.weight"), std::string(arch) == "BertForMultipleChoice");
  }
}

TEST(EncodersMoreTest, HfWeightNamesPerFamily) {
  auto d = Build("DistilBertForSequenceClassification");
  for (const char* n : {"distilbert.transformer.layer.0.attention.q_lin.weight",
                        "distilbert.transformer.layer.0.sa_layer_norm.weight",
                        "distilbert.transformer.layer.0.ffn.lin2.bias", "pre_classifier.weight"})
    EXPECT_TRUE(HasWeight(*d, n)) << n;
  EXPECT_FALSE(HasWeight(*d, "distilbert.embeddings.token_type_embeddings.weight"));
  EXPECT_FALSE(HasWeight(*d, "distilbert.transformer.layer.1.attention.q_lin.weight"));  // depth 1
  auto r = Build("RobertaForMaskedLM");
  EXPECT_TRUE(HasWeight(*r, "lm_head.layer_norm.weight"));
  EXPECT_TRUE(HasWeight(*r, "lm_head.bias"));
  EXPECT_FALSE(HasWeight(*r, "lm_head.decoder.weight"));  // tied
  EXPECT_FALSE(HasWeight(*r, "roberta.pooler.dense.weight"));
  auto e = Build("ElectraForMaskedLM");  // generator: embedding 768 vs hidden 256 kept as a ratio
  EXPECT_TRUE(HasWeight(*e, "electra.embeddings_project.weight"));
  EXPECT_FALSE(HasWeight(*Build("ElectraModel"), "embeddings_project.weight"));
}

TEST(EncodersMoreTest, AlbertSharesOneLayerAcrossDepth) {
  auto m = Build("AlbertModel");
  std::set<std::string> layer_weights;
  for (const auto& [n, s] : m->WeightShapes()) {
    if (n.find("albert_layer_groups") != std::string::npos) layer_weights.insert(n);
  }
  EXPECT_EQ(m->spec().tiny_config["num_hidden_layers"], 2);
  EXPECT_TRUE(layer_weights.count("encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"));
  for (const auto& n : layer_weights) EXPECT_NE(n.find("groups.0.albert_layers.0."), std::string::npos) << n;
  EXPECT_EQ(m->WeightShapes()[0].second, (std::vector<int64_t>{512, 11}));  // E = 128/768 * 64
  // Depth matters although weights are shared: 1 layer differs from 2.
  auto cfg = *ExampleConfig("AlbertModel");
  cfg["num_hidden_layers"] = 1;
  auto one = Build("AlbertModel", cfg);
  Batch b = m->MakeBatch(2, 2);
  auto w = m->InitWeights(3);
  EXPECT_GT(RelDiff(one->Forward(w, b.inputs)[0], m->Forward(w, b.inputs)[0]), 1e-3);
}

TEST(EncodersMoreTest, RobertaPositionsStartAfterPadding) {
  auto m = Build("RobertaModel");
  Batch b = m->MakeBatch(1, 2);
  auto w = m->InitWeights(1);
  at::Tensor base = m->Forward(w, b.inputs)[0];
  // Position row pad+1 (=2) is the first token's; rows 0 and 1 are unused (pad row is zero).
  WeightMap w2 = w;
  w2["embeddings.position_embeddings.weight"] = w.at("embeddings.position_embeddings.weight").clone();
  w2["embeddings.position_embeddings.weight"][0].add_(1.0);
  EXPECT_TRUE(at::equal(m->Forward(w2, b.inputs)[0], base));
  w2["embeddings.position_embeddings.weight"][2].add_(1.0);
  EXPECT_FALSE(at::equal(m->Forward(w2, b.inputs)[0], base));
  EXPECT_EQ(m->spec().tiny_config["touchstone_tiny"]["seq_len"], 32);
}

TEST(EncodersMoreTest, DebertaRelativeAttentionUsesBucketsAndRelEmbeddings) {
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
  w2["deberta.encoder.rel_embeddings.weight"] = w.at("deberta.encoder.rel_embeddings.weight").flip({0});
  EXPECT_GT(RelDiff(m->Forward(w2, b.inputs)[0], base), 1e-4);
  auto cfg = *ExampleConfig("DebertaV2Model");
  cfg["share_att_key"] = false;
  auto ns = Build("DebertaV2Model", cfg);
  EXPECT_TRUE(HasWeight(*ns, "encoder.layer.0.attention.self.pos_key_proj.weight"));
  EXPECT_TRUE(HasWeight(*ns, "encoder.layer.0.attention.self.pos_query_proj.bias"));
  Batch nb = ns->MakeBatch(1, 2);
  EXPECT_TRUE(at::isfinite(ns->Forward(ns->InitWeights(1), nb.inputs)[0]).all().item<bool>());
}

TEST(EncodersMoreTest, Float64AgreesWithFloat32AndRunsAreDeterministic) {
  for (const char* arch : {"RobertaForMaskedLM", "DistilBertForQuestionAnswering", "AlbertForMultipleChoice",
                           "ElectraForTokenClassification", "DebertaV2ForMaskedLM"}) {
    SCOPED_TRACE(arch);
    auto m = Build(arch);
    Batch b = m->MakeBatch(3, 2);
    at::Tensor f32 = m->Forward(m->InitWeights(7), b.inputs)[0];
    at::Tensor again = m->Forward(m->InitWeights(7), b.inputs)[0];
    at::Tensor f64 = m->Forward(m->InitWeights(7, at::kDouble), b.inputs)[0];
    EXPECT_EQ(f64.scalar_type(), at::kDouble);
    EXPECT_TRUE(at::equal(f32, again));
    EXPECT_LT(RelDiff(f32.to(at::kDouble), f64), 1e-5);
  }
}

TEST(EncodersMoreTest, NewFamiliesAndHeadsPassTheFamilyBasics) {
  const std::set<std::string> families = {"ernie", "megatron-bert", "big_bird", "bert-generation",
                                          "xlm-roberta-xl", "roberta-prelayernorm", "data2vec-text"};
  int n = 0;
  const std::set<std::string> heads = {"BertLMHeadModel", "BertForNextSentencePrediction",
                                       "RobertaForCausalLM", "XLMRobertaForCausalLM",
                                       "CamembertForCausalLM", "ElectraForCausalLM"};
  for (const auto& a : SupportedArchitectures()) {
    if (!families.count(a.family) && !heads.count(a.arch)) continue;
    SCOPED_TRACE(a.arch);
    auto m = Build(a.arch);
    ASSERT_TRUE(m);
    const auto& tc = m->spec().tiny_config;
    const int64_t s = tc["touchstone_tiny"]["seq_len"].get<int64_t>();
    Batch b = m->MakeBatch(1, 2);
    auto out = m->Forward(m->InitWeights(1), b.inputs);
    std::vector<int64_t> shape = out[0].sizes().vec();
    if (a.task == "text-generation" || a.task == "fill-mask") {
      shape = {2, s, tc["vocab_size"].get<int64_t>()};
    } else if (a.task == "next-sentence-prediction" || a.task == "text-classification" ||
               a.task == "multiple-choice") {
      shape = {2, 2};
    }
    testing::CheckFamilyBasics(m, shape);
    ++n;
  }
  EXPECT_GE(n, 50);
}

TEST(EncodersMoreTest, CausalHeadsAreCausalAndMaskedHeadsAreNot) {
  for (const auto& [arch, causal] : std::vector<std::pair<std::string, bool>>{
           {"BertLMHeadModel", true}, {"RobertaForCausalLM", true}, {"ElectraForCausalLM", true},
           {"MegatronBertForCausalLM", true}, {"BertGenerationDecoder", true},
           {"RobertaForMaskedLM", false}, {"ErnieForMaskedLM", false}}) {
    SCOPED_TRACE(arch);
    auto m = Build(arch);
    ASSERT_TRUE(m);
    auto w = m->InitWeights(2);
    Batch b = m->MakeBatch(2, 1);
    at::Tensor base = m->Forward(w, b.inputs)[0];
    TensorMap in = b.inputs;
    in["input_ids"] = in["input_ids"].clone();
    in["input_ids"][0][20] = (in["input_ids"][0][20].item<int64_t>() + 7) % 500 + 3;
    at::Tensor moved = m->Forward(w, in)[0];
    const double early = (moved.narrow(1, 0, 10) - base.narrow(1, 0, 10)).abs().max().item<double>();
    if (causal) {
      EXPECT_LT(early, 1e-5);
    } else {
      EXPECT_GT(early, 1e-5);
    }
  }
}

TEST(EncodersMoreTest, PreLnFamiliesNameTheirNormsAsHf) {
  auto meg = Build("MegatronBertForNextSentencePrediction");
  ASSERT_TRUE(meg);
  for (const char* n : {"bert.encoder.layer.0.attention.ln.weight", "bert.encoder.layer.0.ln.bias",
                        "bert.encoder.ln.weight", "bert.pooler.dense.weight", "cls.seq_relationship.weight"})
    EXPECT_TRUE(HasWeight(*meg, n)) << n;
  EXPECT_FALSE(HasWeight(*meg, "bert.embeddings.LayerNorm.weight"));
  EXPECT_FALSE(HasWeight(*meg, "bert.encoder.layer.0.output.LayerNorm.weight"));
  auto xl = Build("XLMRobertaXLForMaskedLM");
  ASSERT_TRUE(xl);
  for (const char* n : {"roberta.encoder.layer.0.attention.self_attn_layer_norm.weight",
                        "roberta.encoder.layer.0.LayerNorm.weight", "roberta.encoder.LayerNorm.bias",
                        "lm_head.layer_norm.weight"})
    EXPECT_TRUE(HasWeight(*xl, n)) << n;
  auto pre = Build("RobertaPreLayerNormModel");
  ASSERT_TRUE(pre);
  for (const char* n : {"embeddings.LayerNorm.weight", "encoder.layer.0.attention.LayerNorm.weight",
                        "encoder.layer.0.intermediate.LayerNorm.weight", "LayerNorm.weight", "pooler.dense.weight"})
    EXPECT_TRUE(HasWeight(*pre, n)) << n;
  auto ernie = Build("ErnieForSequenceClassification");
  ASSERT_TRUE(ernie);
  EXPECT_TRUE(HasWeight(*ernie, "ernie.embeddings.task_type_embeddings.weight"));
  EXPECT_TRUE(HasWeight(*ernie, "ernie.pooler.dense.weight"));
  auto bird = Build("BigBirdForSequenceClassification");
  ASSERT_TRUE(bird);
  EXPECT_TRUE(HasWeight(*bird, "classifier.out_proj.weight"));
  auto d2v = Build("Data2VecTextForCausalLM");
  ASSERT_TRUE(d2v);
  EXPECT_TRUE(HasWeight(*d2v, "data2vec_text.encoder.layer.0.output.LayerNorm.weight"));
  EXPECT_TRUE(HasWeight(*d2v, "lm_head.dense.weight"));
  auto gen = Build("BertGenerationEncoder");
  ASSERT_TRUE(gen);
  EXPECT_FALSE(HasWeight(*gen, "embeddings.token_type_embeddings.weight"));
  EXPECT_FALSE(HasWeight(*gen, "pooler.dense.weight"));
}

TEST(EncodersMoreTest, BadConfigsNameTheField) {
  auto expect_err = [](const std::string& arch, const char* field, const nlohmann::json& value,
                       const std::string& needle) {
    auto cfg = *ExampleConfig(arch);
    if (value.is_null()) cfg.erase(field); else cfg[field] = value;
    BuildOptions o;
    o.arch = arch;
    auto r = BuildModel(cfg, o);
    ASSERT_FALSE(r.ok()) << arch << " " << field;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_err("DistilBertModel", "dim", nullptr, "dim: missing");
  expect_err("DistilBertModel", "n_heads", 5, "n_heads: must divide dim");
  expect_err("RobertaModel", "hidden_size", "big", "hidden_size: expected integer");
  expect_err("AlbertModel", "num_hidden_groups", 20, "num_hidden_groups:");
  expect_err("DebertaV2Model", "pos_att_type", "c2p|x2y", "pos_att_type: unknown 'x2y'");
  expect_err("ElectraModel", "embedding_size", 0, "embedding_size: must be positive");
  expect_err("XLMRobertaModel", "vocab_size", nullptr, "vocab_size: missing");
}

}  // namespace
}  // namespace ts::zoo
