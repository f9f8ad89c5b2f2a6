// Tests of the decoder trunk (trunks/decoder*: MoE, soft-capping, Conv1D, windows) and the text
// heads (heads/*) through the llama-style families that exercise them (README.md).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/zoo_test_util.h"

namespace ts::zoo {
namespace {

using testing::HasWeight;
using testing::WeightShape;

std::unique_ptr<Model> MustBuild(const nlohmann::json& config, const BuildOptions& opts = {}) {
  auto m = BuildModel(config, opts);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  return std::move(m).value();
}

nlohmann::json Example(const std::string& arch) {
  auto c = ExampleConfig(arch);
  EXPECT_TRUE(c.ok()) << arch;
  return c.ok() ? *c : nlohmann::json::object();
}

nlohmann::json Real(const std::string& file) {
  nlohmann::json c = testing::LoadHfConfig(file);
  EXPECT_TRUE(c.is_object()) << file;
  return c;
}

// ||a - b|| / ||b|| divided in the tensors' own dtype, with no floor on ||b|| (not
// testing::RelDiff, which divides in double).
double RelDiffInDtype(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

const std::vector<std::string> kCausal = {
    "GemmaForCausalLM",      "Gemma2ForCausalLM",     "Qwen3ForCausalLM",
    "Olmo2ForCausalLM",      "PhiForCausalLM",        "Phi3ForCausalLM",
    "StableLmForCausalLM",   "Starcoder2ForCausalLM", "GPT2LMHeadModel",
    "GPTBigCodeForCausalLM", "GPTNeoXForCausalLM",    "MixtralForCausalLM",
    "Qwen2MoeForCausalLM"};

TEST(DecoderTrunkTest, EveryCausalLmShapesFloat64AgreementAndDeterminism) {
  for (const std::string& arch : kCausal) {
    auto m = MustBuild(Example(arch));
    ASSERT_NE(m, nullptr) << arch;
    Batch batch = m->MakeBatch(3, 0);
    auto w32 = m->InitWeights(5, at::kFloat);
    auto w64 = m->InitWeights(5, at::kDouble);
    at::Tensor y32 = m->Forward(w32, batch.inputs)[0];
    at::Tensor y32b = m->Forward(w32, batch.inputs)[0];
    EXPECT_TRUE(at::equal(y32, y32b)) << arch << " is not deterministic";
    EXPECT_EQ(y32.sizes().vec(), (std::vector<int64_t>{2, 32, 512})) << arch;
    TensorMap in64 = batch.inputs;
    at::Tensor y64 = m->Forward(w64, in64)[0];
    EXPECT_EQ(y64.scalar_type(), at::kDouble);
    EXPECT_LT(RelDiffInDtype(y32.to(at::kDouble), y64), 1e-4) << arch;
    EXPECT_TRUE(std::isfinite(m->Loss(w32, batch).item<double>())) << arch;
  }
}

TEST(DecoderTrunkTest, SequenceClassificationPoolsToLabels) {
  for (const char* arch : {"GemmaForSequenceClassification",
                                  "GPT2ForSequenceClassification",
                                  "MixtralForSequenceClassification"}) {
    auto m = MustBuild(Example(arch));
    ASSERT_NE(m, nullptr);
    Batch batch = m->MakeBatch(1, 0);
    auto w = m->InitWeights(1);
    EXPECT_EQ(m->Forward(w, batch.inputs)[0].sizes().vec(), (std::vector<int64_t>{2, 2})) << arch;
    EXPECT_TRUE(HasWeight(*m, "score.weight")) << arch;
  }
}

TEST(DecoderTrunkTest, RealConfigsScaleKeepingStructure) {
  // gemma-2b: MQA (8 heads / 1 kv), head_dim written, tied.
  auto gemma = MustBuild(Real("gemma_2b.json"));
  ASSERT_NE(gemma, nullptr);
  const auto& g = gemma->spec().tiny_config;
  EXPECT_EQ(g["num_attention_heads"], 8);
  EXPECT_EQ(g["num_key_value_heads"], 1);
  EXPECT_EQ(g["head_dim"], 8);
  EXPECT_FALSE(HasWeight(*gemma, "lm_head.weight"));
  // gemma2: GQA 2, softcaps kept, query_pre_attn_scalar keeps its ratio to head_dim, window.
  for (const char* f : {"gemma2_2b-jpn.json", "gemma2_9b.json"}) {
    auto m = MustBuild(Real(f));
    ASSERT_NE(m, nullptr) << f;
    const auto& t = m->spec().tiny_config;
    EXPECT_EQ(t["num_attention_heads"].get<int>() / t["num_key_value_heads"].get<int>(), 2) << f;
    EXPECT_EQ(t["attn_logit_softcapping"], 50.0);
    EXPECT_EQ(t["final_logit_softcapping"], 30.0);
    EXPECT_EQ(t["sliding_window"], 8);
    EXPECT_EQ(t["num_hidden_layers"], 2);
    EXPECT_TRUE(HasWeight(*m, "model.layers.1.pre_feedforward_layernorm.weight"));
    EXPECT_TRUE(HasWeight(*m, "model.layers.1.post_feedforward_layernorm.weight"));
  }
  EXPECT_EQ(MustBuild(Real("gemma2_2b-jpn.json"))->spec().tiny_config["query_pre_attn_scalar"],
            14);  // 224 * 16 / 256
  // phi-msft (n_embd & co): rotary_dim keeps half of head_dim; parallel block, dense naming.
  // phi-1.5: 32 of 64 dims rotated -> 8 of 16; phi-2: 32 of 80 (0.4) -> 6 of 16.
  for (const auto& [f, rd] : {std::pair{"phi-1_5.json", 8}, std::pair{"phi-2.json", 6}}) {
    auto m = MustBuild(Real(f));
    ASSERT_NE(m, nullptr) << f;
    const auto& t = m->spec().tiny_config;
    EXPECT_EQ(t["rotary_dim"], rd) << f;
    EXPECT_EQ(t["n_embd"], 64) << f;
    EXPECT_TRUE(HasWeight(*m, "model.layers.0.self_attn.dense.bias"));
    EXPECT_TRUE(HasWeight(*m, "model.layers.0.mlp.fc1.weight"));
    EXPECT_TRUE(HasWeight(*m, "lm_head.bias"));
    EXPECT_FALSE(HasWeight(*m, "model.layers.0.post_attention_layernorm.weight"));
  }
}

TEST(DecoderTrunkTest, RealConfigsScaleKeepingNormsFusedProjectionsAndExperts) {
  // phi-3.5: longrope factors subsampled to the tiny rotary width, fused projections.
  auto phi3 = MustBuild(Real("phi-3_5.json"));
  ASSERT_NE(phi3, nullptr);
  const auto& p3 = phi3->spec().tiny_config;
  EXPECT_EQ(p3["rope_scaling"]["long_factor"].size(), 8u);
  EXPECT_EQ(p3["original_max_position_embeddings"], 16);
  EXPECT_TRUE(p3["sliding_window"].is_null());  // 262144 >= context: never bites
  EXPECT_EQ(WeightShape(*phi3, "model.layers.0.self_attn.qkv_proj.weight"),
            (std::vector<int64_t>{3 * 64, 64}));
  EXPECT_TRUE(HasWeight(*phi3, "model.layers.0.mlp.gate_up_proj.weight"));
  // qwen3: q/k norms per head.
  auto qwen3 = MustBuild(Real("qwen3_1.7b.json"));
  ASSERT_NE(qwen3, nullptr);
  EXPECT_EQ(WeightShape(*qwen3, "model.layers.0.self_attn.q_norm.weight"),
            (std::vector<int64_t>{16}));
  EXPECT_EQ(qwen3->spec().tiny_config["num_key_value_heads"], 2);
  // olmo2: q/k norms over full projections, no input norm.
  auto olmo2 = MustBuild(Real("olmo2_13b.json"));
  ASSERT_NE(olmo2, nullptr);
  EXPECT_EQ(WeightShape(*olmo2, "model.layers.0.self_attn.k_norm.weight"),
            (std::vector<int64_t>{64}));
  EXPECT_FALSE(HasWeight(*olmo2, "model.layers.0.input_layernorm.weight"));
  // stablelm: partial rotary 0.25 kept; LayerNorm with bias.
  auto slm = MustBuild(Real("stablelm.json"));
  ASSERT_NE(slm, nullptr);
  EXPECT_EQ(slm->spec().tiny_config["partial_rotary_factor"], 0.25);
  EXPECT_TRUE(HasWeight(*slm, "model.norm.bias"));
  // gpt_bigcode: multi-query kept (1 kv head), fused c_attn [h + 2 hd, h].
  auto bc = MustBuild(Real("gpt_bigcode.json"));
  ASSERT_NE(bc, nullptr);
  EXPECT_EQ(bc->spec().tiny_config["n_head"], 8);
  EXPECT_EQ(WeightShape(*bc, "transformer.h.0.attn.c_attn.weight"),
            (std::vector<int64_t>{64 + 16, 64}));
  // gpt_neox (redpajama): sequential residual, full rotary, fused query_key_value.
  auto nx = MustBuild(Real("redpajama_3b_v1.json"));
  ASSERT_NE(nx, nullptr);
  EXPECT_EQ(WeightShape(*nx, "gpt_neox.layers.0.attention.query_key_value.weight"),
            (std::vector<int64_t>{192, 64}));
  EXPECT_TRUE(HasWeight(*nx, "lm_head.weight"));
  // MoE: 4 experts, top_k at most half.
  auto mx = MustBuild(Real("Mixtral-8x7B-v0.1.json"));
  ASSERT_NE(mx, nullptr);
  EXPECT_EQ(mx->spec().tiny_config["num_local_experts"], 4);
  EXPECT_EQ(mx->spec().tiny_config["num_experts_per_tok"], 2);
  // transformers 5's fused experts: gate_up_proj [E, 2I, H], down_proj [E, H, I].
  EXPECT_EQ(WeightShape(*mx, "model.layers.0.mlp.experts.gate_up_proj"),
            (std::vector<int64_t>{4, 2 * mx->spec().tiny_config["intermediate_size"].get<int64_t>(),
                                  mx->spec().tiny_config["hidden_size"].get<int64_t>()}));
  EXPECT_EQ(WeightShape(*mx, "model.layers.0.mlp.experts.down_proj")[0], 4);
  EXPECT_EQ(mx->spec().tiny_config["num_hidden_layers"], 1);  // every Mixtral layer is alike
  auto qm = MustBuild(Real("qwen2moe.json"));
  ASSERT_NE(qm, nullptr);
  EXPECT_EQ(qm->spec().tiny_config["num_experts"], 4);
  EXPECT_EQ(qm->spec().tiny_config["num_experts_per_tok"], 2);
  EXPECT_TRUE(HasWeight(*qm, "model.layers.0.mlp.shared_expert_gate.weight"));
}

TEST(DecoderTrunkTest, FinalSoftcapBoundsLogits) {
  nlohmann::json c = Real("gemma2_2b-jpn.json");
  c["final_logit_softcapping"] = 0.5;
  auto m = MustBuild(c);
  ASSERT_NE(m, nullptr);
  Batch batch = m->MakeBatch(1, 0);
  at::Tensor y = m->Forward(m->InitWeights(1), batch.inputs)[0];
  EXPECT_LE(y.abs().max().item<double>(), 0.5);
  EXPECT_GT(y.abs().max().item<double>(), 0.3);  // it bites
  c["final_logit_softcapping"] = nullptr;
  auto off = MustBuild(c);
  EXPECT_GT(off->Forward(off->InitWeights(1), batch.inputs)[0].abs().max().item<double>(), 0.5);
}

TEST(DecoderTrunkTest, MoeRoutesEachTokenToTopKExperts) {
  auto m = MustBuild(Real("Mixtral-8x7B-v0.1.json"));
  ASSERT_NE(m, nullptr);
  Batch batch = m->MakeBatch(1, 0);
  auto w = m->InitWeights(1);
  at::Tensor base = m->Forward(w, batch.inputs)[0];
  // Zeroing one expert of the (only, last) layer changes only the tokens routed to it: some, not all.
  auto w2 = w;
  const std::string down = "model.layers.0.mlp.experts.down_proj";
  w2[down] = w.at(down).clone();
  w2[down][0].zero_();  // expert 0's slice
  at::Tensor y = m->Forward(w2, batch.inputs)[0];
  at::Tensor changed = (y - base).abs().amax(-1).gt(1e-6);  // [B, S]
  const int64_t n = changed.sum().item<int64_t>();
  EXPECT_GT(n, 0);
  EXPECT_LT(n, changed.numel());
}

TEST(DecoderTrunkTest, Gpt2Conv1DLayoutIsInByOut) {
  auto m = MustBuild(Real("gpt2.json"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(WeightShape(*m, "transformer.h.0.attn.c_attn.weight"), (std::vector<int64_t>{64, 192}));
  EXPECT_EQ(WeightShape(*m, "transformer.h.0.mlp.c_fc.weight"), (std::vector<int64_t>{64, 256}));
  EXPECT_EQ(WeightShape(*m, "transformer.h.0.mlp.c_proj.weight"), (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(WeightShape(*m, "transformer.wpe.weight"), (std::vector<int64_t>{64, 64}));
  EXPECT_FALSE(HasWeight(*m, "lm_head.weight"));  // tied to wte
  // Learned positions: permuting tokens changes logits beyond the permutation.
  Batch batch = m->MakeBatch(1, 0);
  auto w = m->InitWeights(1);
  at::Tensor ids = batch.inputs["input_ids"].narrow(0, 0, 1);
  at::Tensor same = at::full_like(ids, 7);
  at::Tensor y = m->Forward(w, {{"input_ids", same}})[0];
  EXPECT_GT((y[0][0] - y[0][5]).abs().max().item<double>(), 1e-3);
}

TEST(DecoderTrunkTest, SlidingWindowBitesOnAlternateGemma2Layers) {
  nlohmann::json c = Real("gemma2_9b.json");
  c["sliding_window"] = 4096;
  c["num_hidden_layers"] = 1;  // only the sliding layer
  auto one = MustBuild(c);
  ASSERT_NE(one, nullptr);
  Batch batch = one->MakeBatch(1, 1);
  auto w = one->InitWeights(1);
  at::Tensor ids = batch.inputs["input_ids"];
  at::Tensor y = one->Forward(w, {{"input_ids", ids}})[0];
  // Changing token 0 must not affect position 20 (window 8), but must affect position 5.
  at::Tensor ids2 = ids.clone();
  ids2[0][0] = (ids[0][0].item<int64_t>() + 1) % 512;
  at::Tensor y2 = one->Forward(w, {{"input_ids", ids2}})[0];
  EXPECT_LT((y2[0][20] - y[0][20]).abs().max().item<double>(), 1e-6);
  EXPECT_GT((y2[0][5] - y[0][5]).abs().max().item<double>(), 1e-6);
}

TEST(DecoderTrunkTest, BadConfigsNameTheField) {
  auto err = [](nlohmann::json c) {
    auto r = BuildModel(c, BuildOptions());
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  };
  nlohmann::json g = Real("gemma_2b.json");
  g.erase("hidden_size");
  EXPECT_NE(err(g).find("hidden_size: missing"), std::string::npos);
  nlohmann::json gp = Real("gpt2.json");
  gp["n_head"] = "x";
  EXPECT_NE(err(gp).find("n_head:"), std::string::npos);
  nlohmann::json mx = Real("Mixtral-8x7B-v0.1.json");
  mx["num_experts_per_tok"] = 9;
  EXPECT_NE(err(mx).find("num_experts_per_tok:"), std::string::npos);
  nlohmann::json q = Real("qwen3_1.7b.json");
  q["num_key_value_heads"] = 3;
  EXPECT_NE(err(q).find("num_key_value_heads:"), std::string::npos);
  nlohmann::json p3 = Real("phi-3_5.json");
  p3["rope_scaling"]["short_factor"] = {1.0, 2.0};
  EXPECT_NE(err(p3).find("rope_scaling.short_factor:"), std::string::npos);
  nlohmann::json st = Real("stablelm.json");
  st["partial_rotary_factor"] = 1.5;
  EXPECT_NE(err(st).find("partial_rotary_factor:"), std::string::npos);
  nlohmann::json ph = Real("phi-2.json");
  ph["activation_function"] = "nope";
  EXPECT_NE(err(ph).find("activation_function"), std::string::npos);
}


// ---- TokenClassification, QuestionAnswering and base Model heads.

const std::vector<std::string> kTokenCls = {
    "GemmaForTokenClassification",      "Gemma2ForTokenClassification",
    "Qwen3ForTokenClassification",      "PhiForTokenClassification",
    "Phi3ForTokenClassification",       "StableLmForTokenClassification",
    "Starcoder2ForTokenClassification", "GPT2ForTokenClassification",
    "GPTBigCodeForTokenClassification", "GPTNeoXForTokenClassification",
    "MixtralForTokenClassification",    "Qwen2MoeForTokenClassification",
    "LlamaForTokenClassification",      "MistralForTokenClassification",
    "Qwen2ForTokenClassification"};
const std::vector<std::string> kQa = {
    "Qwen3ForQuestionAnswering",   "GPT2ForQuestionAnswering",    "GPTNeoXForQuestionAnswering",
    "MixtralForQuestionAnswering", "Qwen2MoeForQuestionAnswering", "LlamaForQuestionAnswering",
    "MistralForQuestionAnswering", "Qwen2ForQuestionAnswering"};
const std::vector<std::string> kBase = {
    "GemmaModel",      "Gemma2Model",  "Qwen3Model",   "Olmo2Model",    "PhiModel",
    "Phi3Model",       "StableLmModel", "Starcoder2Model", "GPT2Model", "GPTBigCodeModel",
    "GPTNeoXModel",    "MixtralModel", "Qwen2MoeModel", "LlamaModel",  "MistralModel",
    "Qwen2Model"};

TEST(DecoderTrunkTest, TokenClassificationIsPerTokenAndCausal) {
  for (const std::string& arch : kTokenCls) {
    auto m = MustBuild(Example(arch));
    ASSERT_NE(m, nullptr) << arch;
    EXPECT_EQ(m->OutputNames(), (std::vector<std::string>{"logits"}));
    const bool classifier = arch.rfind("GPT", 0) == 0;
    EXPECT_TRUE(HasWeight(*m, classifier ? "classifier.weight" : "score.weight")) << arch;
    EXPECT_TRUE(HasWeight(*m, classifier ? "classifier.bias" : "score.bias")) << arch;
    Batch batch = m->MakeBatch(2, 0);
    const at::Tensor& labels = batch.labels.at("labels");
    const at::Tensor& mask = batch.inputs.at("attention_mask");
    EXPECT_EQ(labels.sizes().vec(), (std::vector<int64_t>{2, 32})) << arch;
    EXPECT_TRUE(labels.masked_select(mask.eq(0)).eq(-100).all().item<bool>()) << arch;
    EXPECT_TRUE(labels.masked_select(mask.ne(0)).ge(0).all().item<bool>()) << arch;
    auto w = m->InitWeights(1);
    at::Tensor y = m->Forward(w, batch.inputs)[0];
    EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 32, 2})) << arch;
    EXPECT_TRUE(std::isfinite(m->Loss(w, batch).item<double>())) << arch;
    // Causal: the last token does not reach earlier positions.
    at::Tensor ids = batch.inputs.at("input_ids").narrow(0, 0, 1).clone();
    at::Tensor a = m->Forward(w, {{"input_ids", ids}})[0];
    ids[0][31] = (ids[0][31].item<int64_t>() + 1) % 512;
    at::Tensor b = m->Forward(w, {{"input_ids", ids}})[0];
    EXPECT_LT((a[0].narrow(0, 0, 31) - b[0].narrow(0, 0, 31)).abs().max().item<double>(), 1e-5)
        << arch;
    EXPECT_GT((a[0][31] - b[0][31]).abs().max().item<double>(), 1e-7) << arch;
  }
}

TEST(DecoderTrunkTest, QuestionAnsweringSplitsStartEndAndAveragesTheLosses) {
  for (const std::string& arch : kQa) {
    auto m = MustBuild(Example(arch));
    ASSERT_NE(m, nullptr) << arch;
    EXPECT_EQ(m->OutputNames(), (std::vector<std::string>{"start_logits", "end_logits"}));
    ASSERT_EQ(WeightShape(*m, "qa_outputs.weight").size(), 2u) << arch;
    EXPECT_EQ(WeightShape(*m, "qa_outputs.weight")[0], 2) << arch;
    EXPECT_EQ(WeightShape(*m, "qa_outputs.bias"), (std::vector<int64_t>{2})) << arch;
    Batch batch = m->MakeBatch(2, 0);
    const at::Tensor& sp = batch.labels.at("start_positions");
    const at::Tensor& ep = batch.labels.at("end_positions");
    EXPECT_EQ(sp.sizes().vec(), (std::vector<int64_t>{2})) << arch;
    EXPECT_TRUE(ep.ge(sp).all().item<bool>()) << arch;
    EXPECT_TRUE(ep.lt(32).all().item<bool>()) << arch;
    auto w = m->InitWeights(1, at::kDouble);
    auto out = m->Forward(w, batch.inputs);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].sizes().vec(), (std::vector<int64_t>{2, 32})) << arch;
    EXPECT_EQ(out[1].sizes().vec(), (std::vector<int64_t>{2, 32})) << arch;
    const double want = (at::cross_entropy_loss(out[0], sp).item<double>() +
                         at::cross_entropy_loss(out[1], ep).item<double>()) / 2;
    EXPECT_NEAR(m->Loss(w, batch).item<double>(), want, 1e-9) << arch;
  }
}

TEST(DecoderTrunkTest, BaseModelsHaveRootWeightNamesAndRegressOntoATarget) {
  for (const std::string& arch : kBase) {
    auto m = MustBuild(Example(arch));
    ASSERT_NE(m, nullptr) << arch;
    EXPECT_EQ(m->OutputNames(), (std::vector<std::string>{"last_hidden_state"}));
    for (const auto& [n, s] : m->WeightShapes()) {
      EXPECT_NE(n.rfind("model.", 0), 0u) << arch << " " << n;
      EXPECT_NE(n.rfind("transformer.", 0), 0u) << arch << " " << n;
      EXPECT_NE(n.rfind("lm_head", 0), 0u) << arch << " " << n;
    }
    Batch batch = m->MakeBatch(2, 0);
    auto w = m->InitWeights(1);
    at::Tensor y = m->Forward(w, batch.inputs)[0];
    const int64_t h = y.size(-1);
    EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 32, h})) << arch;
    EXPECT_EQ(batch.labels.at("labels").sizes().vec(), y.sizes().vec()) << arch;
    EXPECT_EQ(batch.labels.at("labels").scalar_type(), at::kFloat);
    EXPECT_NEAR(m->Loss(w, batch).item<double>(),
                at::mse_loss(y, batch.labels.at("labels")).item<double>(), 1e-6) << arch;
    // Seeded target.
    EXPECT_TRUE(at::equal(batch.labels.at("labels"), m->MakeBatch(2, 0).labels.at("labels")));
  }
  auto gpt2 = MustBuild(Example("GPT2Model"));
  EXPECT_TRUE(HasWeight(*gpt2, "wte.weight"));
  EXPECT_TRUE(HasWeight(*gpt2, "h.0.attn.c_attn.weight"));
  EXPECT_TRUE(HasWeight(*gpt2, "ln_f.weight"));
  auto neox = MustBuild(Example("GPTNeoXModel"));
  EXPECT_TRUE(HasWeight(*neox, "embed_in.weight"));
  EXPECT_TRUE(HasWeight(*neox, "final_layer_norm.weight"));
}

