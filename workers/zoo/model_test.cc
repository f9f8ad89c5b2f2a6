#include "workers/zoo/model.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <set>

#include "workers/zoo/nn.h"
#include "workers/zoo/zoo_test_util.h"

namespace ts::zoo {
namespace {

std::unique_ptr<Model> MustBuild(const nlohmann::json& config, const BuildOptions& opts = {}) {
  auto m = BuildModel(config, opts);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  return std::move(m).value();
}

bool AllFinite(const at::Tensor& t) { return at::isfinite(t).all().item<bool>(); }

double RelDiff(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

bool IsSupported(const std::string& arch) {
  for (const ArchInfo& a : SupportedArchitectures()) {
    if (a.arch == arch) return true;
  }
  return false;
}

TEST(ModelTest, EveryRealSupportedConfigBuildsRunsAndTrainsTiny) {
  std::set<std::string> built;
  for (const std::string& file : testing::HfConfigFiles()) {
    nlohmann::json c = testing::LoadHfConfig(file);
    if (!c.is_object() || !c.contains("architectures")) continue;
    if (!IsSupported(c["architectures"][0].get<std::string>())) continue;
    SCOPED_TRACE(file);
    auto m = MustBuild(c);
    ASSERT_NE(m, nullptr);
    WeightMap w = m->InitWeights(1);
    ASSERT_EQ(w.size(), m->WeightShapes().size());
    for (auto& [name, shape] : m->WeightShapes()) {
      ASSERT_EQ(w.at(name).sizes(), at::IntArrayRef(shape)) << name;
    }
    Batch batch = m->MakeBatch(2, 2);
    std::vector<at::Tensor> out = m->Forward(w, batch.inputs);
    ASSERT_EQ(out.size(), m->OutputNames().size());
    for (const at::Tensor& t : out) EXPECT_TRUE(AllFinite(t));
    if (m->spec().task == "text-generation") {
      const int64_t vocab = m->spec().tiny_config["vocab_size"].get<int64_t>();
      EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 32, vocab}));
    } else {
      EXPECT_EQ(out[0].size(0), 2);
    }
    for (auto& [name, t] : w) t.requires_grad_(true);
    at::Tensor loss = m->Loss(w, batch);
    ASSERT_EQ(loss.dim(), 0);
    EXPECT_TRUE(AllFinite(loss));
    loss.backward();
    for (auto& [name, t] : w) {
      ASSERT_TRUE(t.grad().defined()) << name;
      EXPECT_TRUE(AllFinite(t.grad())) << name;
    }
    built.insert(file);
  }
  EXPECT_GE(built.size(), 13u);
  EXPECT_TRUE(built.count("snowflake-arctic-embed-m.json"));
  EXPECT_TRUE(built.count("mistral_7b.json"));
  EXPECT_TRUE(built.count("qwen2_7b.json"));
}

