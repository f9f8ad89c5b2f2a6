// mamba and falcon_mamba against a reference in double written from modeling_mamba.py's and
// modeling_falcon_mamba.py's slow_forward (not from the zoo's model): MambaBlock's pre-norm
// residual, the mixer token by token (in_proj, the padded positions zeroed, the causal depthwise
// conv1d written as a sum over the kernel, x_proj's split, softplus(dt_proj), the scan
// state = exp(A dt) state + dt B x with y_t = state . C_t, the D skip, the SiLU gate, out_proj),
// norm_f and the tied lm_head; FalconMamba's weight-free RMS norms on the time step, B and C.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;
using testing::Silu;
using testing::UnweightedRms;

constexpr int64_t kHidden = 8, kInter = 16, kState = 4, kRank = 3, kKernel = 3, kLayers = 2;
constexpr double kEps = 1e-5, kMixerEps = 1e-6;

json TinyConfig(const std::string& arch, const std::string& model_type) {
  return {{"architectures", {arch}},
          {"model_type", model_type},
          {"vocab_size", 32},
          {"hidden_size", kHidden},
          {"state_size", kState},
          {"num_hidden_layers", kLayers},
          {"expand", 2},
          {"conv_kernel", kKernel},
          {"time_step_rank", kRank},
          {"use_bias", true},
          {"use_conv_bias", true},
          {"layer_norm_epsilon", kEps},
          {"mixer_rms_eps", kMixerEps},
          {"pad_token_id", 0}};
}

// One sequence: x [S, H], keep [S] (1 real, 0 padded).
at::Tensor RefMixer(const WeightMap& w, const std::string& p, const at::Tensor& x,
                    const at::Tensor& keep, bool falcon) {
  const int64_t s = x.size(0);
  at::Tensor proj = at::matmul(x, w.at(p + "in_proj.weight").t()) + w.at(p + "in_proj.bias");
  at::Tensor hs = proj.narrow(1, 0, kInter) * keep.unsqueeze(1);
  at::Tensor gate = proj.narrow(1, kInter, kInter);
  const at::Tensor cw = w.at(p + "conv1d.weight"), cb = w.at(p + "conv1d.bias");
  at::Tensor conv = at::zeros({s, kInter}, at::kDouble);
  for (int64_t t = 0; t < s; ++t) {
    at::Tensor acc = cb.clone();
    for (int64_t j = 0; j < kKernel; ++j) {
      const int64_t src = t + j - (kKernel - 1);
      if (src >= 0) acc = acc + cw.select(2, j).squeeze(1) * hs[src];
    }
    conv[t] = acc;
  }
  hs = Silu(conv) * keep.unsqueeze(1);
  at::Tensor ssm = at::matmul(hs, w.at(p + "x_proj.weight").t());
  at::Tensor step = ssm.narrow(1, 0, kRank), b = ssm.narrow(1, kRank, kState);
  at::Tensor c = ssm.narrow(1, kRank + kState, kState);
  if (falcon) {
    step = UnweightedRms(step, kMixerEps);
    b = UnweightedRms(b, kMixerEps);
    c = UnweightedRms(c, kMixerEps);
  }
  at::Tensor dt = at::log1p(at::exp(at::matmul(step, w.at(p + "dt_proj.weight").t()) +
                                    w.at(p + "dt_proj.bias")));  // [S, I]
  const at::Tensor a = -at::exp(w.at(p + "A_log"));              // [I, N]
  at::Tensor state = at::zeros({kInter, kState}, at::kDouble);
  at::Tensor y = at::zeros({s, kInter}, at::kDouble);
  for (int64_t t = 0; t < s; ++t) {
    at::Tensor d = dt[t].unsqueeze(1);
    state = at::exp(a * d) * state + d * b[t].unsqueeze(0) * hs[t].unsqueeze(1);
    y[t] = at::matmul(state, c[t]);
  }
  y = (y + hs * w.at(p + "D")) * Silu(gate);
  return at::matmul(y, w.at(p + "out_proj.weight").t()) + w.at(p + "out_proj.bias");
}

at::Tensor RefBackbone(const WeightMap& w, const std::string& base, const at::Tensor& ids,
                       const at::Tensor& keep, bool falcon) {
  at::Tensor x = w.at(base + "embeddings.weight").index_select(0, ids);
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string p = base + "layers." + std::to_string(i) + ".";
    at::Tensor h = w.at(p + "norm.weight") * UnweightedRms(x, kEps);
    x = x + RefMixer(w, p + "mixer.", h, keep, falcon);
  }
  return w.at(base + "norm_f.weight") * UnweightedRms(x, kEps);
}

