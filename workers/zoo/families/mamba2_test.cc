// mamba2 against a reference in double written from modeling_mamba2.py's torch_forward (not from
// the zoo's model): Mamba2Block's pre-norm residual; the mixer per sequence (the padded positions
// zeroed, in_proj split into gate, xBC and dt, the causal depthwise conv1d written as a sum over
// the kernel, x / B / C with n_groups, dt = clamp(softplus(dt + dt_bias), time_step_limit),
// A = -exp(A_log) a head) with the SSD output computed as torch_forward's chunked form does it
// (within-chunk segment sums, chunk states, the recurrence between chunks, chunk_size 4 over 9
// tokens), while the zoo scans token by token; the D skip, MambaRMSNormGated, out_proj; norm_f
// and the lm_head.
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

constexpr int64_t kHidden = 8, kInter = 16, kHeads = 4, kHeadDim = 4, kGroups = 2, kState = 3;
constexpr int64_t kKernel = 3, kLayers = 2, kChunk = 4;
constexpr double kEps = 1e-5, kDtLo = 0.05, kDtHi = 0.6;

json TinyConfig(const std::string& arch, bool tie) {
  return {{"architectures", {arch}},
          {"model_type", "mamba2"},
          {"vocab_size", 32},
          {"hidden_size", kHidden},
          {"state_size", kState},
          {"num_hidden_layers", kLayers},
          {"expand", 2},
          {"num_heads", kHeads},
          {"head_dim", kHeadDim},
          {"n_groups", kGroups},
          {"chunk_size", kChunk},
          {"conv_kernel", kKernel},
          {"use_bias", true},
          {"use_conv_bias", true},
          {"layer_norm_epsilon", kEps},
          {"time_step_limit", {kDtLo, kDtHi}},
          {"tie_word_embeddings", tie},
          {"pad_token_id", 0}};
}

// The SSD output of one head without the D skip, as the chunked form: x [S, P], dt [S], b and
// c [S, N], a the head's A.
at::Tensor ChunkedSsd(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& b,
                      const at::Tensor& c, double a) {
  const int64_t s = x.size(0), chunks = (s + kChunk - 1) / kChunk;
  at::Tensor y = at::zeros({s, kHeadDim}, at::kDouble);
  at::Tensor carried = at::zeros({kHeadDim, kState}, at::kDouble);  // state entering a chunk
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t lo = k * kChunk, hi = std::min(s, lo + kChunk);
    std::vector<double> cum;  // cumulative A dt within the chunk
    double run = 0;
    for (int64_t t = lo; t < hi; ++t) cum.push_back(run += a * dt[t].item<double>());
    at::Tensor chunk_state = at::zeros({kHeadDim, kState}, at::kDouble);
    for (int64_t l = lo; l < hi; ++l) {
      at::Tensor acc = std::exp(cum[l - lo]) * at::matmul(carried, c[l]);  // Y_off
      for (int64_t j = lo; j <= l; ++j)  // Y_diag: (C_l . B_j) exp(cum_l - cum_j) dt_j x_j
        acc = acc + at::dot(c[l], b[j]) * std::exp(cum[l - lo] - cum[j - lo]) * dt[j] * x[j];
      y[l] = acc;
    }
    for (int64_t j = lo; j < hi; ++j)
      chunk_state =
          chunk_state + std::exp(cum.back() - cum[j - lo]) * dt[j] * at::outer(x[j], b[j]);
    carried = std::exp(cum.back()) * carried + chunk_state;
  }
  return y;
}

// One sequence: x [S, H], keep [S] (1 real, 0 padded).
at::Tensor RefMixer(const WeightMap& w, const std::string& p, const at::Tensor& x,
                    const at::Tensor& keep) {
  const int64_t s = x.size(0), conv_dim = kInter + 2 * kGroups * kState;
  at::Tensor proj =
      at::matmul(x * keep.unsqueeze(1), w.at(p + "in_proj.weight").t()) + w.at(p + "in_proj.bias");
  at::Tensor gate = proj.narrow(1, 0, kInter);
  at::Tensor xbc = proj.narrow(1, kInter, conv_dim);
  at::Tensor dt_raw = proj.narrow(1, kInter + conv_dim, kHeads);
  const at::Tensor cw = w.at(p + "conv1d.weight"), cb = w.at(p + "conv1d.bias");
  at::Tensor conv = at::zeros({s, conv_dim}, at::kDouble);
  for (int64_t t = 0; t < s; ++t) {
    at::Tensor acc = cb.clone();
    for (int64_t j = 0; j < kKernel; ++j) {
      const int64_t src = t + j - (kKernel - 1);
      if (src >= 0) acc = acc + cw.select(2, j).squeeze(1) * xbc[src];
    }
    conv[t] = acc;
  }
  conv = Silu(conv) * keep.unsqueeze(1);
  at::Tensor dt =
      at::log1p(at::exp(dt_raw + w.at(p + "dt_bias"))).clamp(kDtLo, kDtHi);  // [S, heads]
  at::Tensor y = at::zeros({s, kInter}, at::kDouble);
  for (int64_t h = 0; h < kHeads; ++h) {
    const int64_t g = h / (kHeads / kGroups);  // repeat_interleave: consecutive heads share
    at::Tensor xh = conv.narrow(1, h * kHeadDim, kHeadDim);
    at::Tensor bh = conv.narrow(1, kInter + g * kState, kState);
    at::Tensor ch = conv.narrow(1, kInter + kGroups * kState + g * kState, kState);
    const double a = -std::exp(w.at(p + "A_log")[h].item<double>());
    y.narrow(1, h * kHeadDim, kHeadDim)
        .copy_(ChunkedSsd(xh, dt.select(1, h), bh, ch, a) + w.at(p + "D")[h] * xh);
  }
  y = w.at(p + "norm.weight") * UnweightedRms(y * Silu(gate), kEps);
  return at::matmul(y, w.at(p + "out_proj.weight").t()) + w.at(p + "out_proj.bias");
}

