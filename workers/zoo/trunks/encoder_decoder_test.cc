// Tests for the encoder-decoder trunk (encoder_decoder.h) over the t5, mt5, bart and mbart
// families and their heads (README.md).
#include "workers/zoo/trunks/encoder_decoder.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using testing::Build;
using testing::HasWeight;
using testing::RelDiff;

// The first output for the batch as drawn and with decoder token 10 set to 7 (a causal decoder
// leaves positions 0..9 as they were).
std::pair<at::Tensor, at::Tensor> DecoderTokenMoved(const Model& m, const WeightMap& w,
                                                    const Batch& b) {
  at::Tensor base = m.Forward(w, b.inputs)[0];
  TensorMap in = b.inputs;
  in["decoder_input_ids"] = b.inputs.at("decoder_input_ids").clone();
  in["decoder_input_ids"].select(1, 10).fill_(7);
  return {base, m.Forward(w, in)[0]};
}

TEST(Seq2SeqTest, T5TinyKeepsStructureAndRelativeBiasOnlyInBlockZero) {
  auto m = Build("T5ForConditionalGeneration");
  ASSERT_TRUE(m);
  const auto& tc = m->spec().tiny_config;
  EXPECT_EQ(tc["d_model"], 64);
  EXPECT_EQ(tc["num_heads"], 4);
  EXPECT_EQ(tc["d_kv"], 16);
  EXPECT_EQ(tc["num_layers"], 1);  // T5 blocks are alike: one of each stack
  EXPECT_EQ(tc["num_decoder_layers"], 1);
  EXPECT_EQ(tc["relative_attention_num_buckets"], 8);
  EXPECT_TRUE(
      HasWeight(*m, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"));
  EXPECT_TRUE(
      HasWeight(*m, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"));
  EXPECT_TRUE(HasWeight(*m, "decoder.block.0.layer.1.EncDecAttention.q.weight"));
  EXPECT_TRUE(HasWeight(*m, "decoder.block.0.layer.2.DenseReluDense.wi.weight"));
  // At two blocks (the tiny config built as is), block 1 reuses block 0's relative bias.
  nlohmann::json two = tc;
  two["num_layers"] = 2;
  two["num_decoder_layers"] = 2;
  BuildOptions as_is;
  as_is.arch = "T5ForConditionalGeneration";
  as_is.tiny = false;
  auto deep = BuildModel(two, as_is);
  ASSERT_TRUE(deep.ok()) << deep.status().ToString();
  EXPECT_FALSE(
      HasWeight(**deep, "encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"));
  EXPECT_FALSE(
      HasWeight(**deep, "decoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"));
  EXPECT_TRUE(HasWeight(**deep, "decoder.block.1.layer.1.EncDecAttention.q.weight"));
  EXPECT_FALSE(HasWeight(*m, "lm_head.weight"));  // tied (t5-small)
  for (const auto& [n, s] : m->WeightShapes()) EXPECT_EQ(n.find(".bias"), std::string::npos) << n;
  auto g = Build("MT5ForConditionalGeneration");
  EXPECT_TRUE(HasWeight(*g, "encoder.block.0.layer.1.DenseReluDense.wi_0.weight"));
  EXPECT_TRUE(HasWeight(*g, "encoder.block.0.layer.1.DenseReluDense.wi_1.weight"));
  EXPECT_TRUE(HasWeight(*g, "lm_head.weight"));
  EXPECT_FALSE(HasWeight(*Build("T5EncoderModel"), "decoder.final_layer_norm.weight"));
}

TEST(Seq2SeqTest, ShapesLossFloat64AndDeterminism) {
  for (const char* arch : {"T5ForConditionalGeneration", "T5Model", "T5EncoderModel",
                           "MT5ForConditionalGeneration", "MT5Model", "MT5EncoderModel"}) {
    SCOPED_TRACE(arch);
    auto m = Build(arch);
    ASSERT_TRUE(m);
    Batch b = m->MakeBatch(3, 2);
    auto out = m->Forward(m->InitWeights(7), b.inputs);
    ASSERT_EQ(out.size(), m->OutputNames().size());
    const std::string a = arch;
    if (a.find("Conditional") != std::string::npos) {
      EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 16, 512}));
      EXPECT_EQ(out[1].sizes(), (std::vector<int64_t>{2, 32, 64}));
    } else if (a.find("Encoder") != std::string::npos) {
      EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 32, 64}));
    } else {
      EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 16, 64}));
    }
    EXPECT_TRUE(std::isfinite(m->Loss(m->InitWeights(7), b).item<double>()));
    EXPECT_TRUE(at::equal(out[0], m->Forward(m->InitWeights(7), b.inputs)[0]));
    at::Tensor f64 = m->Forward(m->InitWeights(7, at::kDouble), b.inputs)[0];
    EXPECT_EQ(f64.scalar_type(), at::kDouble);
    EXPECT_LT(RelDiff(out[0].to(at::kDouble), f64), 1e-5);
  }
}

