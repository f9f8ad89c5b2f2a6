// Tests of the recipe decoder families (families/*.cc over trunks/decoder*; README.md).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using testing::Build;

const std::set<std::string> kFamilies = {
    "helium",   "ministral", "arcee", "seed_oss", "smollm3", "glm",         "glm4",
    "ernie4_5", "granite",   "olmo",  "nemotron", "exaone4", "gemma3_text", "cohere",
    "cohere2",  "persimmon", "gptj",  "codegen",  "falcon",  "bloom",       "mpt",
    "opt",      "gpt_neo",   "xglm",  "biogpt"};


nlohmann::json Tiny(const std::string& arch) {
  auto m = Build(arch);
  return m ? m->spec().tiny_config : nlohmann::json();
}

TEST(DecoderFamiliesTest, EveryClassHasItsOutputShapeAndPassesTheFamilyBasics) {
  int n = 0;
  std::set<std::string> seen;
  for (const auto& a : SupportedArchitectures()) {
    if (!kFamilies.count(a.family)) continue;
    SCOPED_TRACE(a.arch);
    seen.insert(a.family);
    ++n;
    auto m = Build(a.arch);
    ASSERT_TRUE(m);
    const auto& tc = m->spec().tiny_config;
    const int64_t s = tc["touchstone_tiny"]["seq_len"].get<int64_t>();
    std::vector<int64_t> shape;
    const std::string& arch = a.arch;
    auto ends = [&](const std::string& suf) {
      return arch.size() >= suf.size() &&
             arch.compare(arch.size() - suf.size(), suf.size(), suf) == 0;
    };
    int64_t vocab = 0;
    for (const char* f : {"vocab_size"}) vocab = tc[f].get<int64_t>();
    if (ends("ForCausalLM")) {
      shape = {2, s, vocab};
    } else if (ends("ForSequenceClassification")) {
      shape = {2, 2};
    } else if (ends("ForTokenClassification")) {
      shape = {2, s, 2};
    } else if (ends("ForQuestionAnswering")) {
      shape = {2, s};
    } else {
      const auto out = m->Forward(m->InitWeights(1), m->MakeBatch(1, 2).inputs);
      shape = {2, s, out[0].size(2)};
    }
    testing::CheckFamilyBasics(m, shape);
  }
  EXPECT_EQ(seen, kFamilies);
  EXPECT_GE(n, 90);
}

