// End to end on the simulated device: real HF configs pass on the defect-free baseline, and each
// kind of seeded device defect yields the right non-pass verdict where (and only where) the model
// exercises the op. The tests write their own defects; the engine never reads them.
#include "workers/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "workers/engine/engine_test_util.h"
#include "workers/simdevice/runtime.h"
#include "workers/zoo/model.h"

namespace ts::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json VitConfig() {
  json id2label = json::object();
  for (int i = 0; i < 1000; ++i) id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
  return {{"architectures", {"ViTForImageClassification"}}, {"model_type", "vit"},
          {"hidden_size", 768}, {"num_hidden_layers", 12}, {"num_attention_heads", 12},
          {"intermediate_size", 3072}, {"hidden_act", "gelu"}, {"image_size", 224},
          {"patch_size", 16}, {"num_channels", 3}, {"layer_norm_eps", 1e-12},
          {"initializer_range", 0.02}, {"qkv_bias", true}, {"id2label", id2label}};
}

TEST(EngineTest, RealConfigsPassEveryModeOnTheDefectFreeBaseline) {
  Use(Baseline());
  std::set<std::string> supported;
  for (const auto& a : zoo::SupportedArchitectures()) supported.insert(a.arch);
  struct Case {
    std::string name;
    json config;
    std::string arch;
  };
  std::vector<Case> cases;
  for (const auto& e : fs::directory_iterator(DataDir() + "/hf-configs")) {
    json c = ReadJson(e.path());
    if (!c.contains("architectures") || !supported.count(c["architectures"][0].get<std::string>())) continue;
    cases.push_back({e.path().filename().string(), c, ""});
  }
  ASSERT_GE(cases.size(), 10u) << "expected the Llama/Mistral/Qwen2/BERT configs";
  json bert = Config("snowflake-arctic-embed-m.json");
  cases.push_back({"bert-seqcls", bert, "BertForSequenceClassification"});
  cases.push_back({"bert-mlm", bert, "BertForMaskedLM"});
  cases.push_back({"vit", VitConfig(), ""});
  for (const auto& c : cases) {
    RunOptions o;
    o.arch = c.arch;
    ModelResult r = RunModel(c.config, o);
    for (const char* m : {"eager", "compile", "train"}) {
      EXPECT_EQ(Mode(r, m).status, Verdict::kPass) << c.name << " " << m << ": " << Mode(r, m).error;
    }
    ASSERT_TRUE(Mode(r, "eager").accuracy.has_value()) << c.name;
    EXPECT_LT(Mode(r, "eager").accuracy->rmse_ratio, 3.0) << c.name;
    EXPECT_GT(r.op_coverage.distinct_ops, 5) << c.name;
    EXPECT_EQ(Mode(r, "train").loss_device.size(), 5u) << c.name;
  }
}

// The device clock's figures of one model are sane (README.md of workers/simdevice, "Cost
// model"): every passing mode has them, 0 < MFU <= 1, the top ops' times fit in the mode's, and
// a compiled forward with no graph break and nothing run by the host is no slower than eager.
void ExpectSanePerf(const std::string& arch, const ModelResult& r) {
  for (const auto& [name, m] : r.modes) {
    ASSERT_EQ(m.perf.has_value(), m.status == Verdict::kPass) << arch << " " << name;
    if (!m.perf) continue;
    const ModePerf& p = *m.perf;
    EXPECT_GT(p.device_us, 0) << arch << " " << name;
    EXPECT_GT(p.mfu, 0) << arch << " " << name;
    EXPECT_LE(p.mfu, 1) << arch << " " << name;
    EXPECT_GT(p.peak_device_bytes, 0) << arch << " " << name;
    double top = 0;
    for (const auto& t : p.top_ops) top += t.us;
    EXPECT_LE(top, p.device_us * (1 + 1e-9)) << arch << " " << name;
    EXPECT_EQ(p.speedup.has_value(), name == "compile" && r.modes.at("eager").perf.has_value())
        << arch << " " << name;
  }
  const ModeResult& e = r.modes.at("eager");
  const ModeResult& c = r.modes.at("compile");
  if (e.perf && c.perf && c.graph_breaks == 0 && e.perf->fallback_us == 0 &&
      c.perf->fallback_us == 0) {
    EXPECT_LE(c.perf->device_us, e.perf->device_us) << arch;
    EXPECT_GE(*c.perf->speedup, 1.0) << arch;
  }
}

