// The encoder families with stacks of their own (encoder.h Stack) against the transformers code
// named in each test (modeling_mobilebert.py, modeling_esm.py): one or two layers in double, the
// expected values computed here from those files' formulas, not from the zoo's stacks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using testing::BuildFull;
using testing::ExpectConfigError;
using testing::HasWeight;
using testing::Kept;
using testing::MaxAbs;
using testing::PaddedInputs;
using testing::RotateHalf;

constexpr int64_t kSeq = 6;

// The written-out modules, and BertSelfAttention's softmax step.
struct Ref : testing::WrittenOutRef {
  // softmax(q k^T * scale + (1 - mask) * finfo.min) v over [N, S, heads * d] projections.
  static at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& mask, int64_t heads, double scale) {
    const int64_t n = q.size(0), s = q.size(1), d = q.size(2) / heads;
    auto split = [&](const at::Tensor& t) { return t.view({n, s, heads, d}).transpose(1, 2); };
    const at::Tensor ext =
        (1.0 - mask.to(at::kDouble)).view({n, 1, 1, s}) * std::numeric_limits<double>::lowest();
    const at::Tensor scores = at::matmul(split(q), split(k).transpose(-1, -2)) * scale + ext;
    return at::matmul(at::softmax(scores, -1), split(v)).transpose(1, 2).reshape({n, s, -1});
  }
};

// ---- MobileBERT
// ----------------------------------------------------------------------------------

nlohmann::json MobileSmall(const std::string& arch) {
  return {
      {"architectures", {arch}}, {"model_type", "mobilebert"},    {"hidden_size", 16},
      {"embedding_size", 8},     {"intra_bottleneck_size", 8},    {"num_attention_heads", 2},
      {"intermediate_size", 12}, {"num_hidden_layers", 1},        {"num_feedforward_networks", 3},
      {"vocab_size", 40},        {"max_position_embeddings", 20}, {"type_vocab_size", 2},
      {"pad_token_id", 0},       {"layer_norm_eps", 1e-12},       {"hidden_act", "relu"}};
}

struct MobileVariant {
  std::string norm;
  bool use_bottleneck, bottleneck_attention, kq_shared, trigram;
};

// MobileBertEmbeddings: cat([pad(e[:, 1:]) at the end, e, pad(e[:, :-1]) at the start], 2),
// embedding_transformation, + positions + token types, NORM2FN[...](hidden_size) (LayerNorm's
// eps 1e-5). MobileBertLayer: Bottleneck (input, shared attention), attention with
// attention.output.LayerNorm(dense(ctx) + layer_input), the FFNLayers, intermediate, output:
// LayerNorm(dense + a) at eps 1e-5, output.bottleneck: LayerNorm(dense + hidden_states).
at::Tensor MobileReference(const Ref& r, const MobileVariant& v, const at::Tensor& ids,
                           const at::Tensor& mask, const at::Tensor& types) {
  const bool no_norm = v.norm == "no_norm";
  auto norm = [&](const at::Tensor& x, const std::string& p, double eps) {
    return no_norm ? x * r.w.at(p + ".weight") + r.w.at(p + ".bias") : r.Ln(x, p, eps);
  };
  at::Tensor e = r.Emb("embeddings.word_embeddings.weight", ids);
  if (v.trigram) {
    using at::indexing::Slice;
    const at::Tensor zero = at::zeros({e.size(0), 1, e.size(2)}, e.options());
    e = at::cat({at::cat({e.index({Slice(), Slice(1)}), zero}, 1), e,
                 at::cat({zero, e.index({Slice(), Slice(0, -1)})}, 1)},
                2);
  }
  e = r.Lin(e, "embeddings.embedding_transformation");
  const at::Tensor pos = at::arange(kSeq, at::kLong).unsqueeze(0).expand({2, kSeq});
  at::Tensor h = norm(e + r.Emb("embeddings.position_embeddings.weight", pos) +
                          r.Emb("embeddings.token_type_embeddings.weight", types),
                      "embeddings.LayerNorm", 1e-5);
  const std::string l = "encoder.layer.0.";
  at::Tensor q = h, k = h, val = h, input = h;
  if (v.use_bottleneck) {
    input = norm(r.Lin(h, l + "bottleneck.input.dense"), l + "bottleneck.input.LayerNorm", 1e-12);
    if (v.bottleneck_attention) {
      q = k = val = input;
    } else if (v.kq_shared) {
      q = k = norm(r.Lin(h, l + "bottleneck.attention.dense"), l + "bottleneck.attention.LayerNorm",
                   1e-12);
    }
  }
  const int64_t true_hidden = v.use_bottleneck && (v.kq_shared || v.bottleneck_attention) ? 8 : 16;
  const at::Tensor ctx = Ref::Attend(
      r.Lin(q, l + "attention.self.query"), r.Lin(k, l + "attention.self.key"),
      r.Lin(val, l + "attention.self.value"), mask, 2, 1.0 / std::sqrt(double(true_hidden / 2)));
  at::Tensor a = norm(r.Lin(ctx, l + "attention.output.dense") + input,
                      l + "attention.output.LayerNorm", 1e-12);
  for (int j = 0; j < 2; ++j) {
    const std::string f = l + "ffn." + std::to_string(j) + ".";
    a = norm(r.Lin(at::relu(r.Lin(a, f + "intermediate.dense")), f + "output.dense") + a,
             f + "output.LayerNorm", 1e-12);
  }
  at::Tensor out = norm(r.Lin(at::relu(r.Lin(a, l + "intermediate.dense")), l + "output.dense") + a,
                        l + "output.LayerNorm", 1e-5);
  if (v.use_bottleneck) {
    out = norm(r.Lin(out, l + "output.bottleneck.dense") + h, l + "output.bottleneck.LayerNorm",
               1e-12);
  }
  return out;
}