TEST(DecoderFamiliesTest, HfWeightNamesAndShapes) {
  auto bloom = Build("BloomForCausalLM");
  ASSERT_TRUE(bloom);
  EXPECT_EQ(testing::WeightShape(*bloom, "transformer.word_embeddings_layernorm.bias"),
            (std::vector<int64_t>{64}));
  EXPECT_EQ(testing::WeightShape(*bloom, "transformer.h.0.self_attention.query_key_value.weight"),
            (std::vector<int64_t>{192, 64}));
  EXPECT_TRUE(testing::WeightShape(*bloom, "lm_head.weight").empty());  // tied
  auto opt = Build("OPTModel");
  ASSERT_TRUE(opt);
  EXPECT_EQ(testing::WeightShape(*opt, "decoder.embed_positions.weight"),
            (std::vector<int64_t>{66, 64}));
  EXPECT_FALSE(testing::WeightShape(*opt, "decoder.layers.0.fc1.bias").empty());
  auto falcon = Build("FalconForCausalLM");  // MQA: 8 query heads, one kv head of 8
  ASSERT_TRUE(falcon);
  EXPECT_EQ(testing::WeightShape(*falcon, "transformer.h.0.self_attention.query_key_value.weight"),
            (std::vector<int64_t>{80, 64}));
  EXPECT_TRUE(
      testing::WeightShape(*falcon, "transformer.h.0.post_attention_layernorm.weight").empty());
  auto mpt = Build("MptForTokenClassification");
  ASSERT_TRUE(mpt);
  EXPECT_FALSE(testing::WeightShape(*mpt, "transformer.blocks.0.attn.Wqkv.weight").empty());
  EXPECT_TRUE(testing::WeightShape(*mpt, "transformer.blocks.0.norm_1.bias").empty());
  EXPECT_FALSE(testing::WeightShape(*mpt, "classifier.bias").empty());
  auto gptj = Build("GPTJForCausalLM");
  ASSERT_TRUE(gptj);
  EXPECT_FALSE(testing::WeightShape(*gptj, "lm_head.bias").empty());
  EXPECT_FALSE(testing::WeightShape(*gptj, "transformer.h.0.mlp.fc_in.weight").empty());
  auto olmo = Build("OlmoForCausalLM");
  ASSERT_TRUE(olmo);
  EXPECT_TRUE(testing::WeightShape(*olmo, "model.layers.0.input_layernorm.weight").empty());
  auto glm4 = Build("Glm4Model");
  ASSERT_TRUE(glm4);
  EXPECT_FALSE(testing::WeightShape(*glm4, "layers.0.post_mlp_layernorm.weight").empty());
  EXPECT_FALSE(testing::WeightShape(*glm4, "layers.0.mlp.gate_up_proj.weight").empty());
  EXPECT_TRUE(testing::WeightShape(*glm4, "layers.0.self_attn.o_proj.bias").empty());
  // Identical layers scale to one (a second would repeat the same ops on the same shapes).
  EXPECT_EQ(glm4->spec().tiny_config["num_hidden_layers"], 1);
  EXPECT_TRUE(testing::WeightShape(*glm4, "layers.1.mlp.gate_up_proj.weight").empty());
  auto neo = Build("GPTNeoForTokenClassification");
  ASSERT_TRUE(neo);
  EXPECT_FALSE(testing::WeightShape(*neo, "transformer.h.0.attn.attention.out_proj.bias").empty());
  EXPECT_TRUE(testing::WeightShape(*neo, "transformer.h.0.attn.attention.q_proj.bias").empty());
  auto bio = Build("BioGptForCausalLM");
  ASSERT_TRUE(bio);
  EXPECT_FALSE(testing::WeightShape(*bio, "biogpt.embed_positions.weight").empty());
  auto pers = Build("PersimmonForCausalLM");
  ASSERT_TRUE(pers);
  EXPECT_EQ(testing::WeightShape(*pers, "model.layers.0.self_attn.q_layernorm.bias"),
            (std::vector<int64_t>{16}));
}