TEST(ModelTest, TaskDefaultsFollowTheHead) {
  nlohmann::json c = testing::LoadHfConfig("llama2_7b.json");
  EXPECT_EQ(MustBuild(c)->spec().task, "text-generation");
  EXPECT_EQ(MustBuild(c)->spec().family, "llama");
  BuildOptions cls;
  cls.arch = "LlamaForSequenceClassification";
  EXPECT_EQ(MustBuild(c, cls)->spec().task, "text-classification");
  nlohmann::json b = testing::LoadHfConfig("snowflake-arctic-embed-m.json");
  EXPECT_EQ(MustBuild(b)->spec().task, "feature-extraction");
  BuildOptions mlm;
  mlm.arch = "BertForMaskedLM";
  EXPECT_EQ(MustBuild(b, mlm)->spec().task, "fill-mask");
  EXPECT_EQ(MustBuild(testing::VitBaseConfig())->spec().task, "image-classification");
  BuildOptions wrong;
  wrong.task = "fill-mask";
  EXPECT_EQ(BuildModel(c, wrong).status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelTest, UnknownArchitectureIsUnimplementedAndNamed) {
  // RWKV is a real Hub architecture the zoo does not build.
  auto m = BuildModel(testing::LoadHfConfig("rwkv5_3b.json"), {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(m.status().message().find("RwkvForCausalLM"), std::string::npos);
}

TEST(ModelTest, BadConfigsGiveInvalidArgumentNamingTheField) {
  nlohmann::json c = testing::LoadHfConfig("llama2_7b.json");
  c.erase("hidden_size");
  auto m = BuildModel(c, {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "hidden_size: missing");
  c = testing::LoadHfConfig("llama2_7b.json");
  c["vocab_size"] = "32000";
  EXPECT_EQ(BuildModel(c, {}).status().message(), "vocab_size: expected integer, got string");
  EXPECT_EQ(BuildModel(nlohmann::json::object(), {}).status().message(), "architectures: missing");
}

TEST(ModelTest, SupportedArchitecturesAreSortedAndEachBuilds) {
  const auto& archs = SupportedArchitectures();
  ASSERT_GE(archs.size(), 10u);
  for (size_t i = 1; i < archs.size(); ++i) EXPECT_LT(archs[i - 1].arch, archs[i].arch);
  for (const ArchInfo& a : archs) {
    auto example = ExampleConfig(a.arch);
    ASSERT_TRUE(example.ok()) << a.arch;
    nlohmann::json c = a.family == "bert"      ? testing::LoadHfConfig("snowflake-arctic-embed-m.json")
                       : a.family == "vit"     ? testing::VitBaseConfig()
                       : a.family == "qwen2"   ? testing::LoadHfConfig("qwen2.json")
                       : a.family == "mistral" ? testing::LoadHfConfig("mistral_7b.json")
                       : a.family == "llama"   ? testing::LoadHfConfig("llama2_7b.json")
                                               : *example;
    BuildOptions o;
    o.arch = a.arch;
    auto m = BuildModel(c, o);
    ASSERT_TRUE(m.ok()) << a.arch << ": " << m.status().ToString();
    EXPECT_EQ((*m)->spec().arch, a.arch);
    EXPECT_EQ((*m)->spec().task, a.task);
  }
}

TEST(ModelTest, Float64ForwardIsCloseToFloat32) {
  for (const char* file : {"llama3_2_3b.json", "snowflake-arctic-embed-m.json"}) {
    SCOPED_TRACE(file);
    auto m = MustBuild(testing::LoadHfConfig(file));
    Batch batch = m->MakeBatch(3, 2);
    at::Tensor f32 = m->Forward(m->InitWeights(7), batch.inputs)[0];
    at::Tensor f64 = m->Forward(m->InitWeights(7, at::kDouble), batch.inputs)[0];
    EXPECT_EQ(f64.scalar_type(), at::kDouble);
    EXPECT_LT(RelDiff(f32.to(at::kDouble), f64), 1e-5);
  }
}

TEST(ModelTest, InitWeightsAreDeterministicPerSeedAndDtypeIndependent) {
  auto m = MustBuild(testing::LoadHfConfig("tinyllama_1b_chat_v0.4.json"));
  WeightMap a = m->InitWeights(5), b = m->InitWeights(5), c = m->InitWeights(6);
  WeightMap d = m->InitWeights(5, at::kDouble);
  const std::string name = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_TRUE(at::equal(a.at(name), b.at(name)));
  EXPECT_FALSE(at::equal(a.at(name), c.at(name)));
  EXPECT_TRUE(at::equal(a.at(name).to(at::kDouble), d.at(name)));
  EXPECT_TRUE(at::equal(a.at("model.norm.weight"), at::ones({64})));
}

TEST(ModelTest, TiedEmbeddingsHaveNoLmHeadAndDriveTheLogits) {
  auto m = MustBuild(testing::LoadHfConfig("smollm_135m.json"));
  for (auto& [name, shape] : m->WeightShapes()) EXPECT_NE(name, "lm_head.weight");
  WeightMap w = m->InitWeights(1);
  Batch batch = m->MakeBatch(1, 2);
  at::Tensor ids = batch.inputs.at("input_ids");
  int64_t unused = 0;
  while (ids.eq(unused).any().item<bool>()) ++unused;
  at::Tensor before = m->Forward(w, batch.inputs)[0];
  w.at("model.embed_tokens.weight")[unused].mul_(2.0);
  at::Tensor after = m->Forward(w, batch.inputs)[0];
  // Only the output column of the untouched-by-input token moves.
  EXPECT_TRUE(at::allclose(before.select(2, unused) * 2.0, after.select(2, unused), 1e-5, 1e-5));
  at::Tensor others = at::ones({before.size(2)}, at::kBool);
  others[unused] = false;
  EXPECT_TRUE(at::equal(before.index({"...", others}), after.index({"...", others})));

  auto untied = MustBuild(testing::LoadHfConfig("llama2_7b.json"));
  bool has_head = false;
  for (auto& [name, shape] : untied->WeightShapes()) has_head |= name == "lm_head.weight";
  EXPECT_TRUE(has_head);
}

TEST(ModelTest, TinyConfigKeepsGqaRatioAndWeightShapesFollowIt) {
  auto m = MustBuild(testing::LoadHfConfig("qwen2_1_5b.json"));  // 12 heads / 2 kv heads
  const auto& t = m->spec().tiny_config;
  EXPECT_EQ(t["num_attention_heads"].get<int64_t>() / t["num_key_value_heads"].get<int64_t>(), 6);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [name, shape] : m->WeightShapes()) shapes[name] = shape;
  const int64_t hd = t["hidden_size"].get<int64_t>() / t["num_attention_heads"].get<int64_t>();
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.k_proj.weight")[0],
            t["num_key_value_heads"].get<int64_t>() * hd);
  EXPECT_TRUE(shapes.count("model.layers.0.self_attn.q_proj.bias"));  // qwen2 qkv bias
  EXPECT_FALSE(shapes.count("model.layers.0.self_attn.o_proj.bias"));
}

at::Tensor LastLogitsAfterChangingToken(const Model& m, const WeightMap& w, const Batch& batch,
                                        int64_t pos) {
  TensorMap in = batch.inputs;
  at::Tensor ids = in.at("input_ids").clone();
  ids[0][pos] = (ids[0][pos].item<int64_t>() + 1) % 512;
  in["input_ids"] = ids;
  return m.Forward(w, in)[0][0][-1];
}

TEST(ModelTest, SlidingWindowHidesTokensOutsideTheWindow) {
  nlohmann::json c = testing::LoadHfConfig("mistral_7b.json");
  c["num_hidden_layers"] = 1;
  auto m = MustBuild(c);
  ASSERT_EQ(m->spec().tiny_config["sliding_window"], 8);
  WeightMap w = m->InitWeights(1);
  Batch batch = m->MakeBatch(1, 2);
  at::Tensor base = m->Forward(w, batch.inputs)[0][0][-1];
  EXPECT_TRUE(at::equal(LastLogitsAfterChangingToken(*m, w, batch, 0), base));
  EXPECT_TRUE(at::equal(LastLogitsAfterChangingToken(*m, w, batch, 23), base));
  EXPECT_FALSE(at::allclose(LastLogitsAfterChangingToken(*m, w, batch, 25), base));

  // Without a window (llama), the first token reaches the last position.
  nlohmann::json l = testing::LoadHfConfig("llama2_7b.json");
  l["num_hidden_layers"] = 1;
  auto full = MustBuild(l);
  WeightMap fw = full->InitWeights(1);
  at::Tensor fbase = full->Forward(fw, batch.inputs)[0][0][-1];
  EXPECT_FALSE(at::allclose(LastLogitsAfterChangingToken(*full, fw, batch, 0), fbase));
}

TEST(ModelTest, CausalLmDoesNotSeeTheFuture) {
  auto m = MustBuild(testing::LoadHfConfig("llama3_1_70b.json"));
  WeightMap w = m->InitWeights(1);
  Batch batch = m->MakeBatch(1, 2);
  at::Tensor base = m->Forward(w, batch.inputs)[0];
  TensorMap in = batch.inputs;
  at::Tensor ids = in.at("input_ids").clone();
  ids[0][20] = (ids[0][20].item<int64_t>() + 1) % 512;
  in["input_ids"] = ids;
  at::Tensor changed = m->Forward(w, in)[0];
  EXPECT_TRUE(at::equal(changed[0].narrow(0, 0, 20), base[0].narrow(0, 0, 20)));
  EXPECT_FALSE(at::allclose(changed[0][20], base[0][20]));
}

TEST(ModelTest, AttentionAndMlpBranchesEachMoveTheOutputVisibly) {
  for (const char* file : {"mistral_7b.json", "snowflake-arctic-embed-m.json"}) {
    SCOPED_TRACE(file);
    auto m = MustBuild(testing::LoadHfConfig(file));
    const bool bert = std::string(file).find("snowflake") != std::string::npos;
    WeightMap w = m->InitWeights(3);
    Batch batch = m->MakeBatch(3, 2);
    at::Tensor base = m->Forward(w, batch.inputs)[0];
    // The last layer's branches (the tiny models have one layer: their layers are alike).
    const std::string last = std::to_string(m->spec().tiny_config["num_hidden_layers"].get<int>() - 1);
    const std::string attn_out = bert ? "encoder.layer." + last + ".attention.output.dense.weight"
                                      : "model.layers." + last + ".self_attn.o_proj.weight";
    const std::string mlp_out = bert ? "encoder.layer." + last + ".output.dense.weight"
                                     : "model.layers." + last + ".mlp.down_proj.weight";
    for (const std::string& name : {attn_out, mlp_out}) {
      WeightMap p = w;
      p[name] = w.at(name) * 1.02;  // a 2% error in one op
      EXPECT_GT(RelDiff(m->Forward(p, batch.inputs)[0], base), 1e-3) << name;
    }
  }
}

TEST(ModelTest, BertHeadsHaveHfNamesTiedDecoderAndLabelCounts) {
  nlohmann::json c = testing::LoadHfConfig("snowflake-arctic-embed-m.json");
  BuildOptions mlm;
  mlm.arch = "BertForMaskedLM";
  auto m = MustBuild(c, mlm);
  std::set<std::string> names;
  for (auto& [name, shape] : m->WeightShapes()) names.insert(name);
  EXPECT_TRUE(names.count("bert.embeddings.word_embeddings.weight"));
  EXPECT_TRUE(names.count("bert.encoder.layer.0.attention.self.query.weight"));
  EXPECT_TRUE(names.count("cls.predictions.transform.dense.weight"));
  EXPECT_TRUE(names.count("cls.predictions.bias"));
  EXPECT_FALSE(names.count("cls.predictions.decoder.weight"));
  EXPECT_FALSE(names.count("bert.pooler.dense.weight"));
  Batch batch = m->MakeBatch(4, 2);
  const at::Tensor& labels = batch.labels.at("labels");
  const double labelled =
      labels.ne(-100).sum().item<double>() / static_cast<double>(labels.numel());
  EXPECT_GT(labelled, 0.03);
  EXPECT_LT(labelled, 0.4);
  EXPECT_EQ(m->Forward(m->InitWeights(1), batch.inputs)[0].size(-1), 512);

  c["id2label"] = {{"0", "neg"}, {"1", "neu"}, {"2", "pos"}};
  BuildOptions cls;
  cls.arch = "BertForSequenceClassification";
  auto s = MustBuild(c, cls);
  at::Tensor logits = s->Forward(s->InitWeights(1), s->MakeBatch(1, 2).inputs)[0];
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 3}));

  auto base = MustBuild(testing::LoadHfConfig("snowflake-arctic-embed-m.json"));
  EXPECT_EQ(base->OutputNames(), (std::vector<std::string>{"last_hidden_state", "pooler_output"}));
  EXPECT_EQ(base->WeightShapes().front().first, "embeddings.word_embeddings.weight");
}

