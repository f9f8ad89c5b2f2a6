// FNet, XLM / Flaubert, LayoutLM, DeBERTa v1 and DPR against the transformers 5 code named in
// each test (modeling_fnet.py, modeling_xlm.py, modeling_flaubert.py, modeling_layoutlm.py,
// modeling_deberta.py, modeling_dpr.py): one layer in double, computed from the formulas there;
// DPR's formula is over BertModel, so its reference is the zoo's BertModel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using testing::Build;
using testing::ExpectConfigError;
using testing::HasWeight;

using testing::BuildFull;
using testing::MaxAbs;

struct Ops {
  const WeightMap& w;
  int64_t hid;
  double eps;
  at::Tensor Ln(const at::Tensor& x, const std::string& p) const {
    return at::layer_norm(x, {hid}, w.at(p + ".weight"), w.at(p + ".bias"), eps);
  }
  at::Tensor Lin(const at::Tensor& x, const std::string& p) const {
    return at::linear(x, w.at(p + ".weight"), w.at(p + ".bias"));
  }
  at::Tensor Emb(const std::string& n, const at::Tensor& ids) const {
    return w.at(n).index_select(0, ids.reshape(-1)).view({ids.size(0), ids.size(1), -1});
  }
};

// ---- FNet ----------------------------------------------------------------------------------------

// modeling_fnet.py: FNetEmbeddings = LayerNorm(words + token types + positions), then
// projection; FNetBasicFourierTransform = torch.fft.fftn(x, dim=(1, 2)).real; FNetLayer:
// fourier.output.LayerNorm(x + fourier), then output.LayerNorm(output.dense(gelu_new(
// intermediate.dense(y))) + y). No attention mask.
TEST(TextEncodersTest, FnetMixesTokensWithTheRealFftAsTransformers) {
  const int64_t hid = 12, s = 7;  // odd sizes: the DFT is not symmetric by accident
  const nlohmann::json cfg = {{"architectures", {"FNetModel"}}, {"model_type", "fnet"},
                              {"hidden_size", hid}, {"intermediate_size", 20},
                              {"num_hidden_layers", 1}, {"vocab_size", 40},
                              {"max_position_embeddings", 16}, {"type_vocab_size", 4},
                              {"pad_token_id", 3}};
  auto m = BuildFull(cfg);
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(5, at::kDouble);
  EXPECT_TRUE(HasWeight(*m, "embeddings.projection.weight"));
  EXPECT_TRUE(HasWeight(*m, "encoder.layer.0.fourier.output.LayerNorm.weight"));
  EXPECT_FALSE(HasWeight(*m, "encoder.layer.0.attention.self.query.weight"));
  const at::Tensor ids = at::arange(4, 4 + 2 * s, at::kLong).view({2, s});
  const at::Tensor types = at::tensor({0, 0, 0, 1, 1, 2, 3}, at::kLong).repeat({2, 1});
  const std::vector<at::Tensor> out = m->Forward(w, {{"input_ids", ids}, {"token_type_ids", types}});
  const Ops o{w, hid, 1e-12};
  at::Tensor x = o.Ln(o.Emb("embeddings.word_embeddings.weight", ids) +
                          o.Emb("embeddings.token_type_embeddings.weight", types) +
                          o.Emb("embeddings.position_embeddings.weight",
                                at::arange(s, at::kLong).repeat({2, 1})),
                      "embeddings.LayerNorm");
  x = o.Lin(x, "embeddings.projection");
  const at::Tensor fourier = at::real(at::fft_fftn(x, c10::nullopt, std::vector<int64_t>{1, 2}));
  const std::string l = "encoder.layer.0.";
  at::Tensor y = o.Ln(x + fourier, l + "fourier.output.LayerNorm");
  at::Tensor f = o.Lin(at::gelu(o.Lin(y, l + "intermediate.dense"), "tanh"), l + "output.dense");
  const at::Tensor want = o.Ln(f + y, l + "output.LayerNorm");
  EXPECT_LT(MaxAbs(out[0], want), 1e-10);
  // FNetPooler: tanh(dense(token 0)).
  EXPECT_LT(MaxAbs(out[1], at::tanh(o.Lin(want.select(1, 0), "pooler.dense"))), 1e-12);
  // Batches carry no mask (FNetModel.forward takes none) and so no padding.
  auto tiny = Build("FNetForSequenceClassification");
  ASSERT_NE(tiny, nullptr);
  const Batch b = tiny->MakeBatch(1, 2);
  EXPECT_EQ(b.inputs.count("attention_mask"), 0u);
  EXPECT_TRUE(b.inputs.at("input_ids").ne(3).all().item<bool>());
  EXPECT_EQ(tiny->spec().tiny_config.value("use_tpu_fourier_optimizations", true), false);
}