TEST(EncoderStacksTest, MobileBertLayersAsTransformers) {
  for (const MobileVariant& v : {MobileVariant{"no_norm", true, false, true, true},
                                 MobileVariant{"layer_norm", true, false, true, true},
                                 MobileVariant{"layer_norm", true, true, false, true},
                                 MobileVariant{"layer_norm", true, false, false, false},
                                 MobileVariant{"no_norm", false, false, false, true}}) {
    nlohmann::json cfg = MobileSmall("MobileBertModel");
    cfg["normalization_type"] = v.norm;
    cfg["use_bottleneck"] = v.use_bottleneck;
    cfg["use_bottleneck_attention"] = v.bottleneck_attention;
    cfg["key_query_shared_bottleneck"] = v.kq_shared;
    cfg["trigram_input"] = v.trigram;
    // Without an attention bottleneck the query reads the hidden width (the only valid size).
    if (!v.kq_shared && !v.bottleneck_attention) cfg["intra_bottleneck_size"] = 16;
    auto m = BuildFull(cfg);
    ASSERT_NE(m, nullptr);
    const WeightMap w = m->InitWeights(5, at::kDouble);
    at::Tensor ids, mask;
    PaddedInputs(40, 0, kSeq, ids, mask);
    at::Tensor types = at::zeros({2, kSeq}, at::kLong);
    types.narrow(1, kSeq / 2, kSeq - kSeq / 2).fill_(1);
    const auto out =
        m->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}});
    const Ref r{{w}};
    const at::Tensor want = MobileReference(r, v, ids, mask, types);
    EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(want, mask)), 1e-10) << v.norm;
    EXPECT_LT(MaxAbs(out[1], at::tanh(r.Lin(want.select(1, 0), "pooler.dense"))), 1e-10);
    EXPECT_EQ(HasWeight(*m, "encoder.layer.0.bottleneck.attention.dense.weight"),
              v.use_bottleneck && v.kq_shared && !v.bottleneck_attention);
  }
}