TEST(ModelTest, PaddingDoesNotLeakIntoAttendedPositions) {
  auto m = MustBuild(testing::LoadHfConfig("snowflake-arctic-embed-m.json"));
  WeightMap w = m->InitWeights(1);
  Batch batch = m->MakeBatch(1, 2);
  at::Tensor base = m->Forward(w, batch.inputs)[0];
  TensorMap in = batch.inputs;
  at::Tensor ids = in.at("input_ids").clone();
  ids[1][31] = 7;  // a padded position of row 1
  in["input_ids"] = ids;
  at::Tensor out = m->Forward(w, in)[0];
  EXPECT_TRUE(at::allclose(out[1].narrow(0, 0, 24), base[1].narrow(0, 0, 24), 1e-6, 1e-6));
}

TEST(ModelTest, SequenceClassificationDecoderPoolsLastAttendedToken) {
  BuildOptions o;
  o.arch = "LlamaForSequenceClassification";
  auto m = MustBuild(testing::LoadHfConfig("tinyllama_1b_chat_v0.4.json"), o);
  WeightMap w = m->InitWeights(1);
  Batch batch = m->MakeBatch(1, 2);
  at::Tensor logits = m->Forward(w, batch.inputs)[0];
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(AllFinite(m->Loss(w, batch)));
}