// FNetForPreTraining: cls.predictions (transform, tied decoder) and cls.seq_relationship, the
// decoder's weight and bias in the state_dict as tied copies.
TEST(TextEncodersTest, FnetPreTrainingHasBertsHeadsAndTiedDecoder) {
  auto m = Build("FNetForPreTraining");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(HasWeight(*m, "fnet.pooler.dense.weight"));
  EXPECT_TRUE(HasWeight(*m, "cls.seq_relationship.weight"));
  EXPECT_TRUE(HasWeight(*m, "cls.predictions.transform.dense.weight"));
  std::map<std::string, std::string> tied;
  for (const StateDictEntry& e : StateDictShapes(*m)) tied[e.name] = e.tied_to;
  EXPECT_EQ(tied.at("cls.predictions.decoder.weight"), "fnet.embeddings.word_embeddings.weight");
  EXPECT_EQ(tied.at("cls.predictions.decoder.bias"), "cls.predictions.bias");
}

// ---- XLM / Flaubert ------------------------------------------------------------------------------

nlohmann::json XlmConfig(const std::string& arch, bool pre_norm) {
  const bool flaubert = arch.rfind("Flaubert", 0) == 0;
  nlohmann::json c = {{"architectures", {arch}}, {"model_type", flaubert ? "flaubert" : "xlm"},
                      {"emb_dim", 8}, {"n_heads", 2}, {"n_layers", 1}, {"vocab_size", 40},
                      {"max_position_embeddings", 16}, {"n_langs", 2}, {"pad_index", 2},
                      {"pad_token_id", 2}, {"layer_norm_eps", 1e-6}, {"num_labels", 3}};
  if (flaubert) c["pre_norm"] = pre_norm;
  return c;
}

// XLMModel.forward (modeling_xlm.py): tensor = layer_norm_emb(embeddings(ids) +
// position_embeddings(arange)) * mask; per layer, MultiHeadAttention (q / sqrt(d) then q k^T,
// masked keys at finfo.min, softmax, out_lin), tensor = layer_norm1(tensor + attn), tensor =
// layer_norm2(tensor + lin2(gelu(lin1(tensor)))), tensor *= mask. FlaubertModel with pre_norm:
// tensor + attn(layer_norm1(tensor)), then tensor + ffn(layer_norm2(tensor)), then * mask.
at::Tensor XlmReference(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                        bool pre_norm, const std::string& p) {
  const int64_t n = ids.size(0), s = ids.size(1), hid = 8, heads = 2, d = 4;
  const Ops o{w, hid, 1e-6};
  const at::Tensor keep = mask.unsqueeze(-1).to(at::kDouble);
  at::Tensor x = o.Ln(o.Emb(p + "embeddings.weight", ids) +
                          o.Emb(p + "position_embeddings.weight",
                                at::arange(s, at::kLong).repeat({n, 1})),
                      p + "layer_norm_emb") *
                 keep;
  auto attn = [&](const at::Tensor& h) {
    auto split = [&](const at::Tensor& t) { return t.view({n, s, heads, d}).transpose(1, 2); };
    at::Tensor q = split(o.Lin(h, p + "attentions.0.q_lin")) / std::sqrt(static_cast<double>(d));
    at::Tensor k = split(o.Lin(h, p + "attentions.0.k_lin"));
    at::Tensor v = split(o.Lin(h, p + "attentions.0.v_lin"));
    at::Tensor scores = at::matmul(q, k.transpose(2, 3))
                            .masked_fill(mask.eq(0).view({n, 1, 1, s}),
                                         std::numeric_limits<double>::lowest());
    at::Tensor ctx = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({n, s, hid});
    return o.Lin(ctx, p + "attentions.0.out_lin");
  };
  auto ffn = [&](const at::Tensor& h) {
    return o.Lin(at::gelu(o.Lin(h, p + "ffns.0.lin1")), p + "ffns.0.lin2");
  };
  if (pre_norm) {
    x = x + attn(o.Ln(x, p + "layer_norm1.0"));
    x = x + ffn(o.Ln(x, p + "layer_norm2.0"));
  } else {
    x = o.Ln(x + attn(x), p + "layer_norm1.0");
    x = o.Ln(x + ffn(x), p + "layer_norm2.0");
  }
  return x * keep;
}

