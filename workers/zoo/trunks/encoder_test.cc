// Tests of the encoder trunk through its families (README.md "Encoder trunk").
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using testing::Build;
using testing::HasWeight;
using testing::RelDiff;

const char* kPrefixes[] = {"Roberta", "XLMRoberta", "Camembert", "DistilBert",
                           "Albert",  "Electra",    "DebertaV2"};

TEST(EncoderTest, EveryHeadHasItsOutputShapesAndFiniteLoss) {
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
      const int64_t hidden =
          tc.contains("dim") ? tc["dim"].get<int64_t>() : tc["hidden_size"].get<int64_t>();
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
  for (const char* arch :
       {"BertForTokenClassification", "BertForQuestionAnswering", "BertForMultipleChoice"}) {
    auto m = Build(arch);
    ASSERT_TRUE(m);
    EXPECT_TRUE(HasWeight(*m, "bert.encoder.layer.0.attention.self.query.weight")) << arch;
    EXPECT_EQ(HasWeight(*m, "bert.pooler.dense.weight"),
              std::string(arch) == "BertForMultipleChoice");
  }
}

TEST(EncoderTest, HfWeightNamesPerFamily) {
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

TEST(EncoderTest, Float64AgreesWithFloat32AndRunsAreDeterministic) {
  for (const char* arch :
       {"RobertaForMaskedLM", "DistilBertForQuestionAnswering", "AlbertForMultipleChoice",
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

TEST(EncoderTest, NewFamiliesAndHeadsPassTheFamilyBasics) {
  const std::set<std::string> families = {
      "ernie",          "megatron-bert",        "big_bird",     "bert-generation",
      "xlm-roberta-xl", "roberta-prelayernorm", "data2vec-text"};
  int n = 0;
  const std::set<std::string> heads = {"BertLMHeadModel",      "BertForNextSentencePrediction",
                                       "RobertaForCausalLM",   "XLMRobertaForCausalLM",
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

TEST(EncoderTest, CausalHeadsAreCausalAndMaskedHeadsAreNot) {
  for (const auto& [arch, causal] :
       std::vector<std::pair<std::string, bool>>{{"BertLMHeadModel", true},
                                                 {"RobertaForCausalLM", true},
                                                 {"ElectraForCausalLM", true},
                                                 {"MegatronBertForCausalLM", true},
                                                 {"BertGenerationDecoder", true},
                                                 {"RobertaForMaskedLM", false},
                                                 {"ErnieForMaskedLM", false}}) {
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
    const double early =
        (moved.narrow(1, 0, 10) - base.narrow(1, 0, 10)).abs().max().item<double>();
    if (causal) {
      EXPECT_LT(early, 1e-5);
    } else {
      EXPECT_GT(early, 1e-5);
    }
  }
}

// `arch` has each of `present` and none of `absent`.
void ExpectWeights(const std::string& arch, std::vector<std::string> present,
                   std::vector<std::string> absent = {}) {
  SCOPED_TRACE(arch);
  auto m = Build(arch);
  ASSERT_TRUE(m);
  for (const std::string& n : present) EXPECT_TRUE(HasWeight(*m, n)) << n;
  for (const std::string& n : absent) EXPECT_FALSE(HasWeight(*m, n)) << n;
}

TEST(EncoderTest, PreLnFamiliesNameTheirNormsAsHf) {
  ExpectWeights(
      "MegatronBertForNextSentencePrediction",
      {"bert.encoder.layer.0.attention.ln.weight", "bert.encoder.layer.0.ln.bias",
       "bert.encoder.ln.weight", "bert.pooler.dense.weight", "cls.seq_relationship.weight"},
      {"bert.embeddings.LayerNorm.weight", "bert.encoder.layer.0.output.LayerNorm.weight"});
  ExpectWeights("XLMRobertaXLForMaskedLM",
                {"roberta.encoder.layer.0.attention.self_attn_layer_norm.weight",
                 "roberta.encoder.layer.0.LayerNorm.weight", "roberta.encoder.LayerNorm.bias",
                 "lm_head.layer_norm.weight"});
  ExpectWeights(
      "RobertaPreLayerNormModel",
      {"embeddings.LayerNorm.weight", "encoder.layer.0.attention.LayerNorm.weight",
       "encoder.layer.0.intermediate.LayerNorm.weight", "LayerNorm.weight", "pooler.dense.weight"});
  ExpectWeights("ErnieForSequenceClassification",
                {"ernie.embeddings.task_type_embeddings.weight", "ernie.pooler.dense.weight"});
  ExpectWeights("BigBirdForSequenceClassification", {"classifier.out_proj.weight"});
  ExpectWeights("Data2VecTextForCausalLM",
                {"data2vec_text.encoder.layer.0.output.LayerNorm.weight", "lm_head.dense.weight"});
  ExpectWeights("BertGenerationEncoder", {},
                {"embeddings.token_type_embeddings.weight", "pooler.dense.weight"});
}

TEST(EncoderTest, BadConfigsNameTheField) {
  auto expect_err = testing::ExpectConfigError;
  expect_err("DistilBertModel", "dim", nullptr, "dim: missing");
  expect_err("DistilBertModel", "n_heads", 5, "n_heads: must divide dim");
  expect_err("RobertaModel", "hidden_size", "big", "hidden_size: expected integer");
  expect_err("AlbertModel", "num_hidden_groups", 20, "num_hidden_groups:");
  expect_err("DebertaV2Model", "pos_att_type", "c2p|x2y", "pos_att_type: unknown 'x2y'");
  expect_err("ElectraModel", "embedding_size", 0, "embedding_size: must be positive");
  expect_err("XLMRobertaModel", "vocab_size", nullptr, "vocab_size: missing");
}

// transformers' BertForPreTraining (modeling_bert.py): BertModel with its pooler, then
// BertPreTrainingHeads = BertLMPredictionHead (cls.predictions, the masked-LM head) on every
// token and Linear(hidden, 2) (cls.seq_relationship) on pooler_output; loss = the masked-LM
// cross entropy + the pair's. AlbertForPreTraining likewise with predictions and
// sop_classifier.classifier (AlbertSOPHead). So prediction_logits are *ForMaskedLM's logits and
// the pair logits are the base model's pooler_output through the pair Linear, weight for weight.
TEST(EncoderTest, PreTrainingIsTheMaskedLmHeadAndThePairHeadOnThePooler) {
  struct Case {
    std::string prefix, base, pair;
  };
  for (const Case& c : {Case{"Bert", "bert.", "cls.seq_relationship"},
                        Case{"Ernie", "ernie.", "cls.seq_relationship"},
                        Case{"MegatronBert", "bert.", "cls.seq_relationship"},
                        Case{"BigBird", "bert.", "cls.seq_relationship"},
                        Case{"Albert", "albert.", "sop_classifier.classifier"}}) {
    SCOPED_TRACE(c.prefix);
    auto pt = Build(c.prefix + "ForPreTraining");
    ASSERT_TRUE(pt);
    EXPECT_EQ(pt->spec().task, "pretraining");
    const std::vector<std::string> names = pt->OutputNames();
    ASSERT_EQ(names.size(), 2u);
    EXPECT_EQ(names[0], "prediction_logits");
    EXPECT_EQ(names[1], c.prefix == "Albert" ? "sop_logits" : "seq_relationship_logits");
    auto mlm = testing::BuildSibling(*pt, c.prefix + "ForMaskedLM");
    auto base = testing::BuildSibling(*pt, c.prefix + "Model");
    ASSERT_TRUE(mlm && base);
    WeightMap w = pt->InitWeights(4, at::kDouble), wm;
    const WeightMap wb = testing::Unprefixed(w, c.base);
    for (const auto& [n, t] : w)
      if (n.rfind(c.pair, 0) != 0 && n.find("pooler") == std::string::npos) wm[n] = t;
    EXPECT_TRUE(w.count(c.pair + ".weight") && w.count(c.pair + ".bias"));
    Batch batch = pt->MakeBatch(2, 0);
    ASSERT_TRUE(batch.labels.count("labels"));
    ASSERT_TRUE(batch.labels.count(c.prefix == "Albert" ? "sentence_order_label"
                                                        : "next_sentence_label"));
    const auto out = pt->Forward(w, batch.inputs);
    EXPECT_LT(RelDiff(out[0], mlm->Forward(wm, batch.inputs)[0]), 1e-9);
    const at::Tensor pooled = base->Forward(wb, batch.inputs)[1];
    const at::Tensor want = at::linear(pooled, w.at(c.pair + ".weight"), w.at(c.pair + ".bias"));
    EXPECT_LT(RelDiff(out[1], want), 1e-9);
    EXPECT_TRUE(std::isfinite(pt->Loss(w, batch).item<double>()));
  }
}

// transformers' ElectraForPreTraining (modeling_electra.py) is the discriminator:
// ElectraDiscriminatorPredictions = dense_prediction(act(dense(h))).squeeze(-1) over
// ElectraModel's hidden states, act = hidden_act; loss BCEWithLogits over the attended tokens.
TEST(EncoderTest, ElectraPreTrainingIsTheReplacedTokenDiscriminator) {
  auto pt = Build("ElectraForPreTraining");
  ASSERT_TRUE(pt);
  EXPECT_EQ(pt->spec().task, "pretraining");
  ASSERT_EQ(pt->OutputNames(), (std::vector<std::string>{"logits"}));
  auto base = testing::BuildSibling(*pt, "ElectraModel");
  ASSERT_TRUE(base);
  const WeightMap w = pt->InitWeights(6, at::kDouble);
  Batch batch = pt->MakeBatch(3, 0);
  const at::Tensor got = pt->Forward(w, batch.inputs)[0];
  const at::Tensor h = base->Forward(testing::Unprefixed(w, "electra."), batch.inputs)[0];
  const std::string p = "discriminator_predictions.";
  const std::string act = pt->spec().tiny_config.value("hidden_act", std::string("gelu"));
  ASSERT_EQ(act, "gelu");
  at::Tensor x = at::gelu(at::linear(h, w.at(p + "dense.weight"), w.at(p + "dense.bias")));
  x = at::linear(x, w.at(p + "dense_prediction.weight"), w.at(p + "dense_prediction.bias"));
  EXPECT_EQ(got.sizes(), (std::vector<int64_t>{h.size(0), h.size(1)}));
  EXPECT_LT(RelDiff(got, x.squeeze(-1)), 1e-9);
  // The loss leaves out the padded tokens: changing a padded token's label changes nothing.
  const at::Tensor mask = batch.inputs.at("attention_mask");
  ASSERT_GT(mask.eq(0).sum().item<int64_t>(), 0);
  const double loss = pt->Loss(w, batch).item<double>();
  Batch flipped = batch;
  flipped.labels["labels"] = at::where(mask.eq(0), 1 - batch.labels.at("labels"),
                                       batch.labels.at("labels"));
  EXPECT_DOUBLE_EQ(pt->Loss(w, flipped).item<double>(), loss);
}

// modeling_rembert.py: RemBertEmbeddings at input_embedding_size, mapped to the hidden size by
// encoder.embedding_hidden_mapping_in; RemBertLMPredictionHead = decoder(LayerNorm(
// hidden_act(dense(h)))) with dense to output_embedding_size and a decoder Linear of its own
// (vocab x output_embedding_size, with bias), not the word embeddings.
TEST(EncoderTest, RemBertNarrowEmbeddingsAndItsOwnWideLmDecoder) {
  auto mlm = Build("RemBertForMaskedLM");
  ASSERT_TRUE(mlm);
  const auto& tc = mlm->spec().tiny_config;
  const int64_t v = tc["vocab_size"].get<int64_t>(), hid = tc["hidden_size"].get<int64_t>();
  const int64_t in = tc["input_embedding_size"].get<int64_t>();
  const int64_t out = tc["output_embedding_size"].get<int64_t>();
  ASSERT_NE(in, hid);
  ASSERT_NE(out, in);
  WeightMap w = mlm->InitWeights(2, at::kDouble);
  EXPECT_EQ(w.at("rembert.embeddings.word_embeddings.weight").sizes(),
            (std::vector<int64_t>{v, in}));
  EXPECT_EQ(w.at("rembert.encoder.embedding_hidden_mapping_in.weight").sizes(),
            (std::vector<int64_t>{hid, in}));
  EXPECT_EQ(w.at("cls.predictions.decoder.weight").sizes(), (std::vector<int64_t>{v, out}));
  EXPECT_EQ(w.count("cls.predictions.bias"), 0u);
  auto base = testing::BuildSibling(*mlm, "RemBertModel");
  ASSERT_TRUE(base);
  // Its pooler from its own init; the rest from the MLM's weights.
  const WeightMap wb = testing::Unprefixed(w, "rembert.", base->InitWeights(1, at::kDouble));
  Batch b = mlm->MakeBatch(1, 0);
  const at::Tensor h = base->Forward(wb, b.inputs)[0];
  const std::string p = "cls.predictions.";
  at::Tensor x = at::gelu(at::linear(h, w.at(p + "dense.weight"), w.at(p + "dense.bias")));
  x = at::layer_norm(x, {out}, w.at(p + "LayerNorm.weight"), w.at(p + "LayerNorm.bias"),
                     tc.value("layer_norm_eps", 1e-12));
  x = at::linear(x, w.at(p + "decoder.weight"), w.at(p + "decoder.bias"));
  EXPECT_LT(RelDiff(mlm->Forward(w, b.inputs)[0], x), 1e-9);
  // tie_word_embeddings true would tie a [vocab, output_embedding_size] decoder to the
  // [vocab, input_embedding_size] embeddings: refused, naming the field.
  nlohmann::json tied = *ExampleConfig("RemBertForMaskedLM");
  tied["tie_word_embeddings"] = true;
  auto bad = BuildModel(tied, BuildOptions());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("tie_word_embeddings"), std::string::npos);
}

}  // namespace
}  // namespace ts::zoo