TEST(ModelTest, VitLiteralConfigBuildsTinyAndTrains) {
  auto m = MustBuild(testing::VitBaseConfig());
  WeightMap w = m->InitWeights(1);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [name, shape] : m->WeightShapes()) shapes[name] = shape;
  EXPECT_EQ(shapes.at("vit.embeddings.patch_embeddings.projection.weight"),
            (std::vector<int64_t>{64, 3, 8, 8}));
  EXPECT_EQ(shapes.at("vit.embeddings.position_embeddings"), (std::vector<int64_t>{1, 17, 64}));
  EXPECT_EQ(shapes.at("classifier.weight"), (std::vector<int64_t>{10, 64}));
  Batch batch = m->MakeBatch(1, 2);
  EXPECT_EQ(batch.inputs.at("pixel_values").sizes(), (std::vector<int64_t>{2, 3, 32, 32}));
  at::Tensor logits = m->Forward(w, batch.inputs)[0];
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 10}));
  for (auto& [name, t] : w) t.requires_grad_(true);
  m->Loss(w, batch).backward();
  for (auto& [name, t] : w) EXPECT_TRUE(t.grad().defined() && AllFinite(t.grad())) << name;
}

TEST(ModelTest, EmulationScopeChangesOutputsSlightlyAndIsOffByDefault) {
  for (const char* file : {"qwen2_1_5b.json", "snowflake-arctic-embed-m.json"}) {
    SCOPED_TRACE(file);
    auto m = MustBuild(testing::LoadHfConfig(file));
    WeightMap w = m->InitWeights(1);
    Batch batch = m->MakeBatch(1, 2);
    at::Tensor plain = m->Forward(w, batch.inputs)[0];
    at::Tensor emulated;
    {
      ScopedBf16MatmulEmulation emu;
      emulated = m->Forward(w, batch.inputs)[0];
    }
    at::Tensor again = m->Forward(w, batch.inputs)[0];
    EXPECT_TRUE(at::equal(plain, again));
    const double rel = RelDiff(emulated, plain);
    EXPECT_GT(rel, 1e-4);
    EXPECT_LT(rel, 2e-2);
  }
}