TEST(TextEncodersTest, XlmAndFlaubertLayersAsTransformers) {
  const at::Tensor ids = at::tensor({5, 9, 11, 7, 30, 21, 6, 12, 2, 2}, at::kLong).view({2, 5});
  const at::Tensor mask = at::tensor({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, at::kLong).view({2, 5});
  for (const auto& [arch, pre_norm] : std::vector<std::pair<std::string, bool>>{
           {"XLMModel", false}, {"FlaubertModel", false}, {"FlaubertModel", true}}) {
    SCOPED_TRACE(arch + (pre_norm ? " pre_norm" : ""));
    auto m = BuildFull(XlmConfig(arch, pre_norm));
    ASSERT_NE(m, nullptr);
    // n_langs 2 with use_lang_emb: the table is there, and never read.
    EXPECT_EQ(testing::WeightShape(*m, "lang_embeddings.weight"), (std::vector<int64_t>{2, 8}));
    EXPECT_EQ(testing::WeightShape(*m, "ffns.0.lin1.weight"), (std::vector<int64_t>{32, 8}));
    const WeightMap w = m->InitWeights(7, at::kDouble);
    const at::Tensor got = m->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}})[0];
    EXPECT_LT(MaxAbs(got, XlmReference(w, ids, mask, pre_norm, "")), 1e-10);
    EXPECT_EQ(got[1][4].abs().max().item<double>(), 0.0);  // padded rows are zeros
  }
}