// The same model run twice has the same perf, field by field.
void ExpectSamePerf(const std::string& arch, const ModelResult& a, const ModelResult& b) {
  for (const auto& [name, m] : a.modes) {
    const auto& p = m.perf;
    const auto& q = b.modes.at(name).perf;
    ASSERT_EQ(p.has_value(), q.has_value()) << arch << " " << name;
    if (!p) continue;
    EXPECT_EQ(ToJson(a)["modes"][name]["perf"], ToJson(b)["modes"][name]["perf"])
        << arch << " " << name;
  }
}

// TS_ZOO_CLASSES="A,B" (exact class names) runs the test below over those classes only: the
// check of a few new classes without the whole zoo's run. Unset, empty or naming no class the
// zoo builds: every class (a misspelt name cannot pass the test vacuously).
bool SelectedClass(const std::string& arch) {
  const char* env = std::getenv("TS_ZOO_CLASSES");
  if (env == nullptr || *env == '\0') return true;
  std::set<std::string> wanted;
  std::stringstream ss(env);
  for (std::string name; std::getline(ss, name, ',');) wanted.insert(name);
  bool any = false;
  for (const auto& a : zoo::SupportedArchitectures()) any = any || wanted.count(a.arch) > 0;
  return !any || wanted.count(arch) > 0;
}

// Every class the zoo builds, from its real-shaped example config: no false failures on the
// defect-free baseline (honest bf16 numerics are not flagged), gradients judged, and the op
// audit finds no suspect. Its device time is sane and, run again (without the audit, which
// never touches the figures), identical. TS_ZOO_CLASSES (SelectedClass) narrows it to the named
// classes: a quick check of newly added ones.
TEST(EngineTest, EveryZooClassPassesEveryModeOnTheDefectFreeBaseline) {
  Use(Baseline());
  RunOptions o;
  o.audit_ops = true;
  RunOptions again;
  for (const auto& a : zoo::SupportedArchitectures()) {
    if (!SelectedClass(a.arch)) continue;
    auto cfg = zoo::ExampleConfig(a.arch);
    ASSERT_TRUE(cfg.ok()) << a.arch;
    o.arch = a.arch;
    ModelResult r = RunModel(*cfg, o);
    ExpectSanePerf(a.arch, r);
    again.arch = a.arch;
    ExpectSamePerf(a.arch, r, RunModel(*cfg, again));
    for (const char* m : {"eager", "compile", "train"}) {
      const ModeResult& mode = Mode(r, m);
      EXPECT_EQ(mode.status, Verdict::kPass) << a.arch << " " << m << ": " << mode.error;
      EXPECT_TRUE(mode.audited) << a.arch << " " << m;
      EXPECT_TRUE(mode.suspects.empty())
          << a.arch << " " << m << ": " << (mode.suspects.empty() ? "" : mode.suspects[0].op);
    }
    ASSERT_TRUE(Mode(r, "train").grad_rmse_ratio.has_value()) << a.arch;
    EXPECT_LE(*Mode(r, "train").grad_rmse_ratio, 3.0) << a.arch;
  }
}