// MobileBertLMPredictionHead: LayerNorm(act(transform.dense(h))) @ cat([decoder.weight.t(),
// dense.weight], 0) + bias, the decoder tied to the word embeddings [V, E].
TEST(EncoderStacksTest, MobileBertMaskedLmDecoderAsTransformers) {
  auto m = BuildFull(MobileSmall("MobileBertForMaskedLM"));
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(HasWeight(*m, "mobilebert.pooler.dense.weight"));  // add_pooling_layer=False
  const WeightMap w = m->InitWeights(6, at::kDouble);
  at::Tensor ids, mask;
  PaddedInputs(40, 0, kSeq, ids, mask);
  const auto out = m->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}});
  auto base = BuildFull(MobileSmall("MobileBertModel"));
  ASSERT_NE(base, nullptr);
  WeightMap bw;
  for (const auto& [n, s] : base->WeightShapes())
    bw[n] = n.rfind("pooler.", 0) == 0 ? at::zeros(s, at::kDouble) : w.at("mobilebert." + n);
  const at::Tensor h = base->Forward(bw, {{"input_ids", ids}, {"attention_mask", mask}})[0];
  const Ref r{{w}};
  const at::Tensor t = r.Ln(at::relu(r.Lin(h, "cls.predictions.transform.dense")),
                            "cls.predictions.transform.LayerNorm", 1e-12);
  const at::Tensor dec = at::cat({w.at("mobilebert.embeddings.word_embeddings.weight").t(),
                                  w.at("cls.predictions.dense.weight")},
                                 0);
  const at::Tensor want = at::matmul(t, dec) + w.at("cls.predictions.bias");
  EXPECT_LT(MaxAbs(out[0], want), 1e-10);
  std::map<std::string, StateDictEntry> sd;
  for (const StateDictEntry& e : StateDictShapes(*m)) sd[e.name] = e;
  ASSERT_TRUE(sd.count("cls.predictions.decoder.weight"));
  EXPECT_EQ(sd.at("cls.predictions.decoder.weight").tied_to,
            "mobilebert.embeddings.word_embeddings.weight");
  EXPECT_EQ(sd.at("cls.predictions.decoder.bias").tied_to, "cls.predictions.bias");
  EXPECT_EQ(sd.at("cls.predictions.dense.weight").shape, (std::vector<int64_t>{8, 40}));
}

TEST(EncoderStacksTest, MobileBertRefusesWhatItDoesNotSupport) {
  ExpectConfigError("MobileBertModel", "normalization_type", "batch_norm", "normalization_type");
  ExpectConfigError("MobileBertModel", "classifier_activation", false, "classifier_activation");
  ExpectConfigError("MobileBertForMaskedLM", "embedding_size", 512, "embedding_size");
  ExpectConfigError("MobileBertModel", "num_feedforward_networks", 0, "num_feedforward_networks");
  ExpectConfigError("MobileBertModel", "key_query_shared_bottleneck", false,
                    "key_query_shared_bottleneck");
}

// ---- ESM
// -----------------------------------------------------------------------------------------

nlohmann::json EsmSmall(const std::string& arch, bool rotary) {
  return {{"architectures", {arch}},
          {"model_type", "esm"},
          {"hidden_size", 8},
          {"num_attention_heads", 2},
          {"intermediate_size", 12},
          {"num_hidden_layers", 1},
          {"vocab_size", 40},
          {"max_position_embeddings", 20},
          {"pad_token_id", 1},
          {"mask_token_id", 39},
          {"layer_norm_eps", 1e-5},
          {"position_embedding_type", rotary ? "rotary" : "absolute"},
          {"emb_layer_norm_before", !rotary},
          {"token_dropout", rotary}};
}