// XLMForMultipleChoice: logits_proj(sequence_summary.summary(h[:, 0])) with the summary
// projecting to num_labels and no activation (XLMSequenceSummary), viewed [B, choices];
// XLMForSequenceClassification: the summary alone; XLMWithLMHeadModel: pred_layer.proj, its
// weight the words (tied), its bias its own.
TEST(TextEncodersTest, XlmHeadsAsTransformers) {
  const at::Tensor ids = at::tensor({5, 9, 11, 7, 30, 21, 6, 12}, at::kLong).view({1, 2, 4});
  auto mc = BuildFull(XlmConfig("XLMForMultipleChoice", false));
  ASSERT_NE(mc, nullptr);
  EXPECT_EQ(testing::WeightShape(*mc, "sequence_summary.summary.weight"),
            (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(testing::WeightShape(*mc, "logits_proj.weight"), (std::vector<int64_t>{1, 3}));
  const WeightMap w = mc->InitWeights(9, at::kDouble);
  const at::Tensor flat = ids.view({2, 4}), ones = at::ones({2, 4}, at::kLong);
  const at::Tensor h = XlmReference(w, flat, ones, false, "transformer.");
  const Ops o{w, 8, 1e-6};
  const at::Tensor want =
      o.Lin(o.Lin(h.select(1, 0), "sequence_summary.summary"), "logits_proj").view({1, 2});
  EXPECT_LT(MaxAbs(mc->Forward(w, {{"input_ids", ids}})[0], want), 1e-10);

  auto seq = BuildFull(XlmConfig("XLMForSequenceClassification", false));
  ASSERT_NE(seq, nullptr);
  const WeightMap ws = seq->InitWeights(9, at::kDouble);
  const at::Tensor hs = XlmReference(ws, flat, ones, false, "transformer.");
  EXPECT_LT(MaxAbs(seq->Forward(ws, {{"input_ids", flat}})[0],
                   Ops{ws, 8, 1e-6}.Lin(hs.select(1, 0), "sequence_summary.summary")),
            1e-10);

  auto lm = Build("XLMWithLMHeadModel");
  ASSERT_NE(lm, nullptr);
  std::map<std::string, std::string> tied;
  for (const StateDictEntry& e : StateDictShapes(*lm)) tied[e.name] = e.tied_to;
  EXPECT_EQ(tied.at("pred_layer.proj.weight"), "transformer.embeddings.weight");
  EXPECT_TRUE(HasWeight(*lm, "pred_layer.proj.bias"));
}

// Options the zoo does not model are refused naming the field; the summary's only by the classes
// that read it (XLMModel ignores summary_type).
TEST(TextEncodersTest, XlmRefusesWhatItDoesNotModelNamingTheField) {
  ExpectConfigError("XLMWithLMHeadModel", "asm", true, "asm");
  ExpectConfigError("XLMModel", "sinusoidal_embeddings", true, "sinusoidal_embeddings");
  ExpectConfigError("FlaubertModel", "is_encoder", false, "is_encoder");
  ExpectConfigError("FlaubertModel", "layerdrop", 1.5, "layerdrop");
  ExpectConfigError("XLMForSequenceClassification", "summary_type", "mean", "summary_type");
  ExpectConfigError("XLMForMultipleChoice", "summary_activation", "tanh", "summary_activation");
  auto cfg = *ExampleConfig("XLMModel");
  cfg["summary_type"] = "mean";
  BuildOptions opts;
  opts.arch = "XLMModel";
  EXPECT_TRUE(BuildModel(cfg, opts).ok());
}

// ---- LayoutLM ------------------------------------------------------------------------------------

// LayoutLMEmbeddings.forward (modeling_layoutlm.py): words + positions + x(bbox[..., 0]) +
// y(bbox[..., 1]) + x(bbox[..., 2]) + y(bbox[..., 3]) + h(bbox[..., 3] - bbox[..., 1]) +
// w(bbox[..., 2] - bbox[..., 0]) + token types, LayerNorm; then BERT's layer (as
// modeling_bert.py: LN(attn + x), LN(output(gelu(intermediate)) + y)).
TEST(TextEncodersTest, LayoutLmAddsTheBoxEmbeddingsAsTransformers) {
  const int64_t hid = 8, s = 4, heads = 2, d = 4;
  const nlohmann::json cfg = {{"architectures", {"LayoutLMModel"}}, {"model_type", "layoutlm"},
                              {"hidden_size", hid}, {"intermediate_size", 16},
                              {"num_attention_heads", heads}, {"num_hidden_layers", 1},
                              {"vocab_size", 40}, {"max_position_embeddings", 16},
                              {"max_2d_position_embeddings", 20}};
  auto m = BuildFull(cfg);
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(11, at::kDouble);
  const at::Tensor ids = at::tensor({5, 9, 11, 7}, at::kLong).view({1, s});
  const at::Tensor bbox =
      at::tensor({0, 0, 0, 0, 1, 2, 5, 9, 3, 4, 10, 6, 7, 1, 19, 18}, at::kLong).view({1, s, 4});
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}, {"bbox", bbox}})[0];
  const Ops o{w, hid, 1e-12};
  auto col = [&](int64_t i) { return bbox.select(-1, i); };
  const std::string e = "embeddings.";
  at::Tensor x = o.Emb(e + "word_embeddings.weight", ids) +
                 o.Emb(e + "position_embeddings.weight", at::arange(s, at::kLong).view({1, s})) +
                 o.Emb(e + "x_position_embeddings.weight", col(0)) +
                 o.Emb(e + "y_position_embeddings.weight", col(1)) +
                 o.Emb(e + "x_position_embeddings.weight", col(2)) +
                 o.Emb(e + "y_position_embeddings.weight", col(3)) +
                 o.Emb(e + "h_position_embeddings.weight", col(3) - col(1)) +
                 o.Emb(e + "w_position_embeddings.weight", col(2) - col(0)) +
                 o.Emb(e + "token_type_embeddings.weight", at::zeros({1, s}, at::kLong));
  x = o.Ln(x, e + "LayerNorm");
  const std::string l = "encoder.layer.0.";
  auto split = [&](const at::Tensor& t) { return t.view({1, s, heads, d}).transpose(1, 2); };
  at::Tensor q = split(o.Lin(x, l + "attention.self.query"));
  at::Tensor k = split(o.Lin(x, l + "attention.self.key"));
  at::Tensor v = split(o.Lin(x, l + "attention.self.value"));
  at::Tensor a = at::matmul(at::softmax(at::matmul(q, k.transpose(-1, -2)) / 2.0, -1), v)
                     .transpose(1, 2)
                     .reshape({1, s, hid});
  at::Tensor y = o.Ln(o.Lin(a, l + "attention.output.dense") + x, l + "attention.output.LayerNorm");
  at::Tensor f = o.Lin(at::gelu(o.Lin(y, l + "intermediate.dense")), l + "output.dense");
  EXPECT_LT(MaxAbs(got, o.Ln(f + y, l + "output.LayerNorm")), 1e-10);
  // Without a bbox, transformers' zeros.
  const at::Tensor zeros = at::zeros({1, s, 4}, at::kLong);
  EXPECT_TRUE(at::equal(m->Forward(w, {{"input_ids", ids}})[0],
                        m->Forward(w, {{"input_ids", ids}, {"bbox", zeros}})[0]));
  // Batches: boxes ordered inside the tables, zeros on padding.
  auto qa = Build("LayoutLMForQuestionAnswering");
  ASSERT_NE(qa, nullptr);
  EXPECT_EQ(qa->spec().arch, "LayoutLMForQuestionAnswering");
  const Batch b = qa->MakeBatch(2, 3);
  const at::Tensor box = b.inputs.at("bbox");
  EXPECT_TRUE(box.select(-1, 0).le(box.select(-1, 2)).all().item<bool>());
  EXPECT_TRUE(box.select(-1, 1).le(box.select(-1, 3)).all().item<bool>());
  EXPECT_TRUE(box.lt(1024).all().item<bool>());
  const at::Tensor pads = b.inputs.at("attention_mask").eq(0);
  EXPECT_TRUE(box.sum(-1).masked_select(pads).eq(0).all().item<bool>());
  EXPECT_GT(box.sum().item<int64_t>(), 0);
}