TEST(Seq2SeqTest, DecoderIsCausalAndRelativeBiasMatters) {
  auto m = Build("T5ForConditionalGeneration");
  Batch b = m->MakeBatch(1, 2);
  auto w = m->InitWeights(1);
  auto [base, changed] = DecoderTokenMoved(*m, w, b);
  EXPECT_TRUE(at::equal(changed.narrow(1, 0, 10), base.narrow(1, 0, 10)));
  EXPECT_FALSE(at::equal(changed.narrow(1, 10, 6), base.narrow(1, 10, 6)));
  WeightMap w2 = w;
  const std::string rel = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";
  w2[rel] = w.at(rel) * 2.0;
  EXPECT_GT(RelDiff(m->Forward(w2, b.inputs)[0], base), 1e-4);
}

TEST(Seq2SeqTest, EncoderTokenClassificationAndDecoderOnlyCausalLmHeads) {
  for (const char* arch : {"T5ForTokenClassification", "MT5ForTokenClassification"}) {
    SCOPED_TRACE(arch);
    auto m = Build(arch);
    ASSERT_TRUE(m);
    EXPECT_TRUE(HasWeight(*m, "transformer.encoder.block.0.layer.0.SelfAttention.q.weight"));
    EXPECT_TRUE(HasWeight(*m, "classifier.bias"));
    EXPECT_FALSE(HasWeight(*m, "decoder.final_layer_norm.weight"));
    testing::CheckFamilyBasics(m, {2, 32, 2});
  }
  for (const char* arch : {"BartForCausalLM", "MBartForCausalLM"}) {
    SCOPED_TRACE(arch);
    auto m = Build(arch);
    ASSERT_TRUE(m);
    EXPECT_TRUE(HasWeight(*m, "model.decoder.embed_tokens.weight"));
    EXPECT_FALSE(HasWeight(*m, "model.decoder.layers.0.encoder_attn.q_proj.weight"));
    EXPECT_FALSE(HasWeight(*m, "model.encoder.layers.0.fc1.weight"));
    EXPECT_EQ(HasWeight(*m, "model.decoder.layer_norm.weight"),
              std::string(arch) == "MBartForCausalLM");
    const int64_t vocab = m->spec().tiny_config["vocab_size"].get<int64_t>();
    testing::CheckFamilyBasics(m, {2, 32, vocab});
    // Causal: a change at position 20 leaves earlier logits alone.
    auto w = m->InitWeights(1);
    Batch b = m->MakeBatch(1, 1);
    at::Tensor base = m->Forward(w, b.inputs)[0];
    TensorMap in = b.inputs;
    in["input_ids"] = in["input_ids"].clone();
    in["input_ids"][0][20] = 7;
    at::Tensor moved = m->Forward(w, in)[0];
    EXPECT_LT((moved.narrow(1, 0, 20) - base.narrow(1, 0, 20)).abs().max().item<double>(), 1e-6);
    EXPECT_GT((moved.narrow(1, 20, 12) - base.narrow(1, 20, 12)).abs().max().item<double>(), 1e-4);
  }
  auto vit = Build("ViTModel");
  ASSERT_TRUE(vit);
  EXPECT_TRUE(HasWeight(*vit, "embeddings.cls_token"));
  EXPECT_TRUE(HasWeight(*vit, "pooler.dense.weight"));
  EXPECT_FALSE(HasWeight(*vit, "classifier.weight"));
  testing::CheckFamilyBasics(vit, {2, 17, 64});
}