// EsmEmbeddings (token dropout: mask rows zeroed, * (1 - 0.15 * 0.8) / (1 - masked / S)),
// positions from create_position_ids_from_input_ids when absolute, layer_norm when
// emb_layer_norm_before; EsmLayer: x + output.dense(attn(attention.LayerNorm(x))) with the query
// * d^-0.5 before RotaryEmbedding (inv_freq 1 / 10000^(2i / d), cat(freqs, freqs)), then
// y + output.dense(gelu(intermediate.dense(LayerNorm(y)))); encoder.emb_layer_norm_after.
at::Tensor EsmReference(const Ref& r, bool rotary, const at::Tensor& ids, const at::Tensor& mask,
                        const std::string& p) {
  at::Tensor x = r.Emb(p + "embeddings.word_embeddings.weight", ids);
  if (rotary) {
    const at::Tensor masked = ids.eq(39);
    x = x.masked_fill(masked.unsqueeze(-1), 0.0);
    const at::Tensor observed = masked.sum(-1).to(at::kDouble) / double(kSeq);
    x = x * (1.0 - 0.15 * 0.8) / (1.0 - observed).view({-1, 1, 1});
  } else {
    const at::Tensor keep = ids.ne(1).to(at::kLong);
    x = x + r.Emb(p + "embeddings.position_embeddings.weight", at::cumsum(keep, 1) * keep + 1);
    x = r.Ln(x, p + "embeddings.layer_norm", 1e-5);
  }
  const std::string l = p + "encoder.layer.0.";
  const int64_t d = 4;
  const at::Tensor a = r.Ln(x, l + "attention.LayerNorm", 1e-5);
  auto split = [&](const at::Tensor& t) { return t.view({2, kSeq, 2, d}).transpose(1, 2); };
  at::Tensor q = split(r.Lin(a, l + "attention.self.query")) / std::sqrt(double(d));
  at::Tensor k = split(r.Lin(a, l + "attention.self.key"));
  const at::Tensor v = split(r.Lin(a, l + "attention.self.value"));
  if (rotary) {
    const at::Tensor inv =
        1.0 / at::pow(10000.0, at::arange(0, d, 2, at::kDouble) / static_cast<double>(d));
    const at::Tensor freqs = at::outer(at::arange(kSeq, at::kDouble), inv);
    const at::Tensor emb = at::cat({freqs, freqs}, -1);
    q = q * emb.cos() + RotateHalf(q) * emb.sin();
    k = k * emb.cos() + RotateHalf(k) * emb.sin();
  }
  const at::Tensor ext =
      (1.0 - mask.to(at::kDouble)).view({2, 1, 1, kSeq}) * std::numeric_limits<double>::lowest();
  const at::Tensor ctx = at::matmul(at::softmax(at::matmul(q, k.transpose(-1, -2)) + ext, -1), v)
                             .transpose(1, 2)
                             .reshape({2, kSeq, 8});
  const at::Tensor y = r.Lin(ctx, l + "attention.output.dense") + x;
  const at::Tensor f = Ref::Gelu(r.Lin(r.Ln(y, l + "LayerNorm", 1e-5), l + "intermediate.dense"));
  return r.Ln(r.Lin(f, l + "output.dense") + y, p + "encoder.emb_layer_norm_after", 1e-5);
}

TEST(EncoderStacksTest, EsmLayersAsTransformers) {
  for (const bool rotary : {true, false}) {
    auto m = BuildFull(EsmSmall("EsmModel", rotary));
    ASSERT_NE(m, nullptr);
    const WeightMap w = m->InitWeights(7, at::kDouble);
    at::Tensor ids, mask;
    PaddedInputs(40, 1, kSeq, ids, mask);
    ids[0][2] = 39;  // one mask token: the token-dropout scale is not the bare 0.88
    const auto out = m->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}});
    const Ref r{{w}};
    const at::Tensor want = EsmReference(r, rotary, ids, mask, "");
    EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(want, mask)), 1e-10) << rotary;
    EXPECT_LT(MaxAbs(out[1], at::tanh(r.Lin(want.select(1, 0), "pooler.dense"))), 1e-10);
    EXPECT_EQ(HasWeight(*m, "embeddings.position_embeddings.weight"), !rotary);
  }
}