// ---- DeBERTa (v1) ---------------------------------------------------------------------------------

// One DebertaModel layer in double, as modeling_deberta.py (transformers 5) computes it:
// LayerNorm(words) * mask (position_biased_input false, no token types); DisentangledSelfAttention:
// transpose_for_scores(in_proj(x)).chunk(3, -1) (head h's rows: its q, k, v), q + q_bias,
// v + v_bias, q / sqrt(d * 3); span = min(S, max_relative_positions), rel = rel_embeddings[max_rel -
// span : max_rel + span]; c2p[i, j] = q_i . pos_proj(rel)[clamp(i - j + span, 0, 2 span - 1)],
// p2c[i, j] = k_j . (pos_q_proj(rel) / sqrt(d * 3))[the same index]; keys masked; softmax; then
// BERT's output / intermediate / output with their LayerNorms.
TEST(TextEncodersTest, DebertaV1DisentangledAttentionAsTransformers) {
  const int64_t hid = 8, heads = 2, d = 4, s = 7, max_rel = 4;  // S > max_rel: the clamp bites
  const nlohmann::json cfg = {{"architectures", {"DebertaModel"}}, {"model_type", "deberta"},
                              {"hidden_size", hid}, {"intermediate_size", 16},
                              {"num_attention_heads", heads}, {"num_hidden_layers", 1},
                              {"vocab_size", 40}, {"max_position_embeddings", 16},
                              {"relative_attention", true}, {"pos_att_type", {"c2p", "p2c"}},
                              {"max_relative_positions", max_rel}, {"position_biased_input", false},
                              {"type_vocab_size", 0}, {"layer_norm_eps", 1e-7}};
  auto m = BuildFull(cfg);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(testing::WeightShape(*m, "encoder.layer.0.attention.self.in_proj.weight"),
            (std::vector<int64_t>{3 * hid, hid}));
  EXPECT_FALSE(HasWeight(*m, "encoder.layer.0.attention.self.pos_proj.bias"));
  EXPECT_TRUE(HasWeight(*m, "encoder.layer.0.attention.self.pos_q_proj.bias"));
  EXPECT_EQ(testing::WeightShape(*m, "encoder.rel_embeddings.weight"),
            (std::vector<int64_t>{2 * max_rel, hid}));
  const WeightMap w = m->InitWeights(13, at::kDouble);
  const at::Tensor ids = at::tensor({5, 9, 11, 7, 30, 21, 0}, at::kLong).view({1, s});
  const at::Tensor mask = at::tensor({1, 1, 1, 1, 1, 1, 0}, at::kLong).view({1, s});
  const at::Tensor got = m->Forward(w, {{"input_ids", ids}, {"attention_mask", mask}})[0];
  const Ops o{w, hid, 1e-7};
  const at::Tensor x =
      o.Ln(o.Emb("embeddings.word_embeddings.weight", ids), "embeddings.LayerNorm") *
      mask.unsqueeze(-1).to(at::kDouble);
  const std::string a = "encoder.layer.0.attention.self.";
  const auto qkv = at::linear(x, w.at(a + "in_proj.weight"))
                       .view({1, s, heads, 3 * d})
                       .permute({0, 2, 1, 3})
                       .chunk(3, -1);
  const double scale = std::sqrt(static_cast<double>(d) * 3.0);
  const at::Tensor q = (qkv[0] + w.at(a + "q_bias").view({1, heads, 1, d})) / scale;
  const at::Tensor k = qkv[1];
  const at::Tensor v = qkv[2] + w.at(a + "v_bias").view({1, heads, 1, d});
  const int64_t span = std::min(s, max_rel);
  const at::Tensor rel =
      w.at("encoder.rel_embeddings.weight").narrow(0, max_rel - span, 2 * span);
  const at::Tensor pos_k = at::linear(rel, w.at(a + "pos_proj.weight")).view({2 * span, heads, d});
  const at::Tensor pos_q =
      o.Lin(rel, a + "pos_q_proj").view({2 * span, heads, d}) / scale;
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t j = 0; j < s; ++j) {
        const int64_t r = std::clamp<int64_t>(i - j + span, 0, 2 * span - 1);
        scores[0][h][i][j] += at::dot(q[0][h][i], pos_k[r][h]) + at::dot(k[0][h][j], pos_q[r][h]);
      }
    }
  }
  scores = scores.masked_fill(mask.eq(0).view({1, 1, 1, s}), std::numeric_limits<double>::lowest());
  const at::Tensor ctx =
      at::matmul(at::softmax(scores, -1), v).permute({0, 2, 1, 3}).reshape({1, s, hid});
  const std::string l = "encoder.layer.0.";
  const at::Tensor y =
      o.Ln(o.Lin(ctx, l + "attention.output.dense") + x, l + "attention.output.LayerNorm");
  const at::Tensor f = o.Lin(at::gelu(o.Lin(y, l + "intermediate.dense")), l + "output.dense");
  const at::Tensor want = o.Ln(f + y, l + "output.LayerNorm");
  EXPECT_LT(MaxAbs(got.narrow(1, 0, 6), want.narrow(1, 0, 6)), 1e-10);  // the attended rows
}

