// Nyströmformer against modeling_nystromformer.py: one layer in double, both attention branches
// (full softmax when num_landmarks == segment_means_seq_len, the Nyström landmarks with the
// iterative pseudo-inverse otherwise), the depthwise value conv as transformers' Conv2d with
// padding (K // 2, 0), expected values computed here from that file's formulas, not from the
// zoo's stack.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using testing::BuildFull;
using testing::ExpectConfigError;
using testing::MaxAbs;

constexpr int64_t kSeq = 8, kHid = 16, kHeads = 2, kBatch = 2;

nlohmann::json NystromSmall(const std::string& arch, int64_t landmarks, nlohmann::json kernel) {
  return {{"architectures", {arch}},
          {"model_type", "nystromformer"},
          {"hidden_size", kHid},
          {"num_attention_heads", kHeads},
          {"intermediate_size", 24},
          {"num_hidden_layers", 1},
          {"vocab_size", 40},
          {"max_position_embeddings", 16},
          {"type_vocab_size", 2},
          {"pad_token_id", 1},
          {"hidden_act", "gelu_new"},
          {"layer_norm_eps", 1e-5},
          {"segment_means_seq_len", kSeq},
          {"num_landmarks", landmarks},
          {"conv_kernel_size", kernel}};
}

// The written-out modules, every LayerNorm at NystromSmall's eps.
struct NysRef : testing::WrittenOutRef {
  at::Tensor Ln(const at::Tensor& x, const std::string& p) const {
    return WrittenOutRef::Ln(x, p, 1e-5);
  }
};

// NystromformerSelfAttention.iterative_inv, init_option "original".
at::Tensor IterativeInv(const at::Tensor& mat) {
  const at::Tensor identity = at::eye(mat.size(-1), at::kFloat);
  const at::Tensor key = mat;
  at::Tensor value = 1 / at::max(at::sum(key, -2)) * key.transpose(-1, -2);
  for (int i = 0; i < 6; ++i) {
    const at::Tensor kv = at::matmul(key, value);
    value = at::matmul(
        0.25 * value,
        13 * identity - at::matmul(kv, 15 * identity - at::matmul(kv, 7 * identity - kv)));
  }
  return value;
}

// NystromformerEmbeddings, then one NystromformerLayer; the layer's hidden states.
at::Tensor ModelRef(const NysRef& r, const at::Tensor& ids, const at::Tensor& types,
                    const at::Tensor& mask, int64_t landmarks, int64_t kernel) {
  const std::string l = "encoder.layer.0.";
  at::Tensor x = r.Emb("embeddings.word_embeddings.weight", ids) +
                 r.Emb("embeddings.token_type_embeddings.weight", types);
  x = x + r.Emb("embeddings.position_embeddings.weight",
                (at::arange(kSeq, at::kLong) + 2).unsqueeze(0).expand({kBatch, kSeq}));
  x = r.Ln(x, "embeddings.LayerNorm");
  const int64_t d = kHid / kHeads;
  auto split = [&](const at::Tensor& t) {
    return t.view({kBatch, kSeq, kHeads, d}).permute({0, 2, 1, 3});
  };
  const at::Tensor v = split(r.Lin(x, l + "attention.self.value"));
  const at::Tensor q =
      split(r.Lin(x, l + "attention.self.query")) / std::sqrt(std::sqrt(double(d)));
  const at::Tensor k = split(r.Lin(x, l + "attention.self.key")) / std::sqrt(std::sqrt(double(d)));
  const at::Tensor ext = (1.0 - mask.to(at::kDouble)).view({kBatch, 1, 1, kSeq}) *
                         std::numeric_limits<double>::lowest();
  at::Tensor ctx;
  if (landmarks == kSeq) {
    ctx = at::matmul(at::softmax(at::matmul(q, k.transpose(-1, -2)) + ext, -1), v);
  } else {
    const at::Tensor ql = q.reshape({-1, kHeads, landmarks, kSeq / landmarks, d}).mean(-2);
    const at::Tensor kl = k.reshape({-1, kHeads, landmarks, kSeq / landmarks, d}).mean(-2);
    const at::Tensor k1 = at::softmax(at::matmul(q, kl.transpose(-1, -2)), -1);
    const at::Tensor k2 = at::softmax(at::matmul(ql, kl.transpose(-1, -2)), -1);
    const at::Tensor k3 = at::softmax(at::matmul(ql, k.transpose(-1, -2)) + ext, -1);
    ctx = at::matmul(at::matmul(k1, IterativeInv(k2)), at::matmul(k3, v));
  }
  if (kernel > 0) {
    ctx = ctx + at::conv2d(v, r.w.at(l + "attention.self.conv.weight"), {}, {1, 1}, {kernel / 2, 0},
                           {1, 1}, kHeads);
  }
  ctx = ctx.permute({0, 2, 1, 3}).reshape({kBatch, kSeq, kHid});
  const at::Tensor a =
      r.Ln(r.Lin(ctx, l + "attention.output.dense") + x, l + "attention.output.LayerNorm");
  return r.Ln(r.Lin(NysRef::GeluNew(r.Lin(a, l + "intermediate.dense")), l + "output.dense") + a,
              l + "output.LayerNorm");
}