// Traces Forward with weights then inputs as one flat input list and re-runs the graph.
void ExpectTraceMatchesEager(const Model& m) {
  WeightMap w = m.InitWeights(1);
  Batch batch = m.MakeBatch(1, 2);
  std::vector<std::string> wnames, inames;
  torch::jit::Stack flat;
  for (auto& [name, t] : w) {
    wnames.push_back(name);
    flat.emplace_back(t);
  }
  for (auto& [name, t] : batch.inputs) {
    inames.push_back(name);
    flat.emplace_back(t);
  }
  auto fn = [&](torch::jit::Stack s) {
    WeightMap tw;
    TensorMap ti;
    for (size_t i = 0; i < wnames.size(); ++i) tw[wnames[i]] = s[i].toTensor();
    for (size_t i = 0; i < inames.size(); ++i) ti[inames[i]] = s[wnames.size() + i].toTensor();
    std::vector<at::Tensor> out = m.Forward(tw, ti);
    return torch::jit::Stack(out.begin(), out.end());
  };
  auto traced = torch::jit::tracer::trace(
      flat, fn, [](const at::Tensor&) { return std::string(); },
      /*strict=*/false);
  std::shared_ptr<torch::jit::Graph> graph = traced.first->graph;
  std::set<std::string> kinds;
  for (torch::jit::Node* n : graph->nodes()) kinds.insert(n->kind().toQualString());
  EXPECT_TRUE(kinds.count("aten::linear"));
  EXPECT_TRUE(kinds.count("aten::matmul"));
  EXPECT_TRUE(kinds.count("aten::softmax"));
  for (const std::string& k : kinds) {
    EXPECT_TRUE(k.rfind("aten::", 0) == 0 || k.rfind("prim::", 0) == 0) << k;
    EXPECT_NE(k, "prim::PythonOp");
    EXPECT_NE(k, "prim::CppOp");
  }
  torch::jit::Code code(graph, "forward");
  torch::jit::Stack stack = flat;
  torch::jit::InterpreterState(code).run(stack);
  std::vector<at::Tensor> eager = m.Forward(w, batch.inputs);
  ASSERT_EQ(stack.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_TRUE(at::allclose(stack[i].toTensor(), eager[i], 1e-5, 1e-5)) << i;
  }
}

TEST(ModelTest, TracedForwardReexecutesToEagerResult) {
  ExpectTraceMatchesEager(*MustBuild(testing::LoadHfConfig("llama3_2_3b.json")));
  ExpectTraceMatchesEager(*MustBuild(testing::LoadHfConfig("mistral_7b.json")));
  ExpectTraceMatchesEager(*MustBuild(testing::LoadHfConfig("snowflake-arctic-embed-m.json")));
  ExpectTraceMatchesEager(*MustBuild(testing::VitBaseConfig()));
}

}  // namespace
}  // namespace ts::zoo