// legacy false (the lm_predictions.lm_head head) refuses the masked-LM class only; talking_head
// refuses every class.
TEST(TextEncodersTest, DebertaV1RefusesWhatItDoesNotModelNamingTheField) {
  ExpectConfigError("DebertaForMaskedLM", "legacy", false, "legacy");
  ExpectConfigError("DebertaModel", "talking_head", true, "talking_head");
  ExpectConfigError("DebertaModel", "pos_att_type", "c2p|p2x", "unknown 'p2x'");
  // The string form is lower-cased and each part stripped (DebertaConfig).
  auto spaced = *ExampleConfig("DebertaModel");
  spaced["pos_att_type"] = "C2P | p2c";
  auto m = Build("DebertaModel", spaced);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(HasWeight(*m, "encoder.layer.0.attention.self.pos_proj.weight"));
  EXPECT_TRUE(HasWeight(*m, "encoder.layer.0.attention.self.pos_q_proj.weight"));
  auto cfg = *ExampleConfig("DebertaForSequenceClassification");
  cfg["legacy"] = false;
  BuildOptions opts;
  opts.arch = "DebertaForSequenceClassification";
  EXPECT_TRUE(BuildModel(cfg, opts).ok());
}

// ---- DPR -------------------------------------------------------------------------------------------