void CheckBranch(int64_t landmarks, int64_t kernel) {
  SCOPED_TRACE("landmarks " + std::to_string(landmarks) + " kernel " + std::to_string(kernel));
  auto m = BuildFull(NystromSmall("NystromformerForSequenceClassification", landmarks,
                                  kernel > 0 ? nlohmann::json(kernel) : nlohmann::json()));
  ASSERT_NE(m, nullptr);
  const WeightMap full = m->InitWeights(29, at::kDouble);
  WeightMap w;  // the base model's names without the class's "nystromformer." prefix
  for (const auto& [n, t] : full) w[n.rfind("nystromformer.", 0) == 0 ? n.substr(14) : n] = t;
  at::Tensor ids = (at::arange(kBatch * kSeq, at::kLong).view({kBatch, kSeq}) * 5 + 2) % 40;
  ids = ids.masked_fill(ids.eq(1), 3);
  at::Tensor mask = at::ones({kBatch, kSeq}, at::kLong);
  mask[1].narrow(0, kSeq - 3, 3).fill_(0);
  ids = ids.masked_fill(mask.eq(0), 1);
  at::Tensor types = at::zeros({kBatch, kSeq}, at::kLong);
  types.narrow(1, kSeq / 2, kSeq / 2).fill_(1);
  const auto out =
      m->Forward(full, {{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}});
  const NysRef r{{w}};
  const at::Tensor h = ModelRef(r, ids, types, mask, landmarks, kernel);
  // NystromformerClassificationHead: dense, hidden_act, out_proj over token 0.
  const at::Tensor logits =
      r.Lin(NysRef::GeluNew(r.Lin(h.select(1, 0), "classifier.dense")), "classifier.out_proj");
  EXPECT_LT(MaxAbs(out[0], logits), 1e-9);
}

TEST(NystromformerTest, FullAttentionWithConvAsTransformers) { CheckBranch(kSeq, 3); }
TEST(NystromformerTest, LandmarksWithConvAsTransformers) { CheckBranch(4, 5); }
TEST(NystromformerTest, LandmarksWithoutConvAsTransformers) { CheckBranch(2, 0); }

// The landmark branch needs the sequence at segment_means_seq_len tokens, as transformers'
// reshape does; the tiny model runs at that length.
TEST(NystromformerTest, LandmarkBranchRefusesOtherLengthsAndTinyKeepsIt) {
  auto m = BuildFull(NystromSmall("NystromformerModel", 4, 3));
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(1, at::kFloat);
  const at::Tensor ids = at::full({1, kSeq - 2}, 5, at::kLong);
  EXPECT_THROW(m->Forward(w, {{"input_ids", ids}}), std::exception);
  auto cfg = *ExampleConfig("NystromformerForMaskedLM");
  cfg["num_landmarks"] = 64;
  cfg["segment_means_seq_len"] = 512;
  BuildOptions o;
  o.arch = "NystromformerForMaskedLM";
  auto tiny = BuildModel(cfg, o);
  ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
  const auto& t = (*tiny)->spec().tiny_config;
  EXPECT_EQ(t["num_landmarks"], 4);  // 8 tokens per landmark, as the real one
  Batch b = (*tiny)->MakeBatch(1, 0);
  EXPECT_EQ(b.inputs.at("input_ids").size(1), t["segment_means_seq_len"].get<int64_t>());
  const auto out = (*tiny)->Forward((*tiny)->InitWeights(2, at::kFloat), b.inputs);
  EXPECT_TRUE(out[0].isfinite().all().item<bool>());
}

TEST(NystromformerTest, RefusesWhatItDoesNotSupport) {
  ExpectConfigError("NystromformerModel", "inv_coeff_init_option", true, "inv_coeff_init_option");
  ExpectConfigError("NystromformerModel", "num_landmarks", 5, "num_landmarks");
  ExpectConfigError("NystromformerModel", "conv_kernel_size", 4, "conv_kernel_size");
  ExpectConfigError("NystromformerModel", "position_embedding_type", "relative_key",
                    "position_embedding_type");
}

}  // namespace
}  // namespace ts::zoo