// sim-2.0's compiler has Llama's linear layers, matmuls and elementwise ops, but not the ops of
// its rotary embedding and causal mask (aten::arange, aten::cos, aten::gt, aten::logical_or):
// the rotary cosines are computed between device work (the embedding lookup before, the
// attention products after), so a profile whose supported_ops lacks aten::cos must break there.
// With cost_ms_per_mflop at 0 the simulated compile cost is cost_ms_per_node per device node,
// and the device node count lies between one per device segment and the compute nodes left
// after each break's CPU segment takes at least one.
TEST(EngineTest, BaselineProfileCountsFallbacksAndGraphBreaks) {
  json profile = Baseline();
  profile["compiler"]["cost_ms_per_mflop"] = 0.0;
  Use(profile);
  const simdevice::ProfileInfo info = simdevice::ActiveProfile();
  ModelResult r = RunModel(Config("llama2_7b.json"), RunOptions());
  EXPECT_EQ(Mode(r, "eager").status, Verdict::kPass) << Describe(r);
  // sim-2.0 has no rsqrt/pow kernels, which RMSNorm needs: they fall back.
  EXPECT_FALSE(r.fallback_ops.empty());
  EXPECT_LT(r.op_coverage.ratio, 1.0);
  EXPECT_GT(r.op_coverage.ratio, 0.5);
  const auto& c = Mode(r, "compile");
  EXPECT_EQ(c.status, Verdict::kPass) << Describe(r);
  EXPECT_GT(c.graph_nodes, 10);
  EXPECT_EQ(c.graph_breaks, static_cast<int>(c.break_reasons.size()));
  ASSERT_GE(c.graph_breaks, 1) << Describe(r);
  const std::string kUnsupported = "unsupported op ";
  int unsupported_breaks = 0;
  for (const auto& reason : c.break_reasons) {
    EXPECT_NE(reason.find("aten::"), std::string::npos) << reason;
    if (reason.rfind(kUnsupported, 0) != 0) continue;
    const std::string op = reason.substr(kUnsupported.size());
    EXPECT_FALSE(simdevice::OpListMatches(info.compiler.supported_ops, op)) << reason;
    ++unsupported_breaks;
  }
  EXPECT_GE(unsupported_breaks, 1) << Describe(r);
  ASSERT_FALSE(simdevice::OpListMatches(info.compiler.supported_ops, "aten::cos"));
  EXPECT_NE(std::find(c.break_reasons.begin(), c.break_reasons.end(), "unsupported op aten::cos"),
            c.break_reasons.end())
      << Describe(r);
  // compile_ms = cost_ms_per_node * device nodes.
  const double per_node = info.compiler.cost_ms_per_node;
  ASSERT_GT(per_node, 0);
  const double device_nodes = c.compile_ms / per_node;
  EXPECT_DOUBLE_EQ(device_nodes, std::round(device_nodes)) << c.compile_ms;
  EXPECT_GE(device_nodes, c.device_segments) << Describe(r);
  EXPECT_LE(device_nodes, static_cast<double>(c.graph_nodes - c.graph_breaks)) << Describe(r);
}

// A defect, the model it must hit and a model it must spare: one that does not run the op, or
// whose use of it is outside the defect's `when`.
struct DefectCase {
  std::string name;
  std::string op;
  json effect;
  json extra;  // more defect fields: "mode", "when"
  std::string hit_config, hit_arch;
  // The spared model: a file of hf-configs, or else the zoo's example config of a class.
  std::string spare_config, spare_example;
  std::string mode;
  Verdict expect;
};

json SpareConfig(const DefectCase& c) {
  if (!c.spare_config.empty()) return Config(c.spare_config);
  auto cfg = zoo::ExampleConfig(c.spare_example);
  EXPECT_TRUE(cfg.ok()) << c.spare_example;
  return cfg.ok() ? *cfg : json();
}

class DefectTest : public ::testing::TestWithParam<DefectCase> {};