// The layouts of olmo3 / flex_olmo (modular_olmo3.py, modular_flex_olmo.py: post-norm blocks, no
// input_layernorm, whole-projection q/k norms; flex_olmo's experts fused), vaultgemma
// (modular_vaultgemma.py: gemma2 without post_attention_layernorm / post_feedforward_layernorm)
// and cwm (modeling_cwm.py: bias-free attention), and their default layer patterns: olmo3
// slides on (i + 1) % 4 != 0, cwm is full on i % 4 == 0.
TEST(DecoderFamiliesTest, OlmoVaultGemmaAndCwmLayouts) {
  using testing::WeightShape;
  auto olmo3 = Build("Olmo3Model");
  ASSERT_TRUE(olmo3);
  EXPECT_TRUE(WeightShape(*olmo3, "layers.0.input_layernorm.weight").empty());
  EXPECT_FALSE(WeightShape(*olmo3, "layers.0.post_feedforward_layernorm.weight").empty());
  EXPECT_EQ(WeightShape(*olmo3, "layers.0.self_attn.q_norm.weight"), (std::vector<int64_t>{64}));
  EXPECT_EQ(olmo3->spec().tiny_config["layer_types"],
            nlohmann::json::array({"sliding_attention", "full_attention"}));
  auto flex = Build("FlexOlmoForCausalLM");
  ASSERT_TRUE(flex);
  EXPECT_TRUE(WeightShape(*flex, "model.layers.0.input_layernorm.weight").empty());
  EXPECT_FALSE(WeightShape(*flex, "model.layers.0.post_attention_layernorm.weight").empty());
  const auto gate_up = WeightShape(*flex, "model.layers.0.mlp.experts.gate_up_proj");
  ASSERT_EQ(gate_up.size(), 3u);
  EXPECT_EQ(gate_up[0], flex->spec().tiny_config["num_experts"].get<int64_t>());
  EXPECT_EQ(gate_up[2], 64);
  auto vault = Build("VaultGemmaForCausalLM");
  ASSERT_TRUE(vault);
  EXPECT_FALSE(WeightShape(*vault, "model.layers.0.pre_feedforward_layernorm.weight").empty());
  EXPECT_FALSE(WeightShape(*vault, "model.layers.0.input_layernorm.weight").empty());
  EXPECT_TRUE(WeightShape(*vault, "model.layers.0.post_attention_layernorm.weight").empty());
  EXPECT_TRUE(WeightShape(*vault, "model.layers.0.post_feedforward_layernorm.weight").empty());
  // final_logit_softcapping 30: tanh(x / 30) * 30.
  WeightMap w = vault->InitWeights(2);
  for (auto& [n, t] : w) t = t * 8.0;
  const at::Tensor logits = vault->Forward(w, vault->MakeBatch(1, 2).inputs)[0];
  EXPECT_LE(logits.abs().max().item<double>(), 30.0);
  EXPECT_GT(logits.abs().max().item<double>(), 10.0);
  auto cwm = Build("CwmModel");
  ASSERT_TRUE(cwm);
  EXPECT_TRUE(WeightShape(*cwm, "layers.0.self_attn.q_proj.bias").empty());
  EXPECT_EQ(cwm->spec().tiny_config["layer_types"],
            nlohmann::json::array({"full_attention", "sliding_attention"}));
  // A config's own layer_types wins over the default pattern: all full, no window at all.
  nlohmann::json all_full = *ExampleConfig("CwmModel");
  all_full["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 64; ++i) all_full["layer_types"].push_back("full_attention");
  auto full = Build("CwmModel", all_full);
  ASSERT_TRUE(full);
  EXPECT_FALSE(full->spec().tiny_config.contains("layer_types"));
}

// The DeepSeek lineage's layouts, from each modular file: glm4_moe (q/k/v bias without o_proj's,
// a dense first layer, the V3 router's e_score_correction_bias, ungated shared_experts),
// solar_open (every layer MoE), dots1 (Qwen3 q/k norms; the expert counts have no default),
// exaone_moe (NoPE full layers: [sliding, full] at tiny size), youtu and glm4_moe_lite (MLA;
// youtu dense and tied), deepseek_v2 (no correction bias: the softmax router).
TEST(DecoderFamiliesTest, DeepseekLineageLayouts) {
  using testing::WeightShape;
  auto glm = Build("Glm4MoeModel");
  ASSERT_TRUE(glm);
  EXPECT_FALSE(WeightShape(*glm, "layers.0.self_attn.q_proj.bias").empty());
  EXPECT_TRUE(WeightShape(*glm, "layers.0.self_attn.o_proj.bias").empty());
  EXPECT_FALSE(WeightShape(*glm, "layers.0.mlp.gate_proj.weight").empty());  // dense first
  EXPECT_FALSE(WeightShape(*glm, "layers.1.mlp.gate.e_score_correction_bias").empty());
  EXPECT_FALSE(WeightShape(*glm, "layers.1.mlp.shared_experts.down_proj.weight").empty());
  EXPECT_TRUE(WeightShape(*glm, "layers.1.mlp.shared_expert_gate.weight").empty());
  auto solar = Build("SolarOpenModel");
  ASSERT_TRUE(solar);
  EXPECT_TRUE(WeightShape(*solar, "layers.0.mlp.gate_proj.weight").empty());
  EXPECT_FALSE(WeightShape(*solar, "layers.0.mlp.experts.gate_up_proj").empty());
  EXPECT_FALSE(solar->spec().tiny_config.contains("intermediate_size"));
  auto dots = Build("Dots1Model");
  ASSERT_TRUE(dots);
  EXPECT_FALSE(WeightShape(*dots, "layers.0.self_attn.q_norm.weight").empty());
  testing::ExpectConfigError("Dots1ForCausalLM", "n_routed_experts", nullptr,
                             "n_routed_experts");
  auto exa = Build("ExaoneMoeModel");
  ASSERT_TRUE(exa);
  EXPECT_EQ(exa->spec().tiny_config["layer_types"],
            nlohmann::json::array({"sliding_attention", "full_attention"}));
  auto youtu = Build("YoutuForCausalLM");
  ASSERT_TRUE(youtu);
  EXPECT_TRUE(WeightShape(*youtu, "lm_head.weight").empty());  // tied
  EXPECT_FALSE(WeightShape(*youtu, "model.layers.0.self_attn.q_a_layernorm.weight").empty());
  EXPECT_TRUE(WeightShape(*youtu, "model.layers.0.mlp.gate.weight").empty());
  auto lite = Build("Glm4MoeLiteModel");
  ASSERT_TRUE(lite);
  EXPECT_FALSE(WeightShape(*lite, "layers.0.self_attn.kv_b_proj.weight").empty());
  EXPECT_FALSE(WeightShape(*lite, "layers.0.mlp.gate_proj.weight").empty());
  EXPECT_FALSE(WeightShape(*lite, "layers.1.mlp.gate.e_score_correction_bias").empty());
  auto v2 = Build("DeepseekV2ForCausalLM");
  ASSERT_TRUE(v2);
  EXPECT_TRUE(WeightShape(*v2, "model.layers.1.mlp.gate.e_score_correction_bias").empty());
  EXPECT_FALSE(WeightShape(*v2, "model.layers.1.self_attn.q_proj.weight").empty());  // no q LoRA
  testing::ExpectConfigError("DeepseekV2ForCausalLM", "num_experts_per_tok", nullptr,
                             "num_experts_per_tok");
  // minimax_m2: the correction bias on the MoE block, whole-projection q/k norms, no shared
  // expert, experts intermediate_size wide.
  auto mm = Build("MiniMaxM2Model");
  ASSERT_TRUE(mm);
  EXPECT_FALSE(WeightShape(*mm, "layers.0.mlp.e_score_correction_bias").empty());
  EXPECT_TRUE(WeightShape(*mm, "layers.0.mlp.gate.e_score_correction_bias").empty());
  EXPECT_TRUE(WeightShape(*mm, "layers.0.mlp.shared_experts.up_proj.weight").empty());
  const auto& mt = mm->spec().tiny_config;
  EXPECT_EQ(WeightShape(*mm, "layers.0.self_attn.q_norm.weight"),
            (std::vector<int64_t>{mt["num_attention_heads"].get<int64_t>() *
                                  mt["head_dim"].get<int64_t>()}));
  EXPECT_EQ(WeightShape(*mm, "layers.0.mlp.experts.down_proj")[2],
            mt["intermediate_size"].get<int64_t>());
  // ernie4_5_moe: the [1, E] moe_statics correction bias, a dense first layer
  // (moe_layer_start_index 1), shared experts.
  auto ernie = Build("Ernie4_5_MoeModel");
  ASSERT_TRUE(ernie);
  EXPECT_EQ(WeightShape(*ernie, "layers.1.mlp.gate.moe_statics.e_score_correction_bias"),
            (std::vector<int64_t>{1, ernie->spec().tiny_config["moe_num_experts"].get<int64_t>()}));
  EXPECT_FALSE(WeightShape(*ernie, "layers.0.mlp.gate_proj.weight").empty());
  EXPECT_FALSE(WeightShape(*ernie, "layers.1.mlp.shared_experts.gate_proj.weight").empty());
  // jais2: LayerNorm with bias, the non-gated relu2 MLP, biases on by default.
  auto jais = Build("Jais2Model");
  ASSERT_TRUE(jais);
  EXPECT_FALSE(WeightShape(*jais, "layers.0.input_layernorm.bias").empty());
  EXPECT_FALSE(WeightShape(*jais, "layers.0.self_attn.o_proj.bias").empty());
  EXPECT_FALSE(WeightShape(*jais, "layers.0.mlp.up_proj.bias").empty());
  EXPECT_TRUE(WeightShape(*jais, "layers.0.mlp.gate_proj.weight").empty());
  EXPECT_FALSE(WeightShape(*jais, "norm.bias").empty());
}

TEST(DecoderFamiliesTest, TinyScalingKeepsLayerPatternsAndMultipliers) {
  EXPECT_EQ(Tiny("Gemma3ForCausalLM")["layer_types"],
            nlohmann::json::array({"sliding_attention", "full_attention"}));
  EXPECT_EQ(Tiny("Gemma3ForCausalLM")["sliding_window"], 8);
  EXPECT_EQ(Tiny("SmolLM3Model")["no_rope_layers"], nlohmann::json::array({1, 0}));
  EXPECT_EQ(Tiny("Exaone4Model")["layer_types"],
            nlohmann::json::array({"sliding_attention", "full_attention"}));
  EXPECT_EQ(Tiny("Cohere2Model")["layer_types"],
            nlohmann::json::array({"sliding_attention", "full_attention"}));
  EXPECT_EQ(Tiny("GPTNeoModel")["attention_types"],
            nlohmann::json::parse(R"([[["global","local"],1]])"));
  EXPECT_EQ(Tiny("GPTNeoModel")["window_size"], 8);
  const auto falcon = Tiny("FalconModel");
  EXPECT_EQ(falcon["num_attention_heads"], 8);
  EXPECT_EQ(falcon["hidden_size"], 64);
  // Granite's attention_multiplier is 1/head_dim in the checkpoint and stays so (head_dim 16).
  EXPECT_DOUBLE_EQ(Tiny("GraniteModel")["attention_multiplier"].get<double>(), 1.0 / 16);
  EXPECT_EQ(Tiny("GPTJModel")["rotary_dim"], 4);  // 64 of 256 -> 4 of 16
}

// Positions from the mask's cumsum (OPT, BioGPT) and ALiBi (Bloom, MPT, relative by
// construction): left padding does not change the last token's output.
TEST(DecoderFamiliesTest, LeftPaddingLeavesTheLastTokenUnchanged) {
  for (const char* arch : {"OPTModel", "BioGptModel", "BloomModel", "MptModel"}) {
    SCOPED_TRACE(arch);
    auto m = Build(arch);
    ASSERT_TRUE(m);
    auto w = m->InitWeights(5);
    Batch b = m->MakeBatch(5, 1);
    at::Tensor ids = b.inputs["input_ids"].narrow(1, 0, 12);
    TensorMap plain{{"input_ids", ids}, {"attention_mask", at::ones_like(ids)}};
    at::Tensor pad = at::full({1, 4}, 1, ids.options());
    TensorMap padded{{"input_ids", at::cat({pad, ids}, 1)},
                     {"attention_mask", at::cat({at::zeros_like(pad), at::ones_like(ids)}, 1)}};
    at::Tensor a = m->Forward(w, plain)[0].select(1, 11);
    at::Tensor c = m->Forward(w, padded)[0].select(1, 15);
    EXPECT_LT((a - c).abs().max().item<double>(), 1e-4);
  }
  // Learned positions from arange (GPT-Neo) do move with left padding.
  auto neo = Build("GPTNeoModel");
  ASSERT_TRUE(neo);
  auto w = neo->InitWeights(5);
  at::Tensor ids = neo->MakeBatch(5, 1).inputs["input_ids"].narrow(1, 0, 12);
  at::Tensor pad = at::full({1, 4}, 1, ids.options());
  at::Tensor a =
      neo->Forward(w, {{"input_ids", ids}, {"attention_mask", at::ones_like(ids)}})[0].select(1,
                                                                                              11);
  at::Tensor c =
      neo->Forward(w,
                   {{"input_ids", at::cat({pad, ids}, 1)},
                    {"attention_mask", at::cat({at::zeros_like(pad), at::ones_like(ids)}, 1)}})[0]
          .select(1, 15);
  EXPECT_GT((a - c).abs().max().item<double>(), 1e-3);
}

TEST(DecoderFamiliesTest, LogitMultipliersScaleTheLogits) {
  for (const auto& [arch, field, factor] :
       std::vector<std::tuple<std::string, std::string, double>>{
           {"CohereForCausalLM", "logit_scale", 2.0},
           {"GraniteForCausalLM", "logits_scaling", 0.5}}) {
    SCOPED_TRACE(arch);
    nlohmann::json cfg = *ExampleConfig(arch);
    auto m1 = Build(arch, cfg);
    cfg[field] = cfg[field].get<double>() * factor;
    auto m2 = Build(arch, cfg);
    ASSERT_TRUE(m1 && m2);
    auto w = m1->InitWeights(2);
    auto in = m1->MakeBatch(2, 2).inputs;
    at::Tensor l1 = m1->Forward(w, in)[0], l2 = m2->Forward(w, in)[0];
    const double expect = field == "logit_scale" ? factor : 1.0 / factor;
    EXPECT_LT((l2 - l1 * expect).abs().max().item<double>(), 1e-4 * l1.abs().max().item<double>());
  }
}

TEST(DecoderFamiliesTest, RotaryVariantsMatter) {
  // Gemma3's sliding layers use rope_local_base_freq; Cohere2's full layers are NoPE.
  nlohmann::json g = *ExampleConfig("Gemma3TextModel");
  auto g1 = Build("Gemma3TextModel", g);
  g["rope_local_base_freq"] = 500.0;
  auto g2 = Build("Gemma3TextModel", g);
  ASSERT_TRUE(g1 && g2);
  auto w = g1->InitWeights(4);
  auto in = g1->MakeBatch(4, 2).inputs;
  EXPECT_GT((g1->Forward(w, in)[0] - g2->Forward(w, in)[0]).abs().max().item<double>(), 1e-4);
}

TEST(DecoderFamiliesTest, BadFieldsAreNamed) {
  nlohmann::json f = *ExampleConfig("FalconForCausalLM");
  f["apply_residual_connection_post_layernorm"] = true;
  auto r = BuildModel(f, BuildOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("apply_residual_connection_post_layernorm"),
            std::string::npos);
  nlohmann::json m = *ExampleConfig("MptModel");
  m["attn_config"]["alibi"] = false;
  r = BuildModel(m, BuildOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("attn_config.alibi"), std::string::npos);
  nlohmann::json n = *ExampleConfig("GPTNeoModel");
  n["attention_types"] = nlohmann::json::parse(R"([[["global","local"],5]])");
  r = BuildModel(n, BuildOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("attention_types"), std::string::npos);
}

// A field the HF class never reads cannot fail the load or change the model: GPTJAttention's
// rotary table is create_sinusoidal_positions(max_positions, rotary_dim) with base 10000
// (transformers/models/gptj/modeling_gptj.py), OPT's positions are learned
// (OPTLearnedPositionalEmbedding), and only PhiAttention / StableLmAttention read qk_layernorm.
// A field the class reads with a value it rejects still fails, naming the field.
TEST(DecoderFamiliesTest, FieldsTheHfClassIgnoresDoNotFailTheLoad) {
  using Field = std::tuple<std::string, std::string, nlohmann::json>;
  for (const auto& [arch, field, value] : std::vector<Field>{
           {"GPTJForCausalLM", "rope_scaling", {{"rope_type", "gptj"}}},
           {"CodeGenForCausalLM", "rope_parameters", {{"rope_type", "nope"}}},
           {"OPTForCausalLM", "rope_scaling", {{"rope_type", "nope"}}},
           {"BloomForCausalLM", "rope_theta", "x"},
           {"Qwen3ForCausalLM", "qk_layernorm", true},
           {"GemmaForCausalLM", "qk_layernorm", true}}) {
    SCOPED_TRACE(arch + " " + field);
    nlohmann::json cfg = *ExampleConfig(arch);
    auto plain = Build(arch, cfg);
    cfg[field] = value;
    auto with = Build(arch, cfg);
    ASSERT_TRUE(plain && with);
    auto w = plain->InitWeights(3);
    auto in = plain->MakeBatch(3, 2).inputs;
    EXPECT_TRUE(at::equal(plain->Forward(w, in)[0], with->Forward(w, in)[0]));
  }
  for (const auto& [arch, field, value, needle] :
       std::vector<std::tuple<std::string, std::string, nlohmann::json, std::string>>{
           {"PhiForCausalLM", "qk_layernorm", true, "qk_layernorm: true is not supported"},
           {"StableLmForCausalLM", "qk_layernorm", true, "qk_layernorm: true is not supported"},
           {"Qwen3ForCausalLM", "rope_scaling", {{"rope_type", "nope"}},
            "rope_scaling.rope_type: unknown 'nope'"},
           {"FalconForCausalLM", "rope_parameters", {{"rope_type", "linear"}},
            "rope_parameters.factor: missing"}}) {
    SCOPED_TRACE(arch);
    testing::ExpectConfigError(arch, field, value, needle);
  }
}

}  // namespace
}  // namespace ts::zoo