at::Tensor RefBackbone(const WeightMap& w, const std::string& base, const at::Tensor& ids,
                       const at::Tensor& keep) {
  at::Tensor x = w.at(base + "embeddings.weight").index_select(0, ids);
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string p = base + "layers." + std::to_string(i) + ".";
    x = x + RefMixer(w, p + "mixer.", w.at(p + "norm.weight") * UnweightedRms(x, kEps), keep);
  }
  return w.at(base + "norm_f.weight") * UnweightedRms(x, kEps);
}

TEST(Mamba2Test, TorchForwardAsTransformers) {
  auto base = testing::BuildFull(TinyConfig("Mamba2Model", true));
  auto lm = testing::BuildFull(TinyConfig("Mamba2ForCausalLM", false));
  ASSERT_TRUE(base && lm);
  const int64_t conv_dim = kInter + 2 * kGroups * kState;
  EXPECT_EQ(testing::WeightShape(*base, "layers.1.mixer.in_proj.weight"),
            (std::vector<int64_t>{kInter + conv_dim + kHeads, kHidden}));
  EXPECT_EQ(testing::WeightShape(*base, "layers.0.mixer.conv1d.weight"),
            (std::vector<int64_t>{conv_dim, 1, kKernel}));
  EXPECT_EQ(testing::WeightShape(*base, "layers.0.mixer.norm.weight"),
            (std::vector<int64_t>{kInter}));
  EXPECT_TRUE(testing::HasWeight(*lm, "lm_head.weight"));  // tie_word_embeddings false
  // init_mamba2_weights: A_log = log(1..heads), D = 1, softplus(dt_bias) in [min, max].
  WeightMap init = base->InitWeights(3, at::kDouble);
  EXPECT_LT(testing::MaxAbs(init.at("layers.0.mixer.A_log"),
                            at::log(at::arange(1, kHeads + 1, at::kDouble))),
            1e-6);
  EXPECT_EQ(init.at("layers.0.mixer.D").sum().item<double>(), kHeads);
  at::Tensor dt0 = at::log1p(at::exp(init.at("layers.0.mixer.dt_bias")));
  EXPECT_GE(dt0.min().item<double>(), 0.001 - 1e-8);
  EXPECT_LE(dt0.max().item<double>(), 0.1 + 1e-8);

  const int64_t s = 9;
  at::Generator gen = at::detail::createCPUGenerator(5);
  at::Tensor ids = at::randint(1, 32, {2, s}, gen, at::TensorOptions().dtype(at::kLong));
  at::Tensor mask = at::ones({2, s}, at::kLong);
  mask[1].narrow(0, s - 3, 3).fill_(0);
  // Seeded weights with A_log, D and dt_bias moved so that a swapped head or a lost clamp shows.
  WeightMap w = init;
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".mixer.";
    w.at(p + "A_log") = w.at(p + "A_log") + 0.5 * at::randn({kHeads}, gen, at::kDouble);
    w.at(p + "D") = at::randn({kHeads}, gen, at::kDouble);
    w.at(p + "dt_bias") = at::randn({kHeads}, gen, at::kDouble);
  }
  const at::Tensor got = base->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}})[0];
  for (int64_t r = 0; r < 2; ++r) {
    at::Tensor want = RefBackbone(w, "", ids[r], mask[r].to(at::kDouble));
    EXPECT_LT(testing::RelDiff(got[r], want), 1e-10) << "row " << r;
  }
  // The causal LM: backbone. names, its own lm_head.
  WeightMap wl;
  for (const auto& [n, t] : w) wl["backbone." + n] = t;
  wl["lm_head.weight"] = at::randn({32, kHidden}, gen, at::kDouble);
  const at::Tensor logits = lm->Forward(wl, {{"input_ids", ids}, {"attention_mask", mask}})[0];
  at::Tensor want = at::matmul(RefBackbone(wl, "backbone.", ids[1], mask[1].to(at::kDouble)),
                               wl.at("lm_head.weight").t());
  EXPECT_LT(testing::RelDiff(logits[1], want), 1e-10);
}

TEST(Mamba2Test, RefusesWhatItDoesNotRun) {
  // num_heads * head_dim other than the stream (d_mlp > 0 or a broken reshape).
  testing::ExpectConfigError("Mamba2Model", "num_heads", 100, "num_heads");
  testing::ExpectConfigError("Mamba2Model", "n_groups", 3, "n_groups");
  testing::ExpectConfigError("Mamba2ForCausalLM", "time_step_limit", "wide", "time_step_limit");
  testing::ExpectConfigError("Mamba2ForCausalLM", "time_step_limit", json::array({0.5, 0.1}),
                             "time_step_limit");
  testing::ExpectConfigError("Mamba2Model", "hidden_act", "tanhshrink", "hidden_act");
  testing::ExpectConfigError("Mamba2Model", "conv_kernel", 0, "conv_kernel");
}

}  // namespace
}  // namespace ts::zoo