// The two llama entries of each family file agree: LlamaModel's hidden states (classic recipe)
// through LlamaForCausalLM's lm_head (ParseDecoderConfig recipe) give its logits, and the QA
// head reads the same hidden states.
TEST(DecoderTrunkTest, LlamaStyleHeadsAgreeWithTheCausalLmBody) {
  for (const std::string prefix : {"Llama", "Mistral", "Qwen2"}) {
    auto lm = MustBuild(Example(prefix + "ForCausalLM"));
    ASSERT_NE(lm, nullptr) << prefix;
    nlohmann::json tiny = lm->spec().tiny_config;
    BuildOptions base_opts;
    base_opts.arch = prefix + "Model";
    base_opts.tiny = false;
    auto base = MustBuild(tiny, base_opts);
    BuildOptions qa_opts = base_opts;
    qa_opts.arch = prefix + "ForQuestionAnswering";
    auto qa = MustBuild(tiny, qa_opts);
    ASSERT_NE(base, nullptr) << prefix;
    ASSERT_NE(qa, nullptr) << prefix;
    auto w = lm->InitWeights(3, at::kDouble);
    WeightMap wb, wq;
    for (const auto& [n, t] : w) {
      if (n.rfind("model.", 0) == 0) {
        wb[n.substr(6)] = t;
        // transformers 5's LlamaForQuestionAnswering and Qwen2's hold the model as
        // `transformer` (GenericForQuestionAnswering); MistralForQuestionAnswering as `model`.
        wq[(prefix == "Mistral" ? "model." : "transformer.") + n.substr(6)] = t;
      }
    }
    // Same weight names and shapes as the CausalLM's body.
    for (const auto& [n, s] : base->WeightShapes()) {
      ASSERT_TRUE(wb.count(n)) << prefix << " " << n;
      EXPECT_EQ(wb.at(n).sizes().vec(), s) << prefix << " " << n;
    }
    EXPECT_EQ(base->WeightShapes().size(), wb.size()) << prefix;
    Batch batch = lm->MakeBatch(2, 0);
    at::Tensor logits = lm->Forward(w, batch.inputs)[0];
    at::Tensor hidden = base->Forward(wb, batch.inputs)[0];
    at::Tensor via = at::matmul(hidden, w.at("lm_head.weight").t());
    EXPECT_LT(RelDiffInDtype(via, logits), 1e-9) << prefix;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
    wq["qa_outputs.weight"] = at::randn({2, hidden.size(-1)}, gen, at::kDouble);
    wq["qa_outputs.bias"] = at::randn({2}, gen, at::kDouble);
    auto out = qa->Forward(wq, batch.inputs);
    at::Tensor want = at::matmul(hidden, wq["qa_outputs.weight"].t()) + wq["qa_outputs.bias"];
    EXPECT_LT(RelDiffInDtype(out[0], want.select(-1, 0)), 1e-9) << prefix;
    EXPECT_LT(RelDiffInDtype(out[1], want.select(-1, 1)), 1e-9) << prefix;
  }
}

}  // namespace
}  // namespace ts::zoo
