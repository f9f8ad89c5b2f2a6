// XLNet against modeling_xlnet.py: one layer of the content stream in double, written with
// transformers' own einsums in its [len, batch] layout, not from the zoo's stack.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using testing::BuildFull;
using testing::ExpectConfigError;
using testing::MaxAbs;

constexpr int64_t kSeq = 6, kModel = 8, kHeads = 2;
constexpr double kEps = 1e-12;  // layer_norm_eps

nlohmann::json XlnetSmall(const std::string& arch) {
  return {{"architectures", {arch}}, {"model_type", "xlnet"}, {"d_model", kModel},
          {"n_head", kHeads},        {"n_layer", 1},          {"d_inner", 12},
          {"vocab_size", 40},        {"pad_token_id", 5},     {"layer_norm_eps", kEps},
          {"ff_activation", "gelu"}, {"attn_type", "bi"}};
}

// XLNetModel.forward with attention_mask and token_type_ids, attn_type "bi", no mems.
at::Tensor XlnetReference(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                          const at::Tensor& types, const std::string& p) {
  const int64_t s = kSeq, b = 2;
  const testing::WrittenOutRef r{w};
  const at::Tensor h =
      w.at(p + "word_embedding.weight").index_select(0, ids.t().reshape(-1)).view({s, b, kModel});
  const std::string a = p + "layer.0.rel_attn.";
  auto head = [&](const at::Tensor& x, const std::string& n) {
    return at::einsum("ibh,hnd->ibnd", {x, w.at(a + n)});
  };
  const at::Tensor q = head(h, "q"), k = head(h, "k"), v = head(h, "v");
  // relative_positional_encoding computes in float32 (.float()) whatever the model's dtype.
  const at::Tensor freq = at::arange(0, kModel, 2, at::kLong).to(at::kFloat);
  const at::Tensor inv = 1.0 / at::pow(10000, freq / double(kModel));
  const at::Tensor pos_seq = at::arange(s, -s, -1, at::kLong).to(at::kFloat);
  const at::Tensor sinusoid = at::einsum("i,d->id", {pos_seq, inv});
  const at::Tensor pos_emb = at::cat({at::sin(sinusoid), at::cos(sinusoid)}, -1)
                                 .to(at::kDouble)
                                 .unsqueeze(1)
                                 .expand({2 * s, b, kModel});
  const at::Tensor kr = head(pos_emb, "r");
  const at::Tensor ac = at::einsum("ibnd,jbnd->bnij", {q + w.at(a + "r_w_bias"), k});
  at::Tensor bd = at::einsum("ibnd,jbnd->bnij", {q + w.at(a + "r_r_bias"), kr});
  const auto sz = bd.sizes().vec();
  bd = bd.reshape({sz[0], sz[1], sz[3], sz[2]}).narrow(2, 1, sz[3] - 1);
  bd = bd.reshape({sz[0], sz[1], sz[2], sz[3] - 1}).narrow(3, 0, s);
  const at::Tensor tt = types.t();
  const at::Tensor seg_mat =
      at::one_hot(tt.unsqueeze(1).ne(tt.unsqueeze(0)).to(at::kLong), 2).to(at::kDouble);
  at::Tensor ef = at::einsum("ibnd,snd->ibns", {q + w.at(a + "r_s_bias"), w.at(a + "seg_embed")});
  ef = at::einsum("ijbs,ibns->bnij", {seg_mat, ef});
  at::Tensor score = (ac + bd + ef) * (1.0 / std::sqrt(double(kModel / kHeads)));
  const at::Tensor input_mask = 1.0 - mask.t().to(at::kDouble);        // [j, b]
  const at::Tensor attn_mask = input_mask.unsqueeze(0).unsqueeze(-1);  // [1, j, b, 1]
  const at::Tensor non_tgt =
      (attn_mask - at::eye(s, at::kDouble).unsqueeze(-1).unsqueeze(-1)).gt(0).to(at::kDouble);
  score = score - 1e30 * at::einsum("ijbn->bnij", {non_tgt});
  const at::Tensor vec = at::einsum("bnij,jbnd->ibnd", {at::softmax(score, 3), v});
  const at::Tensor attn =
      r.Ln(at::einsum("ibnd,hnd->ibh", {vec, w.at(a + "o")}) + h, a + "layer_norm", kEps);
  const std::string f = p + "layer.0.ff.";
  const at::Tensor gelu = r.Gelu(r.Lin(attn, f + "layer_1"));
  return r.Ln(r.Lin(gelu, f + "layer_2") + attn, f + "layer_norm", kEps).permute({1, 0, 2});
}

