// Tests of the text heads on their own (heads/text_head.h): weight names from the spec, the
// outputs each head derives from the hidden states, their labels and losses.
#include "workers/zoo/heads/text_head.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace ts::zoo::internal {
namespace {

constexpr int64_t kB = 2, kS = 6, kH = 4;

struct HeadUnderTest {
  std::unique_ptr<TextHead> head;
  WeightMap w;
  at::Tensor hidden, mask;
};

TextHeadSpec Spec(TextHeadKind kind, const std::string& name, bool bias = false) {
  TextHeadSpec spec;
  spec.kind = kind;
  spec.name = name;
  spec.bias = bias;
  spec.num_labels = 3;
  spec.vocab = 5;
  return spec;
}

HeadUnderTest Make(TextHeadSpec spec) {
  spec.hidden = kH;
  HeadUnderTest s;
  s.head = MakeTextHead(std::move(spec));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  for (const auto& [name, shape] : s.head->Weights())
    s.w[name] = at::randn(shape, gen, at::kDouble);
  s.hidden = at::randn({kB, kS, kH}, gen, at::kDouble);
  s.mask = at::ones({kB, kS}, at::kLong);
  s.mask[1].narrow(0, 4, 2).zero_();  // row 1 attends its first 4 tokens
  return s;
}

TEST(TextHeadTest, WeightNamesComeFromTheSpec) {
  HeadUnderTest s = Make(Spec(TextHeadKind::kTokenClassification, "classifier", /*bias=*/true));
  ASSERT_EQ(s.head->Weights().size(), 2u);
  EXPECT_EQ(s.head->Weights()[0].first, "classifier.weight");
  EXPECT_EQ(s.head->Weights()[0].second, (std::vector<int64_t>{3, kH}));
  EXPECT_EQ(s.head->Weights()[1].first, "classifier.bias");
  TextHeadSpec lm = Spec(TextHeadKind::kCausalLM, "lm_head");
  lm.tied_weight = "embed.weight";
  EXPECT_TRUE(Make(lm).head->Weights().empty());  // tied: the embedding is the head
  EXPECT_EQ(Make(Spec(TextHeadKind::kQuestionAnswering, "qa_outputs", true)).head->OutputNames(),
            (std::vector<std::string>{"start_logits", "end_logits"}));
}

TEST(TextHeadTest, SequenceClassificationPoolsTheLastAttendedTokenEitherCastOrder) {
  for (bool cast_first : {false, true}) {
    TextHeadSpec spec = Spec(TextHeadKind::kSequenceClassification, "score");
    spec.cast_mask_first = cast_first;
    HeadUnderTest s = Make(spec);
    at::Tensor out = s.head->Forward(s.w, s.hidden, s.mask)[0];
    at::Tensor all = at::matmul(s.hidden, s.w.at("score.weight").t());
    EXPECT_TRUE(at::allclose(out[0], all[0][kS - 1]));
    EXPECT_TRUE(at::allclose(out[1], all[1][3]));  // last attended, not last
  }
}

TEST(TextHeadTest, CausalLmSoftCapBoundsAndShiftedLossIgnoresPadding) {
  TextHeadSpec spec = Spec(TextHeadKind::kCausalLM, "lm_head");
  spec.final_softcap = 0.5;
  HeadUnderTest s = Make(spec);
  at::Tensor logits = s.head->Forward(s.w, s.hidden * 100, s.mask)[0];
  EXPECT_LE(logits.abs().max().item<double>(), 0.5);
  at::Tensor ids = at::zeros({kB, kS}, at::kLong);
  TensorMap labels;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
  s.head->AddLabels(gen, ids, s.mask, labels);
  EXPECT_EQ(labels.at("labels")[1][5].item<int64_t>(), -100);
  EXPECT_TRUE(std::isfinite(s.head->Loss({logits}, labels).item<double>()));
}

TEST(TextHeadTest, BaseModelReturnsTheHiddenStatesAndRegressesOntoItsTarget) {
  HeadUnderTest s = Make(Spec(TextHeadKind::kBase, ""));
  at::Tensor out = s.head->Forward(s.w, s.hidden, s.mask)[0];
  EXPECT_TRUE(at::equal(out, s.hidden));
  TensorMap labels;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
  s.head->AddLabels(gen, at::zeros({kB, kS}, at::kLong), s.mask, labels);
  EXPECT_EQ(labels.at("labels").sizes().vec(), (std::vector<int64_t>{kB, kS, kH}));
  EXPECT_NEAR(s.head->Loss({labels.at("labels").to(at::kDouble)}, labels).item<double>(), 0.0,
              1e-12);
}

TEST(TextHeadTest, EncoderClassifiersReadTokenZeroThroughThePoolerOrADenseLayer) {
  TextHeadSpec pooled = Spec(TextHeadKind::kSequenceClassification, "classifier", true);
  pooled.first_token = true;
  pooled.pooler = "bert.pooler.dense";
  HeadUnderTest p = Make(pooled);
  ASSERT_EQ(p.head->Weights().size(), 4u);
  EXPECT_EQ(p.head->Weights()[0].first, "bert.pooler.dense.weight");  // the pooler first
  EXPECT_EQ(p.head->Weights()[2].first, "classifier.weight");
  at::Tensor first = p.hidden.select(1, 0);
  at::Tensor feat = at::tanh(at::linear(first, p.w.at("bert.pooler.dense.weight"),
                                        p.w.at("bert.pooler.dense.bias")));
  at::Tensor want = at::linear(feat, p.w.at("classifier.weight"), p.w.at("classifier.bias"));
  EXPECT_TRUE(at::allclose(p.head->Forward(p.w, p.hidden, p.mask)[0], want));
  // Multiple choice: one score per row, labels pick one of ids.size(1) choices.
  TextHeadSpec choice = Spec(TextHeadKind::kMultipleChoice, "classifier", true);
  choice.dense = "pre_classifier";
  choice.dense_act = Activation::kRelu;
  HeadUnderTest c = Make(choice);
  EXPECT_EQ(c.head->Forward(c.w, c.hidden, c.mask)[0].sizes().vec(),
            (std::vector<int64_t>{kB, 1}));
  TensorMap labels;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
  c.head->AddLabels(gen, at::zeros({kB, 3, kS}, at::kLong), c.mask, labels);
  EXPECT_EQ(labels.at("labels").sizes().vec(), (std::vector<int64_t>{kB}));
  EXPECT_LT(labels.at("labels").max().item<int64_t>(), 3);
}

TEST(TextHeadTest, MaskedLmTransformsThenLabelsOnlyAttendedPositions) {
  TextHeadSpec spec = Spec(TextHeadKind::kMaskedLM, "cls.predictions", true);
  spec.tied_weight = "embed.weight";
  spec.transform = "cls.predictions.transform.dense";
  spec.transform_norm = "cls.predictions.transform.LayerNorm";
  spec.transform_width = kH;
  HeadUnderTest s = Make(spec);
  const auto weights = s.head->Weights();
  ASSERT_EQ(weights.size(), 5u);  // transform dense, LayerNorm, then the decoder's bias
  EXPECT_EQ(weights.back().first, "cls.predictions.bias");
  s.w["embed.weight"] = at::randn({5, kH}, at::kDouble);
  EXPECT_EQ(s.head->Forward(s.w, s.hidden, s.mask)[0].sizes().vec(),
            (std::vector<int64_t>{kB, kS, 5}));
  TensorMap labels;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
  s.head->AddLabels(gen, at::ones({kB, kS}, at::kLong), s.mask, labels);
  EXPECT_EQ(labels.at("labels")[0][1].item<int64_t>(), 1);  // position 1 always labelled
  EXPECT_EQ(labels.at("labels")[1][5].item<int64_t>(), -100);  // padding never
}

}  // namespace
}  // namespace ts::zoo::internal