// Seeded weights with A_log and D moved off their initial values so that a swapped axis shows.
WeightMap Weights(const Model& m, const std::string& base) {
  WeightMap w = m.InitWeights(3, at::kDouble);
  at::Generator gen = at::detail::createCPUGenerator(11);
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string p = base + "layers." + std::to_string(i) + ".mixer.";
    w.at(p + "A_log") = w.at(p + "A_log") + 0.3 * at::randn({kInter, kState}, gen, at::kDouble);
    w.at(p + "D") = at::randn({kInter}, gen, at::kDouble);
  }
  return w;
}

void CheckFamily(const std::string& prefix, const std::string& model_type, bool falcon) {
  auto base = testing::BuildFull(TinyConfig(prefix + "Model", model_type));
  auto lm = testing::BuildFull(TinyConfig(prefix + "ForCausalLM", model_type));
  ASSERT_TRUE(base && lm);
  EXPECT_EQ(testing::WeightShape(*base, "layers.1.mixer.x_proj.weight"),
            (std::vector<int64_t>{kRank + 2 * kState, kInter}));
  EXPECT_EQ(testing::WeightShape(*base, "layers.0.mixer.conv1d.weight"),
            (std::vector<int64_t>{kInter, 1, kKernel}));
  EXPECT_FALSE(testing::HasWeight(*lm, "lm_head.weight"));  // tied
  // Initialised as MambaPreTrainedModel._init_weights: A_log = log(1..N) per channel, D = 1,
  // softplus(dt_proj.bias) within [time_step_min, time_step_max].
  WeightMap init = base->InitWeights(3, at::kDouble);
  EXPECT_LT(testing::MaxAbs(init.at("layers.0.mixer.A_log")[5],
                            at::log(at::arange(1, kState + 1, at::kDouble))),
            1e-6);  // generated in float32, then cast
  EXPECT_EQ(init.at("layers.0.mixer.D").sum().item<double>(), kInter);
  at::Tensor dt0 = at::log1p(at::exp(init.at("layers.0.mixer.dt_proj.bias")));
  EXPECT_GE(dt0.min().item<double>(), 0.001 - 1e-8);
  EXPECT_LE(dt0.max().item<double>(), 0.1 + 1e-8);

  const int64_t s = 9;
  at::Generator gen = at::detail::createCPUGenerator(5);
  at::Tensor ids = at::randint(1, 32, {2, s}, gen, at::TensorOptions().dtype(at::kLong));
  at::Tensor mask = at::ones({2, s}, at::kLong);
  mask[1].narrow(0, s - 3, 3).fill_(0);
  WeightMap w = Weights(*base, "");
  const at::Tensor got = base->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}})[0];
  for (int64_t r = 0; r < 2; ++r) {
    at::Tensor want = RefBackbone(w, "", ids[r], mask[r].to(at::kDouble), falcon);
    EXPECT_LT(testing::RelDiff(got[r], want), 1e-10) << prefix << " row " << r;
  }
  // The causal LM: backbone. names, logits over the tied embeddings.
  WeightMap wl;
  for (const auto& [n, t] : w) wl["backbone." + n] = t;
  const at::Tensor logits = lm->Forward(wl, {{"input_ids", ids}, {"attention_mask", mask}})[0];
  at::Tensor want =
      at::matmul(RefBackbone(wl, "backbone.", ids[0], mask[0].to(at::kDouble), falcon),
                 wl.at("backbone.embeddings.weight").t());
  EXPECT_LT(testing::RelDiff(logits[0], want), 1e-10) << prefix;
  // The other family's mixer gives other numbers on the same weights.
  at::Tensor other = RefBackbone(w, "", ids[0], mask[0].to(at::kDouble), !falcon);
  EXPECT_GT(testing::RelDiff(got[0], other), 1e-6) << prefix;
}

TEST(MambaTest, SlowForwardAsTransformers) { CheckFamily("Mamba", "mamba", false); }

TEST(MambaTest, FalconMambaNormsTheTimeStepBAndC) {
  CheckFamily("FalconMamba", "falcon_mamba", true);
}

TEST(MambaTest, RefusesWhatItDoesNotRun) {
  testing::ExpectConfigError("MambaForCausalLM", "time_step_rank", "half", "time_step_rank");
  testing::ExpectConfigError("MambaForCausalLM", "time_step_init_scheme", "orthogonal",
                             "time_step_init_scheme");
  testing::ExpectConfigError("MambaModel", "conv_kernel", 0, "conv_kernel");
  testing::ExpectConfigError("MambaModel", "hidden_act", "tanhshrink", "hidden_act");
  testing::ExpectConfigError("FalconMambaForCausalLM", "mixer_rms_eps", 0, "mixer_rms_eps");
}

}  // namespace
}  // namespace ts::zoo
