// Tests for the audio trunk (audio.h) and the whisper and wav2vec2 families (README.md).
#include "workers/zoo/trunks/audio.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

// An audio class's registry entry.
const internal::ArchEntry* Entry(const std::string& arch) { return internal::FindArch(arch); }

StatusOr<nlohmann::json> Example(const std::string& arch) {
  const internal::ArchEntry* e = Entry(arch);
  if (e == nullptr) return NotFoundError(arch);
  return e->example_config;
}

// BuildModel for the audio classes through their entries (the same steps: scale, then build).
StatusOr<std::unique_ptr<Model>> BuildPending(const nlohmann::json& config) {
  const std::string arch = config["architectures"][0].get<std::string>();
  const internal::ArchEntry* e = Entry(arch);
  if (e == nullptr) return NotFoundError(arch);
  ModelSpec spec;
  spec.arch = arch;
  spec.task = e->info.task;
  spec.family = e->info.family;
  spec.config = config;
  TS_ASSIGN_OR_RETURN(spec.tiny_config, e->scale(config));
  return e->build(std::move(spec));
}

std::unique_ptr<Model> Build(const std::string& arch) {
  auto cfg = Example(arch);
  EXPECT_TRUE(cfg.ok()) << arch;
  auto m = BuildPending(*cfg);
  EXPECT_TRUE(m.ok()) << arch << ": " << m.status().ToString();
  return std::move(*m);
}

void CheckCommon(const std::string& arch, std::vector<int64_t> out_shape) {
  SCOPED_TRACE(arch);
  testing::CheckFamilyBasics(Build(arch), std::move(out_shape));
}

TEST(AudioTest, Whisper) {
  CheckCommon("WhisperForConditionalGeneration", {2, 16, 512});
  auto m = Build("WhisperForConditionalGeneration");
  EXPECT_EQ(testing::WeightShape(*m, "model.encoder.conv1.weight"),
            (std::vector<int64_t>{64, 80, 3}));
  EXPECT_EQ(testing::WeightShape(*m, "model.encoder.embed_positions.weight"),
            (std::vector<int64_t>{16, 64}));
  EXPECT_TRUE(testing::WeightShape(*m, "proj_out.weight").empty());  // tied to embed_tokens
  EXPECT_TRUE(testing::WeightShape(*m, "model.encoder.layers.0.self_attn.k_proj.bias").empty());
  // The decoder is causal: changing the last decoder token leaves earlier logits unchanged.
  auto w = m->InitWeights(1);
  auto batch = m->MakeBatch(1, 2);
  at::Tensor a = m->Forward(w, batch.inputs)[0];
  batch.inputs["decoder_input_ids"][0][15] = 7;
  at::Tensor b = m->Forward(w, batch.inputs)[0];
  EXPECT_TRUE(at::allclose(a.narrow(1, 0, 15), b.narrow(1, 0, 15)));
  EXPECT_FALSE(at::allclose(a.narrow(1, 15, 1), b.narrow(1, 15, 1)));
}

TEST(AudioTest, Wav2Vec2) {
  CheckCommon("Wav2Vec2ForCTC", {2, 16, 32});
  CheckCommon("Wav2Vec2ForSequenceClassification", {2, 2});
  CheckCommon("Wav2Vec2Model", {2, 16, 64});
  auto m = Build("Wav2Vec2ForCTC");
  // Seven conv layers kept, group norm on the first only, grouped positional conv.
  EXPECT_FALSE(
      testing::WeightShape(*m, "wav2vec2.feature_extractor.conv_layers.6.conv.weight").empty());
  EXPECT_FALSE(
      testing::WeightShape(*m, "wav2vec2.feature_extractor.conv_layers.0.layer_norm.weight")
          .empty());
  EXPECT_TRUE(testing::WeightShape(*m, "wav2vec2.feature_extractor.conv_layers.1.layer_norm.weight")
                  .empty());
  EXPECT_EQ(testing::WeightShape(
                *m, "wav2vec2.encoder.pos_conv_embed.conv.parametrizations.weight.original1"),
            (std::vector<int64_t>{64, 4, 8}));
  auto w = m->InitWeights(2);
  auto batch = m->MakeBatch(2, 2);
  at::Tensor loss = m->Loss(w, batch);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  EXPECT_GT(loss.item<double>(), 0.0);
}