// EsmLMHead: decoder(layer_norm(gelu(dense(x)))) + bias, the decoder tied to the word
// embeddings and without a bias of its own; EsmClassificationHead: out_proj(tanh(dense(x[:, 0]))).
TEST(EncoderStacksTest, EsmHeadsAndStateDictAsTransformers) {
  auto mlm = BuildFull(EsmSmall("EsmForMaskedLM", true));
  auto cls = BuildFull(EsmSmall("EsmForSequenceClassification", true));
  ASSERT_NE(mlm, nullptr);
  ASSERT_NE(cls, nullptr);
  at::Tensor ids, mask;
  PaddedInputs(40, 1, kSeq, ids, mask);
  const WeightMap w = mlm->InitWeights(8, at::kDouble);
  const Ref r{{w}};
  const at::Tensor h = EsmReference(r, true, ids, mask, "esm.");
  const at::Tensor t = r.Ln(Ref::Gelu(r.Lin(h, "lm_head.dense")), "lm_head.layer_norm", 1e-5);
  const at::Tensor want =
      at::matmul(t, w.at("esm.embeddings.word_embeddings.weight").t()) + w.at("lm_head.bias");
  const auto out = mlm->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}});
  EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(want, mask)), 1e-10);
  const WeightMap cw = cls->InitWeights(9, at::kDouble);
  const Ref cr{cw};
  const at::Tensor ch = EsmReference(cr, true, ids, mask, "esm.");
  const at::Tensor logits =
      cr.Lin(at::tanh(cr.Lin(ch.select(1, 0), "classifier.dense")), "classifier.out_proj");
  EXPECT_LT(MaxAbs(cls->Forward(cw, {{"input_ids", ids}, {"attention_mask", mask}})[0], logits),
            1e-10);
  std::map<std::string, StateDictEntry> sd;
  for (const StateDictEntry& e : StateDictShapes(*mlm)) sd[e.name] = e;
  ASSERT_TRUE(sd.count("lm_head.decoder.weight"));
  EXPECT_EQ(sd.at("lm_head.decoder.weight").tied_to, "esm.embeddings.word_embeddings.weight");
  EXPECT_FALSE(sd.count("lm_head.decoder.bias"));
  EXPECT_EQ(sd.at("esm.contact_head.regression.weight").shape, (std::vector<int64_t>{1, 2}));
  const std::string inv = "esm.encoder.layer.0.attention.self.rotary_embeddings.inv_freq";
  ASSERT_TRUE(sd.count(inv));
  // d = 4: 1 / 10000^([0, 2] / 4) in float32.
  EXPECT_EQ(sd.at(inv).values, (std::vector<double>{1.0, static_cast<double>(0.01f)}));
  const TensorMap tensors = StateDict(*mlm, w, 1);
  EXPECT_DOUBLE_EQ(tensors.at(inv)[1].item<double>(), 0.01f);
}

TEST(EncoderStacksTest, EsmRefusesWhatItDoesNotSupport) {
  ExpectConfigError("EsmModel", "position_embedding_type", "relative_key",
                    "position_embedding_type");
  ExpectConfigError("EsmModel", "is_folding_model", true, "is_folding_model");
  ExpectConfigError("EsmForMaskedLM", "tie_word_embeddings", false, "tie_word_embeddings");
}

// ---- ModernBERT
// ----------------------------------------------------------------------------------

nlohmann::json ModernSmall(const std::string& arch, const std::string& pooling) {
  return {{"architectures", {arch}},
          {"model_type", "modernbert"},
          {"hidden_size", 8},
          {"num_attention_heads", 2},
          {"intermediate_size", 6},
          {"num_hidden_layers", 2},
          {"vocab_size", 40},
          {"max_position_embeddings", 64},
          {"pad_token_id", 0},
          {"norm_eps", 1e-5},
          {"norm_bias", false},
          {"global_rope_theta", 160000.0},
          {"local_rope_theta", 10000.0},
          {"global_attn_every_n_layers", 2},
          {"local_attention", 2},
          {"classifier_pooling", pooling},
          {"hidden_activation", "gelu"}};
}

// nn.LayerNorm(bias=False).
at::Tensor LnNoBias(const WeightMap& w, const at::Tensor& x, const std::string& p) {
  const at::Tensor y = x - x.mean(-1, true);
  return y / at::sqrt((y * y).mean(-1, true) + 1e-5) * w.at(p + ".weight");
}