void Inputs(at::Tensor& ids, at::Tensor& mask, at::Tensor& types) {
  ids = (at::arange(2 * kSeq, at::kLong).view({2, kSeq}) * 7 + 3).remainder(40);
  ids = ids.masked_fill(ids.eq(5), 6);
  mask = at::ones({2, kSeq}, at::kLong);
  mask[1].narrow(0, kSeq - 2, 2).fill_(0);
  ids = ids.masked_fill(mask.eq(0), 5);
  types = at::zeros({2, kSeq}, at::kLong);
  types.narrow(1, kSeq / 2, kSeq - kSeq / 2).fill_(1);
}

TEST(XlnetTest, ContentStreamAsTransformers) {
  at::Tensor ids, mask, types;
  Inputs(ids, mask, types);
  const TensorMap in = {{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}};
  auto m = BuildFull(XlnetSmall("XLNetModel"));
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(21, at::kDouble);
  // Padded queries attend to themselves too (non_tgt_mask): every position is compared.
  EXPECT_LT(MaxAbs(m->Forward(w, in)[0], XlnetReference(w, ids, mask, types, "")), 1e-10);
  // XLNetForSequenceClassification: logits_proj(tanh(sequence_summary.summary(h[:, -1]))).
  auto cls = BuildFull(XlnetSmall("XLNetForSequenceClassification"));
  ASSERT_NE(cls, nullptr);
  const WeightMap cw = cls->InitWeights(22, at::kDouble);
  const testing::WrittenOutRef r{cw};
  const at::Tensor last = XlnetReference(cw, ids, mask, types, "transformer.").select(1, kSeq - 1);
  EXPECT_LT(MaxAbs(cls->Forward(cw, in)[0],
                   r.Lin(at::tanh(r.Lin(last, "sequence_summary.summary")), "logits_proj")),
            1e-10);
}

// XLNetLMHeadModel: lm_loss tied to word_embedding plus its bias; the loss is the cross entropy
// over every labelled position, not shifted.
TEST(XlnetTest, LmHeadAsTransformers) {
  at::Tensor ids, mask, types;
  Inputs(ids, mask, types);
  auto m = BuildFull(XlnetSmall("XLNetLMHeadModel"));
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(23, at::kDouble);
  const TensorMap in = {{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}};
  const at::Tensor logits = at::matmul(XlnetReference(w, ids, mask, types, "transformer."),
                                       w.at("transformer.word_embedding.weight").t()) +
                            w.at("lm_loss.bias");
  EXPECT_LT(MaxAbs(m->Forward(w, in)[0], logits), 1e-10);
  const at::Tensor labels = ids.masked_fill(mask.eq(0), -100);
  Batch batch;
  batch.inputs = in;
  batch.labels["labels"] = labels;
  const at::Tensor want =
      at::cross_entropy_loss(logits.reshape({-1, 40}), labels.reshape({-1}), {}, 1, -100);
  EXPECT_NEAR(m->Loss(w, batch).item<double>(), want.item<double>(), 1e-10);
  bool tied = false;
  for (const StateDictEntry& e : StateDictShapes(*m))
    tied = tied || (e.name == "lm_loss.weight" && e.tied_to == "transformer.word_embedding.weight");
  EXPECT_TRUE(tied);
}

TEST(XlnetTest, RefusesWhatItDoesNotSupport) {
  ExpectConfigError("XLNetModel", "attn_type", "uni", "attn_type");
  ExpectConfigError("XLNetModel", "bi_data", true, "bi_data");
  ExpectConfigError("XLNetForSequenceClassification", "summary_type", "first", "summary_type");
}

}  // namespace
}  // namespace ts::zoo