TEST(Seq2SeqTest, BadConfigsNameTheField) {
  auto expect_err = [](const char* field, const nlohmann::json& value, const std::string& needle) {
    testing::ExpectConfigError("T5ForConditionalGeneration", field, value, needle);
  };
  expect_err("d_model", nullptr, "d_model: missing");
  expect_err("feed_forward_proj", "gated-foo", "feed_forward_proj: unknown 'gated-foo'");
  expect_err("relative_attention_num_buckets", 1, "relative_attention_num_buckets: must be >= 2");
  expect_err("num_heads", "x", "num_heads: expected integer");
  expect_err("decoder_start_token_id", 999999, "decoder_start_token_id: must be in");
}

TEST(Seq2SeqTest, BartShapesTiedHeadAndStructure) {
  for (const char* arch :
       {"BartForConditionalGeneration", "BartModel", "BartForSequenceClassification",
        "BartForQuestionAnswering", "MBartForConditionalGeneration", "MBartModel",
        "MBartForSequenceClassification", "MBartForQuestionAnswering"}) {
    SCOPED_TRACE(arch);
    auto m = Build(arch);
    ASSERT_TRUE(m);
    const std::string a = arch;
    const bool mbart = a.rfind("MBart", 0) == 0;
    const std::string pre =
        a.find("Model") != std::string::npos && a.find("For") == std::string::npos ? "" : "model.";
    const auto& tc = m->spec().tiny_config;
    EXPECT_EQ(tc["d_model"], 64);
    EXPECT_EQ(tc["encoder_layers"], 1);
    EXPECT_EQ(tc["max_position_embeddings"], 64);
    EXPECT_TRUE(HasWeight(*m, pre + "shared.weight"));
    EXPECT_TRUE(HasWeight(*m, pre + "encoder.embed_positions.weight"));
    EXPECT_TRUE(HasWeight(*m, pre + "decoder.layernorm_embedding.weight"));
    EXPECT_TRUE(HasWeight(*m, pre + "decoder.layers.0.encoder_attn.k_proj.bias"));
    EXPECT_EQ(HasWeight(*m, pre + "encoder.layer_norm.weight"), mbart);
    EXPECT_EQ(HasWeight(*m, pre + "decoder.layer_norm.weight"), mbart);
    EXPECT_FALSE(HasWeight(*m, "lm_head.weight"));  // tied
    for (const auto& [n, s] : m->WeightShapes()) {
      if (n.find("embed_positions") != std::string::npos) {
        EXPECT_EQ(s[0], 66) << n;  // offset 2
      }
    }
    Batch b = m->MakeBatch(3, 2);
    auto w = m->InitWeights(7);
    auto out = m->Forward(w, b.inputs);
    ASSERT_EQ(out.size(), m->OutputNames().size());
    if (a.find("Conditional") != std::string::npos) {
      EXPECT_TRUE(HasWeight(*m, "final_logits_bias"));
      EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 16, 512}));
      EXPECT_EQ(out[1].sizes(), (std::vector<int64_t>{2, 32, 64}));
    } else if (a.find("Sequence") != std::string::npos) {
      const int64_t labels = a.rfind("MBart", 0) == 0 ? 2 : 3;  // bart-base: 3 labels
      EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, labels}));
    } else if (a.find("Question") != std::string::npos) {
      EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 32}));
      EXPECT_EQ(out[1].sizes(), (std::vector<int64_t>{2, 32}));
    } else {
      EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 16, 64}));
    }
    at::Tensor loss = m->Loss(w, b);
    EXPECT_TRUE(std::isfinite(loss.item<double>()));
    EXPECT_TRUE(at::equal(out[0], m->Forward(m->InitWeights(7), b.inputs)[0]));
    at::Tensor f64 = m->Forward(m->InitWeights(7, at::kDouble), b.inputs)[0];
    EXPECT_EQ(f64.scalar_type(), at::kDouble);
    EXPECT_LT(RelDiff(out[0].to(at::kDouble), f64), 1e-5);
  }
}