// ModernBertModel (eager): norm(tok_embeddings); per layer x + Wo(attn(attn_norm(x))) with
// Wqkv viewed [.., 3, heads, d], the rotary (theta global_rope_theta on layer 0, local on layer 1)
// and, on the local layer, keys with |i - j| > local_attention / 2 masked; then
// x + Wo(act(input) * gate) over Wi(mlp_norm(x)).chunk(2); final_norm.
at::Tensor ModernReference(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                           const std::string& p) {
  const Ref r{{w}};
  at::Tensor x =
      LnNoBias(w, r.Emb(p + "embeddings.tok_embeddings.weight", ids), p + "embeddings.norm");
  const int64_t d = 4;
  const at::Tensor pos = at::arange(kSeq, at::kDouble);
  const at::Tensor pad =
      (1.0 - mask.to(at::kDouble)).view({2, 1, 1, kSeq}) * std::numeric_limits<double>::lowest();
  const at::Tensor far = (pos.unsqueeze(1) - pos.unsqueeze(0)).abs().gt(1).to(at::kDouble) *
                         std::numeric_limits<double>::lowest();
  for (int i = 0; i < 2; ++i) {
    const std::string l = p + "layers." + std::to_string(i) + ".";
    const at::Tensor a = i == 0 ? x : LnNoBias(w, x, l + "attn_norm");
    const at::Tensor qkv = at::matmul(a, w.at(l + "attn.Wqkv.weight").t()).view({2, kSeq, 3, 2, d});
    auto part = [&](int64_t j) { return qkv.select(2, j).transpose(1, 2); };
    const double theta = i == 0 ? 160000.0 : 10000.0;
    const at::Tensor inv = 1.0 / at::pow(theta, at::arange(0, d, 2, at::kDouble) / double(d));
    const at::Tensor emb = at::cat({at::outer(pos, inv), at::outer(pos, inv)}, -1);
    const at::Tensor q = part(0) * emb.cos() + RotateHalf(part(0)) * emb.sin();
    const at::Tensor k = part(1) * emb.cos() + RotateHalf(part(1)) * emb.sin();
    at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(d)) + pad;
    if (i == 1) scores = scores + far;
    const at::Tensor ctx =
        at::matmul(at::softmax(scores, -1), part(2)).transpose(1, 2).reshape({2, kSeq, 8});
    x = x + at::matmul(ctx, w.at(l + "attn.Wo.weight").t());
    const auto ig =
        at::matmul(LnNoBias(w, x, l + "mlp_norm"), w.at(l + "mlp.Wi.weight").t()).chunk(2, -1);
    x = x + at::matmul(Ref::Gelu(ig[0]) * ig[1], w.at(l + "mlp.Wo.weight").t());
  }
  return LnNoBias(w, x, p + "final_norm");
}

// ModernBertPredictionHead: norm(act(dense(x))), dense without bias (classifier_bias false).
at::Tensor ModernHead(const WeightMap& w, const at::Tensor& x) {
  return LnNoBias(w, Ref::Gelu(at::matmul(x, w.at("head.dense.weight").t())), "head.norm");
}

TEST(EncoderStacksTest, ModernBertLayersAsTransformers) {
  auto m = BuildFull(ModernSmall("ModernBertModel", "cls"));
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(10, at::kDouble);
  at::Tensor ids, mask;
  PaddedInputs(40, 0, kSeq, ids, mask);
  const auto out = m->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(ModernReference(w, ids, mask, ""), mask)), 1e-10);
  EXPECT_FALSE(HasWeight(*m, "layers.0.attn_norm.weight"));  // nn.Identity on layer 0
  EXPECT_TRUE(HasWeight(*m, "layers.1.attn_norm.weight"));
  EXPECT_FALSE(HasWeight(*m, "final_norm.bias"));
}

// ForSequenceClassification pools (mean over the attended tokens, or token 0), then head and
// classifier; ForTokenClassification and ForMaskedLM run the head on every token (the decoder
// tied to tok_embeddings plus decoder.bias).
TEST(EncoderStacksTest, ModernBertHeadsAsTransformers) {
  at::Tensor ids, mask;
  PaddedInputs(40, 0, kSeq, ids, mask);
  const TensorMap in = {{"input_ids", ids}, {"attention_mask", mask}};
  for (const std::string pooling : {"mean", "cls"}) {
    auto m = BuildFull(ModernSmall("ModernBertForSequenceClassification", pooling));
    ASSERT_NE(m, nullptr);
    const WeightMap w = m->InitWeights(11, at::kDouble);
    const at::Tensor h = ModernReference(w, ids, mask, "model.");
    const at::Tensor mk = mask.to(at::kDouble).unsqueeze(-1);
    const at::Tensor pooled = pooling == "mean" ? (h * mk).sum(1) / mk.sum(1) : h.select(1, 0);
    const at::Tensor want = Ref{{w}}.Lin(ModernHead(w, pooled), "classifier");
    EXPECT_LT(MaxAbs(m->Forward(w, in)[0], want), 1e-10) << pooling;
  }
  auto tok = BuildFull(ModernSmall("ModernBertForTokenClassification", "mean"));
  auto mlm = BuildFull(ModernSmall("ModernBertForMaskedLM", "mean"));
  ASSERT_NE(tok, nullptr);
  ASSERT_NE(mlm, nullptr);
  const WeightMap tw = tok->InitWeights(12, at::kDouble);
  const at::Tensor tl =
      Ref{{tw}}.Lin(ModernHead(tw, ModernReference(tw, ids, mask, "model.")), "classifier");
  EXPECT_LT(MaxAbs(Kept(tok->Forward(tw, in)[0], mask), Kept(tl, mask)), 1e-10);
  const WeightMap mw = mlm->InitWeights(13, at::kDouble);
  const at::Tensor logits = at::matmul(ModernHead(mw, ModernReference(mw, ids, mask, "model.")),
                                       mw.at("model.embeddings.tok_embeddings.weight").t()) +
                            mw.at("decoder.bias");
  EXPECT_LT(MaxAbs(Kept(mlm->Forward(mw, in)[0], mask), Kept(logits, mask)), 1e-10);
  std::map<std::string, StateDictEntry> sd;
  for (const StateDictEntry& e : StateDictShapes(*mlm)) sd[e.name] = e;
  ASSERT_TRUE(sd.count("decoder.weight"));
  EXPECT_EQ(sd.at("decoder.weight").tied_to, "model.embeddings.tok_embeddings.weight");
}