TEST_P(DefectTest, TriggeringModelFailsAndOthersPass) {
  const DefectCase& c = GetParam();
  ASSERT_FALSE(c.spare_config.empty() && c.spare_example.empty())
      << "every defect case needs a model the defect spares";
  Use(WithDefect(c.op, c.effect, c.extra));
  RunOptions o = Modes({c.mode});
  o.arch = c.hit_arch;
  ModelResult hit = RunModel(Config(c.hit_config), o);
  const ModeResult& m = Mode(hit, c.mode);
  EXPECT_EQ(m.status, c.expect) << Describe(hit);
  EXPECT_FALSE(m.error.empty());
  // Wrong numbers are replayed op by op, and the defect's op is the first suspect.
  EXPECT_EQ(m.audited, c.expect == Verdict::kFailAccuracy);
  if (c.expect == Verdict::kFailAccuracy) {
    ASSERT_FALSE(m.suspects.empty()) << Describe(hit);
    EXPECT_EQ(simdevice::StripOverload(m.suspects[0].op), c.op) << Describe(hit);
  }
  ModelResult spared = RunModel(SpareConfig(c), Modes({c.mode}));
  EXPECT_EQ(Mode(spared, c.mode).status, Verdict::kPass) << Describe(spared);
  EXPECT_FALSE(Mode(spared, c.mode).audited) << "a pass is replayed only with the audit";
}

const json kScale2 = {{"kind", "scale"}, {"value", 1.02}};
const char kBert[] = "snowflake-arctic-embed-m.json";
const char kLlama[] = "llama2_7b.json";
// A convolutional classifier: no softmax, no attention (bmm), and its one linear layer (the
// head, with a bias) runs as addmm, never mm, in the forward pass.
const char kResNet[] = "ResNetForImageClassification";
// BERT uses gelu, Llama uses silu: a gelu defect must hit BERT and spare Llama. Llama's linear
// layers have no bias (mm, never addmm); BERT's have one (addmm).
INSTANTIATE_TEST_SUITE_P(
    Effects, DefectTest,
    ::testing::Values(
        DefectCase{"gelu_scale", "aten::gelu", kScale2, {}, kBert, "", kLlama, "", "eager",
                   Verdict::kFailAccuracy},
        DefectCase{"gelu_offset", "aten::gelu", {{"kind", "offset"}, {"value", 0.05}}, {}, kBert,
                   "", kLlama, "", "eager", Verdict::kFailAccuracy},
        DefectCase{"gelu_zero_tail", "aten::gelu", {{"kind", "zero_tail"}, {"value", 32}}, {},
                   kBert, "", kLlama, "", "eager", Verdict::kFailAccuracy},
        DefectCase{"gelu_nan", "aten::gelu", {{"kind", "nan"}}, {}, kBert, "", kLlama, "",
                   "eager", Verdict::kFailAccuracy},
        DefectCase{"gelu_error", "aten::gelu", {{"kind", "error"}}, {}, kBert, "", kLlama, "",
                   "eager", Verdict::kDeviceError},
        DefectCase{"softmax_scale", "aten::_softmax", kScale2, {}, kLlama, "", "", kResNet,
                   "eager", Verdict::kFailAccuracy},
        DefectCase{"mm_scale", "aten::mm", kScale2, {}, kLlama, "", "", kResNet, "eager",
                   Verdict::kFailAccuracy},
        DefectCase{"bmm_scale", "aten::bmm", kScale2, {}, kLlama, "", "", kResNet, "eager",
                   Verdict::kFailAccuracy},
        DefectCase{"addmm_scale", "aten::addmm", kScale2, {}, kBert, "", kLlama, "", "eager",
                   Verdict::kFailAccuracy},
        DefectCase{"softmax_scale_compiled", "aten::_softmax", kScale2, {}, kLlama, "", "",
                   kResNet, "compile", Verdict::kFailAccuracy},
        DefectCase{"layer_norm_compiled_only", "aten::native_layer_norm",
                   {{"kind", "offset"}, {"value", 0.05}}, {{"mode", "compiled"}}, kBert, "",
                   kLlama, "", "compile", Verdict::kFailAccuracy},
        // Training runs mm in every linear layer's backward, the ResNet head's too; the defect
        // is limited to large products, which Llama's have and the tiny ResNet's lack.
        DefectCase{"mm_scale_train", "aten::mm", kScale2, {{"when", {{"min_numel", 4096}}}},
                   kLlama, "", "", kResNet, "train", Verdict::kFailAccuracy},
        DefectCase{"gelu_nan_train", "aten::gelu", {{"kind", "nan"}}, {}, kBert,
                   "BertForSequenceClassification", kLlama, "", "train",
                   Verdict::kFailAccuracy}),
    [](const auto& param_info) { return param_info.param.name; });