TEST(Seq2SeqTest, BartDecoderCausalTiedHeadAndEmbeddingScale) {
  for (const char* arch : {"BartForConditionalGeneration", "MBartForConditionalGeneration"}) {
    SCOPED_TRACE(arch);
    auto m = Build(arch);
    ASSERT_TRUE(m);
    Batch b = m->MakeBatch(1, 2);
    auto w = m->InitWeights(1);
    auto [base, changed] = DecoderTokenMoved(*m, w, b);
    EXPECT_TRUE(at::allclose(changed.narrow(1, 0, 10), base.narrow(1, 0, 10)));
    EXPECT_FALSE(at::allclose(changed.narrow(1, 10, 6), base.narrow(1, 10, 6)));
    // Tied head: logits move when shared moves; final_logits_bias adds per token.
    WeightMap w2 = w;
    w2["final_logits_bias"] = w.at("final_logits_bias") + 1.5;
    EXPECT_TRUE(at::allclose(m->Forward(w2, b.inputs)[0], base + 1.5, 1e-4, 1e-4));
    WeightMap w3 = w;
    w3["model.shared.weight"] = w.at("model.shared.weight") * 1.1;
    EXPECT_GT(RelDiff(m->Forward(w3, b.inputs)[0], base), 1e-3);
  }
  // mbart scales embeddings by sqrt(d_model); bart-base does not.
  EXPECT_EQ(Build("MBartModel")->spec().tiny_config["scale_embedding"], true);
  EXPECT_EQ(Build("BartModel")->spec().tiny_config["scale_embedding"], false);
}

TEST(Seq2SeqTest, BartSequenceClassificationPoolsAtLastEos) {
  auto m = Build("BartForSequenceClassification");
  ASSERT_TRUE(m);
  Batch b = m->MakeBatch(2, 2);
  auto w = m->InitWeights(2);
  at::Tensor base = m->Forward(w, b.inputs)[0];
  // Row 1 is padded after its eos: changing a padded decoder token (after the eos) changes nothing.
  const at::Tensor& ids = b.inputs.at("input_ids");
  const int64_t last_eos = ids[1].eq(2).nonzero().max().item<int64_t>();
  ASSERT_LT(last_eos, ids.size(1) - 1);
  TensorMap in = b.inputs;
  in["decoder_input_ids"] = b.inputs.at("decoder_input_ids").clone();
  in["decoder_input_ids"][1][last_eos + 1].fill_(9);
  EXPECT_TRUE(at::allclose(m->Forward(w, in)[0], base));
  in["decoder_input_ids"][1][last_eos].fill_(9);
  at::Tensor changed = m->Forward(w, in)[0];
  EXPECT_TRUE(at::allclose(changed[0], base[0]));
  EXPECT_FALSE(at::allclose(changed[1], base[1]));
}

TEST(Seq2SeqTest, BartBadConfigsNameTheField) {
  auto expect_err = testing::ExpectConfigError;
  expect_err("BartForConditionalGeneration", "d_model", nullptr, "d_model: missing");
  expect_err("BartForConditionalGeneration", "encoder_attention_heads", 7,
             "encoder_attention_heads: must divide d_model");
  expect_err("BartModel", "activation_function", "swish2", "activation_function");
  expect_err("MBartForConditionalGeneration", "pad_token_id", 999999, "pad_token_id: must be in");
  expect_err("MBartModel", "decoder_layers", 0, "decoder_layers: must be positive");
}

// HF T5Attention._relative_position_bucket at 32 buckets, max distance 128.
TEST(Seq2SeqTest, T5BucketsMatchTransformers) {
  at::Tensor bi = internal::T5Buckets(1, 101, true, 32, 128, at::kCPU);
  EXPECT_EQ(bi[0][0].item<int64_t>(), 0);
  EXPECT_EQ(bi[0][1].item<int64_t>(), 17);    // key after the query: upper half
  EXPECT_EQ(bi[0][7].item<int64_t>(), 23);    // exact up to 8
  EXPECT_EQ(bi[0][100].item<int64_t>(), 31);  // 16 + 8 + int(log(100 / 8) / log(16) * 8)
  at::Tensor causal = internal::T5Buckets(6, 6, false, 32, 128, at::kCPU);
  EXPECT_EQ(causal[5][0].item<int64_t>(), 5);  // 5 keys back
  EXPECT_EQ(causal[0][5].item<int64_t>(), 0);  // future keys share bucket 0
}

