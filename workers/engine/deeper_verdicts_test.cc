// Deeper verdicts (README.md, "Gradients" and "Suspects"): first-step gradient checks catch a
// wrong backward kernel that the loss curve lets through, and the op-by-op replay names the op
// that broke a model, or, with the audit, an op whose error the model dilutes. The defects are
// written here; the engine never reads them.
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "workers/engine/engine.h"
#include "workers/engine/engine_test_util.h"
#include "workers/engine/op_audit.h"
#include "workers/simdevice/runtime.h"
#include "workers/zoo/model.h"

namespace ts::engine {
namespace {

using nlohmann::json;

// A spread of families: attention with LayerNorm (BERT, GPT-2, RoBERTa, DistilBERT, ViT,
// Whisper, BART, GPT-NeoX), with RMSNorm (Llama, Mistral, Qwen2, T5) and none (ResNet).
const std::vector<std::string> kSpread = {
    "BertForMaskedLM",    "GPT2LMHeadModel",          "RobertaForSequenceClassification",
    "LlamaForCausalLM",   "MistralForCausalLM",       "Qwen2ForCausalLM",
    "T5ForConditionalGeneration", "ViTForImageClassification", "ResNetForImageClassification",
    "DistilBertForSequenceClassification", "WhisperForConditionalGeneration",
    "BartForConditionalGeneration", "GPTNeoXForCausalLM"};

json Example(const std::string& arch) {
  auto cfg = zoo::ExampleConfig(arch);
  EXPECT_TRUE(cfg.ok()) << arch;
  return cfg.ok() ? *cfg : json();
}

ModelResult RunClass(const std::string& arch, std::set<std::string> modes, bool audit = false) {
  RunOptions o = Modes(std::move(modes));
  o.arch = arch;
  o.audit_ops = audit;
  return RunModel(Example(arch), o);
}

// The first-step gradient of `param` on the device under the active profile (RunModel's
// weights and batch: seed 0, batch 2).
at::Tensor DeviceGradient(const std::string& arch, const std::string& param) {
  zoo::BuildOptions bo;
  bo.arch = arch;
  auto model = zoo::BuildModel(Example(arch), bo);
  EXPECT_TRUE(model.ok()) << arch;
  if (!model.ok()) return at::Tensor();
  const zoo::WeightMap w = (*model)->InitWeights(0);
  const zoo::Batch b = (*model)->MakeBatch(0, 2);
  auto grads = StepGradients(**model, w, b, simdevice::SimDevice(), at::kFloat);
  return grads.count(param) ? grads.at(param) : at::Tensor();
}

// A 3% error in a backward kernel: five SGD steps hide it in bf16 noise, the first step's
// gradients do not. Every model that runs the op on the device fails train naming a parameter
// whose gradient flows through it, and the replay names the op; the others pass.
TEST(DeeperVerdictsTest, BackwardKernelErrorFailsTrainOnEveryModelThatRunsIt) {
  for (const std::string op : {"aten::_softmax_backward_data", "aten::native_layer_norm_backward"}) {
    const json defect = WithDefect(op, {{"kind", "scale"}, {"value", 1.03}});
    int hit = 0, spared = 0;
    for (const std::string& arch : kSpread) {
      Use(defect);
      ModelResult r = RunClass(arch, {"train"});
      const ModeResult& t = Mode(r, "train");
      if (r.native_ops.count(op) == 0) {
        EXPECT_EQ(t.status, Verdict::kPass) << op << " " << arch << ": " << t.error;
        ++spared;
        continue;
      }
      ++hit;
      ASSERT_EQ(t.status, Verdict::kFailAccuracy) << op << " " << arch << Describe(r);
      EXPECT_NE(t.error.find("grad: " + t.grad_worst_param), std::string::npos) << t.error;
      ASSERT_FALSE(t.suspects.empty()) << op << " " << arch;
      EXPECT_EQ(t.suspects[0].op, op) << arch;
      // The named parameter's gradient flows through the op: the defect changes it.
      const at::Tensor wrong = DeviceGradient(arch, t.grad_worst_param);
      Use(Baseline());
      const at::Tensor right = DeviceGradient(arch, t.grad_worst_param);
      ASSERT_TRUE(wrong.defined() && right.defined()) << arch << " " << t.grad_worst_param;
      EXPECT_FALSE(at::equal(wrong, right)) << arch << " " << t.grad_worst_param;
    }
    EXPECT_GE(hit, 6) << op;
    EXPECT_GE(spared, 1) << op;
  }
}

// A 1% error in compiled gelu is diluted below the model-level bf16 noise: the audit reports it
// on every BERT and GPT-2 class, and without the audit nothing is reported for a pass.
TEST(DeeperVerdictsTest, CompiledGeluErrorIsASuspectOnlyWithTheAudit) {
  Use(WithDefect("aten::gelu", {{"kind", "scale"}, {"value", 1.01}}, {{"mode", "compiled"}}));
  int models = 0;
  for (const auto& a : zoo::SupportedArchitectures()) {
    if (a.family != "bert" && a.family != "gpt2") continue;
    ++models;
    const ModeResult audited = Mode(RunClass(a.arch, {"compile"}, /*audit=*/true), "compile");
    EXPECT_TRUE(audited.audited) << a.arch;
    ASSERT_FALSE(audited.suspects.empty()) << a.arch << ": " << audited.error;
    EXPECT_EQ(audited.suspects[0].op, "aten::gelu") << a.arch;
    EXPECT_GT(audited.suspects[0].ratio, 1.0);
    EXPECT_EQ(audited.suspects[0].calls, audited.suspects[0].total_calls) << "every call";
    const ModeResult plain = Mode(RunClass(a.arch, {"compile"}), "compile");
    EXPECT_EQ(plain.status, audited.status) << "the audit never changes a verdict";
    if (plain.status == Verdict::kPass) {
      EXPECT_FALSE(plain.audited) << a.arch;
      EXPECT_TRUE(plain.suspects.empty()) << a.arch;
    }
  }
  EXPECT_EQ(models, 14);  // 9 bert classes (BertForPreTraining among them), 5 gpt2
}

// The shipped profiles' defect kinds (D1-D5: op, mode and effect as sim-2.0/2.1 have them, the
// size conditions dropped so that tiny models reach them): every mode that fails because of one
// names its op as the first suspect, and the audit names it on some model.
TEST(DeeperVerdictsTest, ShippedDefectKindsAreTheFirstSuspect) {
  struct Kind {
    std::string id, op, mode;
    json effect;
  };
  const std::vector<Kind> kinds = {
      {"D1", "aten::_softmax", "both", {{"kind", "scale"}, {"value", 1.001}}},
      {"D2", "aten::gelu", "eager", {{"kind", "scale"}, {"value", 1.02}}},
      {"D3", "aten::native_layer_norm", "compiled", {{"kind", "offset"}, {"value", 0.05}}},
      {"D4", "aten::embedding", "both", {{"kind", "zero_tail"}, {"value", 64}}},
      {"D5", "aten::rsqrt", "eager", {{"kind", "scale"}, {"value", 0.98}}},
  };
  for (const Kind& k : kinds) {
    json profile = WithDefect(k.op, k.effect, {{"mode", k.mode}});
    profile["native_ops"].push_back("aten::rsqrt");  // as sim-2.1 made it native (D5)
    Use(profile);
    int failures = 0, named = 0;
    for (const std::string& arch : kSpread) {
      ModelResult r = RunClass(arch, {"eager", "compile", "train"}, /*audit=*/true);
      for (const auto& [mode, m] : r.modes) {
        if (!m.suspects.empty() && m.suspects[0].op == k.op) ++named;
        if (m.status != Verdict::kFailAccuracy) continue;
        ++failures;
        ASSERT_FALSE(m.suspects.empty()) << k.id << " " << arch << " " << mode;
        EXPECT_EQ(m.suspects[0].op, k.op) << k.id << " " << arch << " " << mode;
      }
    }
    EXPECT_GT(named, 0) << k.id;
    if (k.id != "D1") {
      EXPECT_GT(failures, 0) << k.id << " fails no model";
    }
  }
}

// The replay compares each op with its reference and feeds the next op the reference result:
// only the wrong op is a suspect, the first divergent one first even when a later one is worse.
TEST(DeeperVerdictsTest, ReplayNamesTheFirstDivergentOpFirstAndOnlyWrongOps) {
  json profile = Baseline();
  profile["defects"] = json::array(
      {{{"id", "A"}, {"op", "aten::gelu"}, {"effect", {{"kind", "scale"}, {"value", 1.01}}}},
       {{"id", "B"}, {"op", "aten::exp"}, {"effect", {{"kind", "nan"}}}}});
  Use(profile);
  const at::Tensor x = at::randn({4, 16});
  const auto found = internal::ReplayOpByOp(simdevice::ActiveProfile().numerics, [&] {
    at::Tensor d = x.to(simdevice::SimDevice());
    at::Tensor y = at::gelu(d);      // 1% high
    at::Tensor z = at::add(y, d);    // right, given the reference gelu
    at::Tensor e = at::exp(z);       // NaN in its first element
    at::Tensor s = at::mul(e, e);    // right, given the reference exp
    EXPECT_TRUE(at::allclose(s.cpu(), at::exp(at::gelu(x) + x).pow(2), 1e-5, 1e-5))
        << "the replay returns the reference results";
  });
  const auto& suspects = found.suspects;
  EXPECT_TRUE(found.unchecked.empty());  // the CPU replays each of these ops
  ASSERT_EQ(suspects.size(), 2u);
  EXPECT_EQ(suspects[0].op, "aten::gelu");
  EXPECT_EQ(suspects[0].shapes, "[4,16]");
  EXPECT_EQ(suspects[0].dtype, "float32");
  EXPECT_NEAR(suspects[0].ratio, 1e4, 3e3);  // 1% over the pointwise tolerance (1e-6)
  EXPECT_EQ(suspects[1].op, "aten::exp");
  EXPECT_EQ(suspects[1].ratio, kNonFiniteRatio);
}

// An op whose CPU reference throws given the call's arguments is not checked, and says so: its
// calls are counted with the first error, and it is no suspect. An op the CPU replays is checked.
TEST(DeeperVerdictsTest, AnOpTheCpuCannotReplayIsCountedUnchecked) {
  Use(Baseline());
  internal::OpAudit audit(simdevice::ActiveProfile().numerics);
  const c10::OperatorHandle mm = c10::Dispatcher::singleton().findSchemaOrThrow("aten::mm", "");
  for (int i = 0; i < 2; ++i) {
    simdevice::DeviceOpCall call;
    call.op = &mm;
    call.name = "aten::mm";
    call.inputs = {at::randn({2, 3}), at::randn({4, 5})};  // shapes the CPU's mm refuses
    call.results = {at::zeros({2, 5})};
    audit.Check(call);
  }
  const c10::OperatorHandle neg = c10::Dispatcher::singleton().findSchemaOrThrow("aten::neg", "");
  simdevice::DeviceOpCall fine;
  fine.op = &neg;
  fine.name = "aten::neg";
  const at::Tensor x = at::randn({4});
  fine.inputs = {x.clone()};
  fine.results = {at::neg(x)};
  audit.Check(fine);
  const auto unchecked = audit.Unchecked();
  ASSERT_EQ(unchecked.size(), 1u);
  EXPECT_EQ(unchecked[0].op, "aten::mm");
  EXPECT_EQ(unchecked[0].calls, 2);
  EXPECT_NE(unchecked[0].error.find("cannot be multiplied"), std::string::npos)
      << unchecked[0].error;
  EXPECT_EQ(unchecked[0].error.find('\n'), std::string::npos) << "first line only";
  EXPECT_TRUE(audit.Suspects().empty());
}

TEST(DeeperVerdictsTest, ErrorRatioIsTheWorstErrorOverTolerance) {
  const at::Tensor want = at::tensor({1.0, -2.0, 4.0});
  EXPECT_EQ(internal::ErrorRatio(want.clone(), want, 1e-6), 0.0);
  // |err| 0.04 at scale 4: 0.01 relative, over 1e-3 tolerance: 10.
  EXPECT_NEAR(internal::ErrorRatio(at::tensor({1.0, -2.0, 4.04}), want, 1e-3), 10.0, 1e-9);
  EXPECT_EQ(internal::ErrorRatio(at::tensor({1.0, NAN, 4.0}), want, 1e-3), kNonFiniteRatio);
  EXPECT_EQ(internal::ErrorRatio(at::tensor({1.0, 2.0}), want, 1e-3), kNonFiniteRatio);
  const at::Tensor with_nan = at::tensor({1.0, NAN, INFINITY});
  EXPECT_EQ(internal::ErrorRatio(with_nan.clone(), with_nan, 1e-6), 0.0) << "same non-finite";
  EXPECT_EQ(internal::ErrorRatio(at::tensor({1.0, NAN, -INFINITY}), with_nan, 1e-6),
            kNonFiniteRatio);
}

}  // namespace
}  // namespace ts::engine