TEST(EngineTest, CompiledOnlyDefectSparesEager) {
  Use(WithDefect("aten::native_layer_norm", {{"kind", "offset"}, {"value", 0.05}}, {{"mode", "compiled"}}));
  ModelResult r = RunModel(Config("snowflake-arctic-embed-m.json"), Modes({"eager", "compile"}));
  EXPECT_EQ(Mode(r, "eager").status, Verdict::kPass) << Describe(r);
  EXPECT_EQ(Mode(r, "compile").status, Verdict::kFailAccuracy) << Describe(r);
}

TEST(EngineTest, UnsupportedDtypeOomAndCompileLimitsAreVerdicts) {
  json j = Baseline();
  j["dtypes"]["unsupported"].push_back("int64");
  Use(j);
  ModelResult r = RunModel(Config("llama2_7b.json"), Modes({"eager"}));
  EXPECT_EQ(Mode(r, "eager").status, Verdict::kUnsupportedDtype) << Describe(r);
  EXPECT_NE(Mode(r, "eager").error.find("int64"), std::string::npos);

  j = Baseline();
  j["memory_bytes"] = 8192;
  Use(j);
  r = RunModel(Config("llama2_7b.json"), Modes({"eager", "train"}));
  EXPECT_EQ(Mode(r, "eager").status, Verdict::kOom) << Describe(r);
  EXPECT_EQ(Mode(r, "train").status, Verdict::kOom) << Describe(r);

  j = Baseline();
  j["compiler"]["budget_ms"] = 1;
  Use(j);
  r = RunModel(Config("llama2_7b.json"), Modes({"compile"}));
  EXPECT_EQ(Mode(r, "compile").status, Verdict::kCompileTimeout) << Describe(r);

  j = Baseline();
  j["compiler"]["max_nodes"] = 1;
  Use(j);
  r = RunModel(Config("llama2_7b.json"), Modes({"compile"}));
  EXPECT_EQ(Mode(r, "compile").status, Verdict::kCompileFail) << Describe(r);
}

TEST(EngineTest, BadConfigIsLoadFailNamingTheField) {
  Use(Baseline());
  json c = Config("llama2_7b.json");
  c.erase("hidden_size");
  ModelResult r = RunModel(c, RunOptions());
  for (const char* m : {"eager", "compile", "train"}) {
    EXPECT_EQ(Mode(r, m).status, Verdict::kLoadFail);
    EXPECT_NE(Mode(r, m).error.find("hidden_size"), std::string::npos) << Mode(r, m).error;
  }
  c = Config("llama2_7b.json");
  c["architectures"] = {"NoSuchModelForCausalLM"};
  r = RunModel(c, Modes({"eager"}));
  EXPECT_EQ(Mode(r, "eager").status, Verdict::kLoadFail);
  EXPECT_NE(Mode(r, "eager").error.find("NoSuchModelForCausalLM"), std::string::npos);
}