// T5Config (transformers/models/t5/configuration_t5.py): dense_act_fn is feed_forward_proj's
// last "-" part, and only "gated-gelu" is remapped to gelu_new; plain "gelu" is ACT2FN["gelu"],
// the exact erf GELU. With the attention output zeroed (o = 0) and identity wi / wo,
// T5EncoderModel is final_layer_norm(x + act(layer_norm(x))) with x = shared[ids]
// (T5LayerFF: hidden + DenseReluDense(layer_norm(hidden))).
TEST(Seq2SeqTest, T5PlainGeluFeedForwardIsExactErfGelu) {
  const nlohmann::json cfg = {{"architectures", {"T5EncoderModel"}},
                              {"model_type", "t5"},
                              {"vocab_size", 16},
                              {"d_model", 8},
                              {"d_kv", 4},
                              {"num_heads", 2},
                              {"d_ff", 8},
                              {"num_layers", 1},
                              {"relative_attention_num_buckets", 8},
                              {"relative_attention_max_distance", 16},
                              {"layer_norm_epsilon", 1e-6},
                              {"feed_forward_proj", "gelu"}};
  BuildOptions o;
  o.tiny = false;
  auto m = BuildModel(cfg, o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  WeightMap w = (*m)->InitWeights(6, at::kDouble);
  auto ends = [](const std::string& n, const std::string& suffix) {
    return n.size() >= suffix.size() &&
           n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (auto& [name, t] : w) {
    if (name.find("layer_norm") != std::string::npos) t = at::ones_like(t);
    if (ends(name, "SelfAttention.o.weight")) t = at::zeros_like(t);
    if (ends(name, "DenseReluDense.wi.weight") || ends(name, "DenseReluDense.wo.weight"))
      t = at::eye(8, at::kDouble);
  }
  const at::Tensor ids = at::arange(2, 9, at::kLong).view({1, 7});
  const TensorMap in = {{"input_ids", ids}, {"attention_mask", at::ones_like(ids)}};
  at::Tensor got = (*m)->Forward(w, in)[0];
  auto rms = [](const at::Tensor& x) {
    return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + 1e-6);
  };
  const at::Tensor x = w.at("shared.weight").index_select(0, ids[0]).unsqueeze(0);
  const at::Tensor n = rms(x);
  const at::Tensor erf = rms(x + 0.5 * n * (1.0 + at::erf(n / std::sqrt(2.0))));
  const at::Tensor tanh = rms(x + at::gelu(n, "tanh"));
  ASSERT_GT((erf - tanh).abs().max().item<double>(), 1e-6);
  EXPECT_LT((got - erf).abs().max().item<double>(), 1e-10);
}

// modeling_t5.py (transformers 5) T5ForSequenceClassification: `transformer` = T5Model run with
// decoder_input_ids = _shift_right(input_ids); the decoder state at the last eos of input_ids
// through T5ClassificationHead (dense, tanh, out_proj). T5ForQuestionAnswering holds the stacks
// itself and applies qa_outputs to every decoder state, split into start / end logits.
TEST(Seq2SeqTest, T5SequenceClassificationAndQuestionAnsweringOverT5Model) {
  auto sc = Build("T5ForSequenceClassification");
  ASSERT_TRUE(sc);
  EXPECT_EQ(sc->spec().task, "text-classification");
  auto base = testing::BuildSibling(*sc, "T5Model");
  auto qa = testing::BuildSibling(*sc, "T5ForQuestionAnswering");
  ASSERT_TRUE(base && qa);
  const WeightMap w = sc->InitWeights(3, at::kDouble);
  const WeightMap wb = testing::Unprefixed(w, "transformer.");
  EXPECT_EQ(wb.size(), base->WeightShapes().size());
  Batch batch = sc->MakeBatch(1, 0);
  const at::Tensor ids = batch.inputs.at("input_ids");
  const int64_t eos = sc->spec().tiny_config["eos_token_id"].get<int64_t>();
  // decoder_input_ids are input_ids shifted right behind decoder_start_token_id (pad, 0).
  EXPECT_TRUE(at::equal(batch.inputs.at("decoder_input_ids").narrow(1, 1, ids.size(1) - 1),
                        ids.narrow(1, 0, ids.size(1) - 1)));
  const at::Tensor dec = base->Forward(wb, batch.inputs)[0];
  const at::Tensor last = (at::arange(ids.size(1)) * ids.eq(eos).to(at::kLong)).argmax(-1);
  at::Tensor pooled = dec.index({at::arange(ids.size(0)), last});
  pooled = at::tanh(at::linear(pooled, w.at("classification_head.dense.weight"),
                               w.at("classification_head.dense.bias")));
  const at::Tensor want = at::linear(pooled, w.at("classification_head.out_proj.weight"),
                                     w.at("classification_head.out_proj.bias"));
  EXPECT_LT(RelDiff(sc->Forward(w, batch.inputs)[0], want), 1e-9);
  WeightMap wq = wb;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(2);
  wq["qa_outputs.weight"] = at::randn({2, dec.size(-1)}, gen, at::kDouble);
  wq["qa_outputs.bias"] = at::randn({2}, gen, at::kDouble);
  const auto out = qa->Forward(wq, batch.inputs);
  const at::Tensor logits = at::linear(dec, wq["qa_outputs.weight"], wq["qa_outputs.bias"]);
  EXPECT_LT(RelDiff(out[0], logits.select(-1, 0)), 1e-9);
  EXPECT_LT(RelDiff(out[1], logits.select(-1, 1)), 1e-9);
}

// UMT5 (modeling_umt5.py UMT5LayerSelfAttention: UMT5Attention(has_relative_attention_bias=True)
// in every layer; UMT5Attention.forward computes its own position_bias from its own table):
// each self-attention block owns relative_attention_bias. With block 1's table a copy of block
// 0's, UMT5Model computes MT5Model's function (block 0's bias shared, modeling_t5.py T5Stack);
// with its own table, block 1's bias changes the output. Cross-attention has no table.
TEST(Seq2SeqTest, Umt5EveryBlockOwnsItsRelativeBias) {
  auto u = Build("UMT5Model");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->spec().tiny_config["num_layers"], 2);
  EXPECT_EQ(u->spec().tiny_config["num_decoder_layers"], 2);
  const std::string rel = ".layer.0.SelfAttention.relative_attention_bias.weight";
  for (const char* stack : {"encoder", "decoder"})
    for (int blk : {0, 1})
      EXPECT_TRUE(HasWeight(*u, std::string(stack) + ".block." + std::to_string(blk) + rel))
          << stack << blk;
  EXPECT_FALSE(
      HasWeight(*u, "decoder.block.1.layer.1.EncDecAttention.relative_attention_bias.weight"));
  BuildOptions as_mt5;
  as_mt5.arch = "MT5Model";
  as_mt5.tiny = false;
  auto mt5 = BuildModel(u->spec().tiny_config, as_mt5);
  ASSERT_TRUE(mt5.ok()) << mt5.status().ToString();
  const WeightMap w = u->InitWeights(5, at::kDouble);
  WeightMap shared_bias;  // MT5Model's weights: every weight but block 1's tables
  for (const auto& [name, shape] : (*mt5)->WeightShapes()) shared_bias[name] = w.at(name);
  EXPECT_EQ(shared_bias.size() + 2, w.size());
  WeightMap copied = w;
  for (const char* stack : {"encoder", "decoder"})
    copied[std::string(stack) + ".block.1" + rel] = w.at(std::string(stack) + ".block.0" + rel);
  Batch b = u->MakeBatch(2, 1);
  const auto want = (*mt5)->Forward(shared_bias, b.inputs);
  const auto got = u->Forward(copied, b.inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(RelDiff(got[i], want[i]), 1e-12) << i;
  for (const char* stack : {"encoder", "decoder"}) {
    WeightMap own = copied;
    const std::string n = std::string(stack) + ".block.1" + rel;
    own[n] = w.at(n);
    EXPECT_GT(RelDiff(u->Forward(own, b.inputs)[0], want[0]), 1e-6) << stack;
  }
}

// MvpConfig's use_prompt adds prompt modules the zoo does not build: refused, naming the field.
// PLBartConfig's scale_embedding defaults to true (BART's to false).
TEST(Seq2SeqTest, MvpRefusesPromptsAndPlbartScalesEmbeddingsByDefault) {
  nlohmann::json mvp = *ExampleConfig("MvpForConditionalGeneration");
  mvp["use_prompt"] = true;
  auto bad = BuildModel(mvp, BuildOptions());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("use_prompt"), std::string::npos);
  nlohmann::json pl = *ExampleConfig("PLBartModel");
  auto on = Build("PLBartModel", pl);
  pl.erase("scale_embedding");
  auto dflt = Build("PLBartModel", pl);
  pl["scale_embedding"] = false;
  auto off = Build("PLBartModel", pl);
  ASSERT_TRUE(on && dflt && off);
  const WeightMap w = on->InitWeights(1);
  Batch b = on->MakeBatch(1, 0);
  const at::Tensor y = on->Forward(w, b.inputs)[0];
  EXPECT_TRUE(at::equal(dflt->Forward(w, b.inputs)[0], y));
  EXPECT_GT((off->Forward(w, b.inputs)[0] - y).abs().max().item<double>(), 1e-4);
}

}  // namespace
}  // namespace ts::zoo