TEST(AudioTest, BadConfigsNameTheField) {
  auto cfg = *Example("WhisperForConditionalGeneration");
  cfg.erase("d_model");
  auto r = BuildPending(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("d_model"), std::string::npos);
  cfg = *Example("Wav2Vec2ForCTC");
  cfg["conv_stride"] = {5, 2};
  r = BuildPending(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("conv_stride"), std::string::npos);
  cfg = *Example("Wav2Vec2ForCTC");
  cfg["feat_extract_norm"] = "batch";
  r = BuildPending(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("feat_extract_norm"), std::string::npos);
}

TEST(AudioTest, WhisperBaseModelAndAudioClassificationHeads) {
  CheckCommon("WhisperModel", {2, 16, 64});
  CheckCommon("WhisperForAudioClassification", {2, 2});
  auto base = Build("WhisperModel");
  EXPECT_FALSE(testing::WeightShape(*base, "encoder.conv1.weight").empty());
  EXPECT_FALSE(testing::WeightShape(*base, "decoder.embed_tokens.weight").empty());
  auto cls = Build("WhisperForAudioClassification");
  EXPECT_EQ(testing::WeightShape(*cls, "projector.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_TRUE(testing::WeightShape(*cls, "decoder.embed_tokens.weight").empty());
}

// The convolutions run as windows + matmul: weight gradients are finite and the same on every
// run (libtorch 1.13's mkldnn conv1d backward returned different garbage each time here).
TEST(AudioTest, ConvWeightGradientsAreFiniteAndDeterministic) {
  for (const char* arch :
       {"WhisperForConditionalGeneration", "Wav2Vec2ForSequenceClassification"}) {
    SCOPED_TRACE(arch);
    auto m = Build(arch);
    auto batch = m->MakeBatch(1, 2);
    const std::string name = std::string(arch).rfind("Whisper", 0) == 0
                                 ? "model.encoder.conv2.weight"
                                 : "wav2vec2.feature_extractor.conv_layers.3.conv.weight";
    std::vector<at::Tensor> grads;
    for (int rep = 0; rep < 2; ++rep) {
      auto w = m->InitWeights(1);
      for (auto& [k, v] : w) v.requires_grad_(true);
      m->Loss(w, batch).backward();
      grads.push_back(w[name].grad().clone());
    }
    EXPECT_TRUE(at::isfinite(grads[0]).all().item<bool>());
    EXPECT_LT(grads[0].norm().item<double>(), 1e3);
    EXPECT_TRUE(at::equal(grads[0], grads[1]));
  }
}

// Every wav2vec2 head is registered (Model and ForCTC were left out while the feature encoder's
// group norm made honest devices fail; see ChannelGroupNorm).
TEST(AudioTest, Wav2Vec2ModelCtcAndSequenceClassificationAreRegistered) {
  for (const char* arch :
       {"Wav2Vec2Model", "Wav2Vec2ForCTC", "Wav2Vec2ForSequenceClassification"}) {
    EXPECT_NE(Entry(arch), nullptr) << arch;
    EXPECT_TRUE(ExampleConfig(arch).ok()) << arch;
  }
}

// transformers' Wav2Vec2GroupNormConvLayer: nn.GroupNorm(num_groups=conv_dim, num_channels=
// conv_dim, affine=True) (transformers/models/wav2vec2/modeling_wav2vec2.py), i.e. each channel
// normalized over time with the biased variance, then w * x + b: ATen's group_norm in double.
TEST(AudioTest, ChannelGroupNormIsGroupNormWithOneChannelPerGroup) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto dbl = at::TensorOptions().dtype(at::kDouble);
  // A large offset against a small spread, as the first conv layer's output has.
  const at::Tensor x = 50 + 0.01 * at::randn({2, 5, 400}, gen, dbl);
  const at::Tensor w = at::randn({5}, gen, dbl), b = at::randn({5}, gen, dbl);
  const at::Tensor want = at::group_norm(x, 5, w, b, 1e-5);
  EXPECT_TRUE(at::allclose(internal::ChannelGroupNorm(x, w, b, 1e-5), want, 1e-9, 1e-9));
}

// transformers' WhisperEncoder.forward: inputs_embeds = gelu(conv1(input_features)), then
// gelu(conv2(...)) with nn.functional.gelu (exact erf) whatever activation_function says
// (transformers/models/whisper/modeling_whisper.py); conv1 k 3 pad 1, conv2 k 3 stride 2 pad 1.
TEST(AudioTest, WhisperStemIsExactGeluWhateverActivationFunction) {
  const int64_t mel = 4, d = 6, t = 10;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const auto dbl = at::TensorOptions().dtype(at::kDouble);
  WeightMap w = {{"enc.conv1.weight", at::randn({d, mel, 3}, gen, dbl)},
                 {"enc.conv1.bias", at::randn({d}, gen, dbl)},
                 {"enc.conv2.weight", at::randn({d, d, 3}, gen, dbl)},
                 {"enc.conv2.bias", at::randn({d}, gen, dbl)}};
  const at::Tensor features = at::randn({2, mel, t}, gen, dbl);
  auto stem = [&](auto act) {
    at::Tensor x = act(at::conv1d(features, w["enc.conv1.weight"], w["enc.conv1.bias"], {1}, {1}));
    x = act(at::conv1d(x, w["enc.conv2.weight"], w["enc.conv2.bias"], {2}, {1}));
    return x.permute({0, 2, 1});
  };
  const at::Tensor want =
      stem([](const at::Tensor& x) { return 0.5 * x * (1.0 + at::erf(x / std::sqrt(2.0))); });
  const at::Tensor relu = stem([](const at::Tensor& x) { return at::relu(x); });
  ASSERT_GT((want - relu).abs().max().item<double>(), 1e-3);
  const at::Tensor got = internal::WhisperStem(w, "enc", features);
  ASSERT_EQ(got.sizes().vec(), (std::vector<int64_t>{2, t / 2, d}));
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-10);
}