TEST(EncoderStacksTest, ModernBertRefusesWhatItDoesNotSupport) {
  ExpectConfigError("ModernBertModel", "classifier_pooling", "max", "classifier_pooling");
  ExpectConfigError("ModernBertModel", "layer_types", nlohmann::json::array({"global"}),
                    "layer_types");
  ExpectConfigError("ModernBertForMaskedLM", "decoder_bias", false, "decoder_bias");
  ExpectConfigError("ModernBertForMaskedLM", "sparse_prediction", true, "sparse_prediction");
}

// ---- EuroBERT
// ------------------------------------------------------------------------------------

nlohmann::json EuroSmall(const std::string& arch, const std::string& pooling) {
  return {{"architectures", {arch}},
          {"model_type", "eurobert"},
          {"hidden_size", 8},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"intermediate_size", 12},
          {"num_hidden_layers", 1},
          {"vocab_size", 40},
          {"max_position_embeddings", 64},
          {"pad_token_id", 0},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 1000.0},
          {"hidden_act", "silu"},
          {"mlp_bias", true},
          {"tie_word_embeddings", false},
          {"classifier_pooling", pooling}};
}

at::Tensor Rms(const WeightMap& w, const at::Tensor& x, const std::string& n) {
  return x * at::rsqrt((x * x).mean(-1, true) + 1e-5) * w.at(n);
}

// EuroBertModel: embed_tokens; x + o_proj(attn(input_layernorm(x))) with one key / value head
// repeated for both query heads (repeat_kv), the default rotary at rope_theta and
// head_dim^-0.5, no causal mask; y + down_proj(silu(gate_proj(z)) * up_proj(z)) over
// z = post_attention_layernorm(y); norm.
at::Tensor EuroReference(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                         const std::string& p) {
  const Ref r{{w}};
  const at::Tensor x = r.Emb(p + "embed_tokens.weight", ids);
  const std::string l = p + "layers.0.";
  const int64_t d = 4;
  const at::Tensor a = Rms(w, x, l + "input_layernorm.weight");
  auto proj = [&](const std::string& n, int64_t heads) {
    return at::matmul(a, w.at(l + "self_attn." + n + ".weight").t())
        .view({2, kSeq, heads, d})
        .transpose(1, 2);
  };
  const at::Tensor pos = at::arange(kSeq, at::kDouble);
  const at::Tensor inv = 1.0 / at::pow(1000.0, at::arange(0, d, 2, at::kDouble) / double(d));
  const at::Tensor emb = at::cat({at::outer(pos, inv), at::outer(pos, inv)}, -1);
  auto rot = [&](const at::Tensor& t) { return t * emb.cos() + RotateHalf(t) * emb.sin(); };
  const at::Tensor q = rot(proj("q_proj", 2));
  const at::Tensor k = rot(proj("k_proj", 1)).expand({2, 2, kSeq, d});
  const at::Tensor v = proj("v_proj", 1).expand({2, 2, kSeq, d});
  const at::Tensor ext =
      (1.0 - mask.to(at::kDouble)).view({2, 1, 1, kSeq}) * std::numeric_limits<double>::lowest();
  const at::Tensor ctx =
      at::matmul(at::softmax(at::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(d)) + ext, -1),
                 v)
          .transpose(1, 2)
          .reshape({2, kSeq, 8});
  const at::Tensor y = x + at::matmul(ctx, w.at(l + "self_attn.o_proj.weight").t());
  const at::Tensor z = Rms(w, y, l + "post_attention_layernorm.weight");
  const at::Tensor g = r.Lin(z, l + "mlp.gate_proj");
  const at::Tensor f = r.Lin(g * at::sigmoid(g) * r.Lin(z, l + "mlp.up_proj"), l + "mlp.down_proj");
  return Rms(w, y + f, p + "norm.weight");
}