// The shipped profiles as a nightly pair: 2.1 fixes the eager gelu bug BERT hits on 2.0 and
// introduces one that RMSNorm models hit, and its larger compiler op set removes graph breaks.
// (The test asserts outcomes; nothing here or in the engine reads the defect lists.)
TEST(EngineTest, ShippedProfilesShowAFixAndARegression) {
  auto run = [](const char* profile, const std::string& config) {
    auto p = simdevice::ActivateFile(std::string(TS_SIMDEVICE_PROFILE_DIR) + "/" + profile, 0);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return RunModel(Config(config), Modes({"eager", "compile"}));
  };
  ModelResult llama20 = run("sim-2.0.json", "llama2_7b.json");
  ModelResult llama21 = run("sim-2.1.json", "llama2_7b.json");
  ModelResult bert20 = run("sim-2.0.json", "snowflake-arctic-embed-m.json");
  ModelResult bert21 = run("sim-2.1.json", "snowflake-arctic-embed-m.json");
  EXPECT_EQ(Mode(llama20, "eager").status, Verdict::kPass) << Describe(llama20);
  EXPECT_EQ(Mode(llama21, "eager").status, Verdict::kFailAccuracy) << Describe(llama21);
  EXPECT_EQ(Mode(bert20, "eager").status, Verdict::kFailAccuracy) << Describe(bert20);
  EXPECT_EQ(Mode(bert21, "eager").status, Verdict::kPass) << Describe(bert21);
  EXPECT_LT(Mode(llama21, "compile").graph_breaks, Mode(llama20, "compile").graph_breaks);
  EXPECT_GT(llama21.op_coverage.ratio, llama20.op_coverage.ratio);
}

TEST(EngineTest, RequestedModesOnlyAndStagesReported) {
  Use(Baseline());
  std::vector<std::string> stages;
  RunOptions o = Modes({"eager"});
  o.on_stage = [&](const std::string& s) { stages.push_back(s); };
  ModelResult r = RunModel(Config("qwen2.json"), o);
  EXPECT_EQ(Mode(r, "eager").status, Verdict::kPass) << Describe(r);
  EXPECT_EQ(Mode(r, "compile").status, Verdict::kSkipped);
  EXPECT_EQ(Mode(r, "train").status, Verdict::kSkipped);
  EXPECT_EQ(stages, (std::vector<std::string>{"build", "reference", "eager"}));
}

}  // namespace
}  // namespace ts::engine

namespace ts::engine {
namespace {

// Fine-tunes of one architecture are distinct models (issue 17): two catalog rows with the same
// config and different ids get different weights and close but not identical outputs; the same
// id and seed give identical ones; no id gives the architecture's seeded weights.
TEST(EngineTest, EachModelIdGetsItsOwnWeights) {
  Use(Baseline());
  zoo::BuildOptions bo;
  auto model = zoo::BuildModel(Config("llama2_7b.json"), bo);
  ASSERT_TRUE(model.ok()) << model.status().message();
  RunOptions a, b, a_again, none;
  a.model_id = a_again.model_id = "org/llama-ft-a";
  b.model_id = "org/llama-ft-b";
  const zoo::WeightMap wa = ModelWeights(**model, a), wb = ModelWeights(**model, b),
                       wa2 = ModelWeights(**model, a_again), w0 = ModelWeights(**model, none),
                       init = (*model)->InitWeights(0);
  ASSERT_EQ(wa.size(), init.size());
  int moved = 0;
  for (const auto& [name, t] : init) {
    EXPECT_TRUE(at::equal(w0.at(name), t)) << name;
    EXPECT_TRUE(at::equal(wa.at(name), wa2.at(name))) << name;
    if (!at::equal(wa.at(name), wb.at(name))) ++moved;
  }
  EXPECT_EQ(moved, static_cast<int>(init.size())) << "every tensor is the model's own";
  const zoo::Batch batch = (*model)->MakeBatch(0, 2);
  const at::Tensor ya = (*model)->Forward(wa, batch.inputs)[0];
  const at::Tensor yb = (*model)->Forward(wb, batch.inputs)[0];
  const at::Tensor y0 = (*model)->Forward(w0, batch.inputs)[0];
  EXPECT_FALSE(at::equal(ya, yb));
  const double rel = ((ya - yb).norm() / y0.norm()).item<double>();
  EXPECT_GT(rel, 1e-4) << "distinct models";
  EXPECT_LT(rel, 0.1) << "fine-tunes of one checkpoint stay close";
  // The seed is the sweep's: another sweep seed gives another draw for the same id.
  RunOptions other_seed = a;
  other_seed.seed = 1;
  EXPECT_FALSE(at::equal(ModelWeights(**model, other_seed).begin()->second,
                         (*model)->InitWeights(1).begin()->second));
}

}  // namespace
}  // namespace ts::engine