// modeling_wav2vec2.py Wav2Vec2ForAudioFrameClassification: `classifier` applied to every frame
// of Wav2Vec2Model's last_hidden_state, logits [B, frames, num_labels].
TEST(AudioTest, AudioFrameClassificationIsTheClassifierOnEveryFrame) {
  auto fc = testing::Build("Wav2Vec2ForAudioFrameClassification");
  ASSERT_TRUE(fc);
  EXPECT_EQ(fc->spec().task, "audio-frame-classification");
  auto base = testing::BuildSibling(*fc, "Wav2Vec2Model");
  ASSERT_TRUE(base);
  const WeightMap w = fc->InitWeights(5, at::kDouble);
  Batch b = fc->MakeBatch(1, 0);
  b.inputs["input_values"] = b.inputs.at("input_values").to(at::kDouble);
  const at::Tensor h = base->Forward(testing::Unprefixed(w, "wav2vec2."), b.inputs)[0];
  const at::Tensor got = fc->Forward(w, b.inputs)[0];
  EXPECT_EQ(got.sizes(), (std::vector<int64_t>{h.size(0), h.size(1), 2}));
  EXPECT_LT(testing::RelDiff(got, at::linear(h, w.at("classifier.weight"),
                                             w.at("classifier.bias"))), 1e-9);
  EXPECT_EQ(b.labels.at("labels").sizes(), (std::vector<int64_t>{h.size(0), h.size(1)}));
  EXPECT_TRUE(std::isfinite(fc->Loss(w, b).item<double>()));
}