// modeling_dpr.py, DPREncoder.forward: sequence_output = self.bert_model(...)[0] (a BertModel
// built with add_pooling_layer=False); pooled_output = sequence_output[:, 0, :]; when
// projection_dim > 0, pooled_output = self.encode_proj(pooled_output). DPRQuestionEncoder returns
// pooler_output alone. The reference is that formula over the zoo's BertModel (whose layers the
// BERT formula tests check against modeling_bert.py) on the same weights.
TEST(TextEncodersTest, DprQuestionEncoderIsBertsTokenZeroAsTransformers) {
  const std::string base = "question_encoder.bert_model.", proj_name = "question_encoder.encode_proj";
  for (int64_t proj : {0, 6}) {
    SCOPED_TRACE(proj);
    nlohmann::json cfg = {{"model_type", "dpr"}, {"hidden_size", 8}, {"intermediate_size", 16},
                          {"num_attention_heads", 2}, {"num_hidden_layers", 2},
                          {"vocab_size", 40}, {"max_position_embeddings", 16},
                          {"projection_dim", proj}};
    nlohmann::json bert_cfg = cfg;
    bert_cfg.erase("projection_dim");
    bert_cfg["model_type"] = "bert";
    cfg["architectures"] = {"DPRQuestionEncoder"};
    auto m = BuildFull(cfg);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->spec().task, "feature-extraction");
    EXPECT_EQ(m->OutputNames(), std::vector<std::string>{"pooler_output"});
    // BertModel's keys under question_encoder.bert_model., no pooler, encode_proj iff projected.
    size_t under_base = 0;
    for (const auto& [n, s] : m->WeightShapes()) {
      EXPECT_EQ(n.find("pooler"), std::string::npos) << n;
      if (n.rfind(base, 0) == 0) {
        ++under_base;
      } else {
        EXPECT_EQ(n.rfind(proj_name + ".", 0), 0u) << n;
      }
    }
    EXPECT_EQ(under_base, 5u + 16u * 2);  // the embeddings' 5, each layer's 16
    EXPECT_EQ(m->WeightShapes().size(), under_base + (proj > 0 ? 2 : 0));
    if (proj > 0) {
      EXPECT_EQ(testing::WeightShape(*m, proj_name + ".weight"), (std::vector<int64_t>{proj, 8}));
    }
    auto bert = testing::BuildSibling(*m, "BertModel", bert_cfg);
    ASSERT_NE(bert, nullptr);
    const WeightMap w = m->InitWeights(5, at::kDouble);
    // BertModel's pooler keeps its own weights: last_hidden_state does not read them.
    const WeightMap wb = testing::Unprefixed(w, base, bert->InitWeights(1, at::kDouble));
    const Batch b = m->MakeBatch(4, 3);
    EXPECT_GT(b.inputs.at("attention_mask").eq(0).sum().item<int64_t>(), 0) << "no padding";
    const at::Tensor got = m->Forward(w, b.inputs)[0];
    at::Tensor want = bert->Forward(wb, b.inputs)[0].select(1, 0);
    if (proj > 0) want = at::linear(want, w.at(proj_name + ".weight"), w.at(proj_name + ".bias"));
    EXPECT_EQ(got.sizes().vec(), (std::vector<int64_t>{3, proj > 0 ? proj : 8}));
    EXPECT_LT(MaxAbs(got, want), 1e-12);
  }
  ExpectConfigError("DPRQuestionEncoder", "projection_dim", -1, "projection_dim");
  // The tiny config keeps a projection, at most the tiny width.
  auto wide = *ExampleConfig("DPRQuestionEncoder");
  wide["projection_dim"] = 768;
  auto tiny = TinyConfig(wide, "DPRQuestionEncoder");
  ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
  EXPECT_EQ((*tiny)["projection_dim"], (*tiny)["hidden_size"]);
}