TEST(EncoderStacksTest, EuroBertLayersAndHeadsAsTransformers) {
  at::Tensor ids, mask;
  PaddedInputs(40, 0, kSeq, ids, mask);
  const TensorMap in = {{"input_ids", ids}, {"attention_mask", mask}};
  auto base = BuildFull(EuroSmall("EuroBertModel", "late"));
  ASSERT_NE(base, nullptr);
  const WeightMap bw = base->InitWeights(14, at::kDouble);
  EXPECT_LT(
      MaxAbs(Kept(base->Forward(bw, in)[0], mask), Kept(EuroReference(bw, ids, mask, ""), mask)),
      1e-10);
  // EuroBertForSequenceClassification: dense, GELU, classifier over token 0 (bos), the mean of
  // the attended tokens (mean), or every token with the logits averaged over them (late).
  for (const std::string pooling : {"bos", "mean", "late"}) {
    auto m = BuildFull(EuroSmall("EuroBertForSequenceClassification", pooling));
    ASSERT_NE(m, nullptr);
    const WeightMap w = m->InitWeights(15, at::kDouble);
    const Ref r{{w}};
    const at::Tensor h = EuroReference(w, ids, mask, "model.");
    const at::Tensor mk = mask.to(at::kDouble).unsqueeze(-1);
    auto head = [&](const at::Tensor& t) {
      return r.Lin(Ref::Gelu(r.Lin(t, "dense")), "classifier");
    };
    at::Tensor want;
    if (pooling == "bos") want = head(h.select(1, 0));
    if (pooling == "mean") want = head((h * mk).sum(1) / mk.sum(1));
    if (pooling == "late") want = (head(h) * mk).sum(1) / mk.sum(1);
    EXPECT_LT(MaxAbs(m->Forward(w, in)[0], want), 1e-10) << pooling;
  }
  auto mlm = BuildFull(EuroSmall("EuroBertForMaskedLM", "late"));
  ASSERT_NE(mlm, nullptr);
  const WeightMap mw = mlm->InitWeights(16, at::kDouble);
  const at::Tensor logits = Ref{{mw}}.Lin(EuroReference(mw, ids, mask, "model."), "lm_head");
  EXPECT_LT(MaxAbs(Kept(mlm->Forward(mw, in)[0], mask), Kept(logits, mask)), 1e-10);
  // Tied and bias-free: lm_head.weight is a state_dict copy of embed_tokens.
  nlohmann::json tied = EuroSmall("EuroBertForMaskedLM", "late");
  tied["tie_word_embeddings"] = true;
  tied["mlp_bias"] = false;
  auto tm = BuildFull(tied);
  ASSERT_NE(tm, nullptr);
  EXPECT_FALSE(HasWeight(*tm, "lm_head.weight"));
  EXPECT_FALSE(HasWeight(*tm, "lm_head.bias"));
  std::map<std::string, StateDictEntry> sd;
  for (const StateDictEntry& e : StateDictShapes(*tm)) sd[e.name] = e;
  ASSERT_TRUE(sd.count("lm_head.weight"));
  EXPECT_EQ(sd.at("lm_head.weight").tied_to, "model.embed_tokens.weight");
}

TEST(EncoderStacksTest, EuroBertRefusesWhatItDoesNotSupport) {
  ExpectConfigError("EuroBertModel", "classifier_pooling", "max", "classifier_pooling");
  ExpectConfigError("EuroBertModel", "rope_scaling", {{"rope_type", "yarn"}, {"factor", 2.0}},
                    "rope_scaling.rope_type");
  ExpectConfigError("EuroBertModel", "num_key_value_heads", 5, "num_key_value_heads");
}

}  // namespace
}  // namespace ts::zoo