// modular_hubert.py: HubertModel returns BaseModelOutput (no extract_features) and its
// HubertFeatureProjection has a layer norm only with feat_proj_layer_norm; the heads hold the
// model as `hubert`. modular_unispeech_sat.py: UniSpeechSatModel always builds masked_spec_embed
// (wav2vec2 only when mask_time_prob or mask_feature_prob is positive); heads under
// `unispeech_sat`.
TEST(AudioTest, HubertAndUniSpeechSatAreWav2Vec2UnderTheirOwnNames) {
  auto hm = testing::Build("HubertModel");
  ASSERT_TRUE(hm);
  EXPECT_EQ(hm->OutputNames(), (std::vector<std::string>{"last_hidden_state"}));
  EXPECT_TRUE(testing::HasWeight(*hm, "feature_projection.layer_norm.weight"));
  nlohmann::json cfg = *ExampleConfig("HubertModel");
  cfg["feat_proj_layer_norm"] = false;
  auto noln = testing::Build("HubertModel", cfg);
  ASSERT_TRUE(noln);
  EXPECT_FALSE(testing::HasWeight(*noln, "feature_projection.layer_norm.weight"));
  cfg["conv_pos_batch_norm"] = true;
  auto bn = BuildModel(cfg, BuildOptions());
  ASSERT_FALSE(bn.ok());
  EXPECT_NE(bn.status().ToString().find("conv_pos_batch_norm"), std::string::npos);
  auto ctc = testing::Build("HubertForCTC");
  ASSERT_TRUE(ctc);
  EXPECT_TRUE(testing::HasWeight(*ctc, "hubert.encoder.layers.0.attention.q_proj.weight"));
  EXPECT_TRUE(testing::HasWeight(*ctc, "lm_head.weight"));
  auto masked = [](const std::string& arch, double prob) {
    nlohmann::json c = *ExampleConfig(arch);
    c["mask_time_prob"] = prob;
    auto m = testing::Build(arch, c);
    for (const auto& e : StateDictShapes(*m))
      if (e.name.find("masked_spec_embed") != std::string::npos) return e.name;
    return std::string();
  };
  EXPECT_EQ(masked("UniSpeechSatForSequenceClassification", 0.0),
            "unispeech_sat.masked_spec_embed");
  EXPECT_EQ(masked("Wav2Vec2ForSequenceClassification", 0.0), "");
  EXPECT_EQ(masked("HubertForSequenceClassification", 0.05), "hubert.masked_spec_embed");
}

// modular_unispeech.py: UniSpeechModel is Wav2Vec2Model without the adapter and its heads are
// Wav2Vec2ForCTC / Wav2Vec2ForSequenceClassification under `unispeech.`; so on the same config
// and weights UniSpeechModel computes Wav2Vec2Model's outputs. UniSpeechConfig's
// ctc_loss_reduction defaults to "mean" (Wav2Vec2Config's to "sum").
TEST(AudioTest, UniSpeechIsWav2Vec2UnderItsNameWithMeanCtcLoss) {
  auto uni = testing::Build("UniSpeechModel");
  ASSERT_TRUE(uni);
  nlohmann::json cfg = uni->spec().tiny_config;
  cfg["model_type"] = "wav2vec2";
  auto w2v = testing::BuildSibling(*uni, "Wav2Vec2Model", cfg);
  ASSERT_TRUE(w2v);
  const WeightMap w = uni->InitWeights(3);
  ASSERT_EQ(w.size(), w2v->WeightShapes().size());
  const Batch b = uni->MakeBatch(1, 2);
  const auto a = uni->Forward(w, b.inputs);
  const auto want = w2v->Forward(w, b.inputs);
  ASSERT_EQ(a.size(), want.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], want[i])) << i;
  auto ctc = testing::Build("UniSpeechForCTC");
  ASSERT_TRUE(ctc);
  EXPECT_TRUE(testing::HasWeight(*ctc, "unispeech.feature_projection.projection.weight"));
  EXPECT_TRUE(testing::HasWeight(*ctc, "lm_head.bias"));
  EXPECT_FALSE(ctc->spec().tiny_config.contains("ctc_loss_reduction"));
  nlohmann::json sum_cfg = ctc->spec().tiny_config;
  sum_cfg["ctc_loss_reduction"] = "sum";
  nlohmann::json mean_cfg = ctc->spec().tiny_config;
  mean_cfg["ctc_loss_reduction"] = "mean";
  auto sum = testing::BuildFull(sum_cfg);
  auto mean = testing::BuildFull(mean_cfg);
  ASSERT_TRUE(sum && mean);
  const WeightMap wc = ctc->InitWeights(4);
  const Batch bc = ctc->MakeBatch(2, 2);
  const double got = ctc->Loss(wc, bc).item<double>();
  EXPECT_DOUBLE_EQ(got, mean->Loss(wc, bc).item<double>());
  EXPECT_GT(std::abs(got - sum->Loss(wc, bc).item<double>()), 1e-3);
}

}  // namespace
}  // namespace ts::zoo