// modeling_big_bird.py BigBirdForQuestionAnswering: BigBirdModel without its pooler
// (add_pooling_layer=False), qa_classifier = BigBirdForQuestionAnsweringHead (intermediate dense +
// hidden_act, output dense, LayerNorm over it plus the encoder output, qa_outputs), and the
// question tokens (prepare_question_mask: positions below argmax(input_ids == sep) + 1, token 0
// kept) pushed out of both logits by 1e6.
TEST(TextEncodersTest, BigBirdQuestionAnsweringMasksTheQuestion) {
  auto m = Build("BigBirdForQuestionAnswering");
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(HasWeight(*m, "bert.pooler.weight"));
  EXPECT_TRUE(HasWeight(*m, "qa_classifier.intermediate.dense.weight"));
  EXPECT_TRUE(HasWeight(*m, "qa_classifier.output.LayerNorm.bias"));
  for (const StateDictEntry& e : StateDictShapes(*m)) {
    EXPECT_EQ(e.name.find("pooler"), std::string::npos) << e.name;
  }
  const nlohmann::json& cfg = m->spec().tiny_config;
  const int64_t sep = cfg.at("sep_token_id").get<int64_t>();
  auto base = testing::BuildSibling(*m, "BigBirdModel");
  ASSERT_NE(base, nullptr);
  const WeightMap w = m->InitWeights(5, at::kDouble);
  const WeightMap wb = testing::Unprefixed(w, "bert.", base->InitWeights(1, at::kDouble));
  const Batch b = m->MakeBatch(4, 2);
  const at::Tensor& ids = b.inputs.at("input_ids");
  EXPECT_TRUE(ids.select(1, 3).eq(sep).all().item<bool>());
  EXPECT_EQ(ids.eq(sep).sum().item<int64_t>(), 2);  // one sep a row
  EXPECT_TRUE(b.labels.at("start_positions").ge(4).all().item<bool>());
  auto reference = [&](const TensorMap& inputs) {
    const at::Tensor h = base->Forward(wb, inputs)[0];
    const std::string q = "qa_classifier.";
    at::Tensor t = at::gelu(at::linear(h, w.at(q + "intermediate.dense.weight"),
                                       w.at(q + "intermediate.dense.bias")),
                            "tanh");  // gelu_new
    t = at::linear(t, w.at(q + "output.dense.weight"), w.at(q + "output.dense.bias"));
    t = at::layer_norm(t + h, {h.size(-1)}, w.at(q + "output.LayerNorm.weight"),
                       w.at(q + "output.LayerNorm.bias"), 1e-12);
    at::Tensor logits = at::linear(t, w.at(q + "qa_outputs.weight"), w.at(q + "qa_outputs.bias"));
    const at::Tensor& in = inputs.at("input_ids");
    at::Tensor len = in.eq(sep).to(at::kInt).argmax(-1, true) + 1;
    at::Tensor pos = at::arange(in.size(1), at::kLong).unsqueeze(0);
    at::Tensor mask = (pos < len).to(at::kDouble);
    mask.select(1, 0).fill_(0.0);
    logits = logits - mask.unsqueeze(-1) * 1e6;
    return logits;
  };
  const std::vector<at::Tensor> got = m->Forward(w, b.inputs);
  const at::Tensor want = reference(b.inputs);
  EXPECT_LT(MaxAbs(got[0], want.select(-1, 0)), 1e-6);
  EXPECT_LT(MaxAbs(got[1], want.select(-1, 1)), 1e-6);
  EXPECT_LT(got[0].select(1, 2).max().item<double>(), -1e5);  // a question token
  EXPECT_GT(got[0].select(1, 0).min().item<double>(), -1e3);  // token 0 is kept
  // A row without sep: argmax finds nothing, the question is token 0 alone, nothing is masked.
  TensorMap no_sep = b.inputs;
  no_sep["input_ids"] = ids.masked_fill(ids.eq(sep), sep + 1);
  const std::vector<at::Tensor> plain = m->Forward(w, no_sep);
  EXPECT_GT(plain[0].min().item<double>(), -1e3);
  EXPECT_LT(MaxAbs(plain[1], reference(no_sep).select(-1, 1)), 1e-6);
}

TEST(TextEncodersTest, NewClassesRunTheFamilyBasics) {
  for (const char* arch : {"FNetForMaskedLM", "FNetForNextSentencePrediction",
                           "FNetForMultipleChoice", "XLMForTokenClassification",
                           "XLMForQuestionAnsweringSimple", "FlaubertWithLMHeadModel",
                           "LayoutLMForTokenClassification", "DebertaForMaskedLM",
                           "DebertaForQuestionAnswering", "DPRQuestionEncoder"}) {
    SCOPED_TRACE(arch);
    auto m = Build(arch);
    ASSERT_NE(m, nullptr);
    const Batch b = m->MakeBatch(3, 2);
    const std::vector<at::Tensor> out = m->Forward(m->InitWeights(3), b.inputs);
    testing::CheckFamilyBasics(m, out[0].sizes().vec());
  }
}

}  // namespace
}  // namespace ts::zoo
