// I-BERT, X-MOD and RoCBert against the transformers code named in each test
// (modeling_ibert.py with quant_modules.py, modeling_xmod.py, modeling_roc_bert.py): one layer in
// double, the expected values computed here from those files' formulas, not from the zoo's trunk.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using testing::Build;
using testing::BuildFull;
using testing::ExpectConfigError;
using testing::HalfTypes;
using testing::HasWeight;
using testing::Kept;
using testing::MaxAbs;
using testing::PaddedInputs;

constexpr int64_t kHid = 8, kHeads = 2, kInter = 12, kVocab = 40, kSeq = 6;

// The written-out modules at one LayerNorm eps, and BertSelfAttention.
struct Ref : testing::WrittenOutRef {
  double eps;
  // IntLayerNorm (float mode) and nn.LayerNorm: (x - mean) / sqrt(eps + var) * w + b.
  at::Tensor Ln(const at::Tensor& x, const std::string& p) const {
    return WrittenOutRef::Ln(x, p, eps);
  }
  // BertSelfAttention / RobertaSelfAttention (eager): softmax(q k^T / sqrt(d) + extended mask)
  // v, the extended mask finfo.min on padded keys; then output.dense.
  at::Tensor Attention(const at::Tensor& x, const at::Tensor& mask, const std::string& l) const {
    const int64_t n = x.size(0), s = x.size(1), d = kHid / kHeads;
    auto split = [&](const at::Tensor& t) { return t.view({n, s, kHeads, d}).transpose(1, 2); };
    const at::Tensor q = split(Lin(x, l + "attention.self.query"));
    const at::Tensor k = split(Lin(x, l + "attention.self.key"));
    const at::Tensor v = split(Lin(x, l + "attention.self.value"));
    const at::Tensor ext =
        (1.0 - mask.to(at::kDouble)).view({n, 1, 1, s}) * std::numeric_limits<double>::lowest();
    const at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(d)) + ext;
    const at::Tensor ctx =
        at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({n, s, kHid});
    return Lin(ctx, l + "attention.output.dense");
  }
  // BertIntermediate + BertOutput after the attention block's output `a`:
  // output.LayerNorm(output.dense(gelu(intermediate.dense(a))) + a).
  at::Tensor Ffn(const at::Tensor& a, const std::string& l) const {
    const at::Tensor f = Lin(Gelu(Lin(a, l + "intermediate.dense")), l + "output.dense");
    return Ln(f + a, l + "output.LayerNorm");
  }
  // RobertaEmbeddings (pad 1): LayerNorm(word + token type + position at RoBERTa's ids).
  at::Tensor RobertaEmbeddings(const at::Tensor& ids, const at::Tensor& types) const;
};

// RoBERTa's create_position_ids_from_input_ids: cumsum(ids != pad) * (ids != pad) + pad.
at::Tensor RobertaPositions(const at::Tensor& ids, int64_t pad) {
  const at::Tensor keep = ids.ne(pad).to(at::kLong);
  return at::cumsum(keep, 1) * keep + pad;
}

at::Tensor Ref::RobertaEmbeddings(const at::Tensor& ids, const at::Tensor& types) const {
  return Ln(Emb("embeddings.word_embeddings.weight", ids) +
                Emb("embeddings.token_type_embeddings.weight", types) +
                Emb("embeddings.position_embeddings.weight", RobertaPositions(ids, 1)),
            "embeddings.LayerNorm");
}

nlohmann::json Small(const std::string& arch, const std::string& type, int64_t pad) {
  return {{"architectures", {arch}},     {"model_type", type},
          {"hidden_size", kHid},         {"num_attention_heads", kHeads},
          {"intermediate_size", kInter}, {"num_hidden_layers", 1},
          {"vocab_size", kVocab},        {"max_position_embeddings", 20},
          {"type_vocab_size", 2},        {"pad_token_id", pad},
          {"layer_norm_eps", 1e-5},      {"hidden_act", "gelu"}};
}

// A class built at its own sizes from `cfg` with weights of `seed` in double, run on the two
// padded rows (pad id `pad`) with token types; a build error fails the test and leaves m null.
struct Ran {
  std::unique_ptr<Model> m;
  WeightMap w;
  at::Tensor ids, mask, types;
  std::vector<at::Tensor> out;
};

Ran RunSmall(const nlohmann::json& cfg, uint64_t seed, int64_t pad) {
  Ran r;
  r.m = BuildFull(cfg);
  if (!r.m) return r;
  r.w = r.m->InitWeights(seed, at::kDouble);
  PaddedInputs(kVocab, pad, kSeq, r.ids, r.mask);
  r.types = HalfTypes(kSeq);
  r.out = r.m->Forward(
      r.w, {{"input_ids", r.ids}, {"attention_mask", r.mask}, {"token_type_ids", r.types}});
  return r;
}

// ---- I-BERT
// --------------------------------------------------------------------------------------

// IBertModel with quant_mode false: IBertEmbeddings = IntLayerNorm((word + token type) +
// position at RoBERTa's ids); IBertLayer: attention.output.LayerNorm(dense(ctx) + x) (QuantAct
// ln_input_act adds its identity), then output.LayerNorm(dense(IntGELU(intermediate.dense(a))) +
// a); IBertPooler tanh(dense(token 0)).
TEST(EncoderVariantsTest, IbertFloatModeIsRobertasComputation) {
  const auto [m, w, ids, mask, types, out] = RunSmall(Small("IBertModel", "ibert", 1), 3, 1);
  ASSERT_NE(m, nullptr);
  const Ref r{{w}, 1e-5};
  at::Tensor x = r.RobertaEmbeddings(ids, types);
  const std::string l = "encoder.layer.0.";
  const at::Tensor a = r.Ln(r.Attention(x, mask, l) + x, l + "attention.output.LayerNorm");
  const at::Tensor want = r.Ffn(a, l);
  EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(want, mask)), 1e-10);
  EXPECT_LT(MaxAbs(out[1], at::tanh(r.Lin(want.select(1, 0), "pooler.dense"))), 1e-10);
}

// quant_modules.py's buffers: QuantAct x_min / x_max / act_scaling_factor, QuantLinear
// weight_integer / fc_scaling_factor / bias_integer, QuantEmbedding weight_scaling_factor /
// weight_integer, IntLayerNorm shift and its `activation`, IntSoftmax's `act`.
TEST(EncoderVariantsTest, IbertStateDictHoldsTheQuantBuffers) {
  auto m = Build("IBertForSequenceClassification");
  ASSERT_NE(m, nullptr);
  std::map<std::string, StateDictEntry> sd;
  for (const StateDictEntry& e : StateDictShapes(*m)) sd[e.name] = e;
  const std::string l = "ibert.encoder.layer.0.";
  ASSERT_TRUE(sd.count(l + "attention.self.softmax.act.x_min"));
  EXPECT_EQ(*sd.at(l + "attention.self.softmax.act.x_min").fill, -1e-5);
  EXPECT_EQ(*sd.at(l + "attention.self.softmax.act.x_max").fill, 1e-5);
  const std::vector<int64_t> wq = sd.at(l + "attention.self.query.weight").shape;
  EXPECT_EQ(sd.at(l + "attention.self.query.weight_integer").shape, wq);
  EXPECT_EQ(sd.at(l + "intermediate.dense.fc_scaling_factor").shape,
            std::vector<int64_t>{sd.at(l + "intermediate.dense.weight").shape[0]});
  EXPECT_TRUE(sd.count(l + "output.LayerNorm.shift"));
  EXPECT_TRUE(sd.count(l + "output.LayerNorm.activation.act_scaling_factor"));
  EXPECT_TRUE(sd.count(l + "pre_intermediate_act.x_max"));
  EXPECT_TRUE(sd.count("ibert.embeddings.word_embeddings.weight_integer"));
  EXPECT_TRUE(sd.count("ibert.embeddings.embeddings_act2.x_min"));
  EXPECT_TRUE(sd.count("classifier.out_proj.weight"));
  EXPECT_FALSE(sd.count("classifier.out_proj.weight_integer"));  // plain nn.Linear heads
  ExpectConfigError("IBertModel", "quant_mode", true, "quant_mode");
  ExpectConfigError("IBertModel", "hidden_act", "relu", "hidden_act");
  ExpectConfigError("IBertModel", "force_dequant", "all", "force_dequant");
}

// ---- X-MOD
// ---------------------------------------------------------------------------------------

nlohmann::json XmodSmall(const std::string& arch) {
  nlohmann::json c = Small(arch, "xmod", 1);
  c["languages"] = {"en_XX", "de_DE", "fr_XX"};
  c["default_language"] = "de_DE";
  c["adapter_reduction_factor"] = 2;
  return c;
}

// XmodLayer (pre_norm false): a = attention.output.LayerNorm(dense(ctx) + x); z =
// output.dense(gelu(intermediate.dense(a))) + a; lang_adapter: h = output.LayerNorm(z)
// (adapter_reuse_layer_norm), residual h (ln_before_adapter), adapter_modules[default].dense2(
// gelu(dense1(h))) + h; then output.LayerNorm again. With adapter_layer_norm:
// adapter_layer_norm(z) instead; with ln_before_adapter false the residual is z.
TEST(EncoderVariantsTest, XmodRunsTheDefaultLanguagesAdapterAsTransformers) {
  for (const bool own_norm : {false, true}) {
    nlohmann::json cfg = XmodSmall("XmodModel");
    cfg["adapter_layer_norm"] = own_norm;
    cfg["ln_before_adapter"] = !own_norm;
    const auto [m, w, ids, mask, types, out] = RunSmall(cfg, 4, 1);
    ASSERT_NE(m, nullptr);
    const Ref r{{w}, 1e-5};
    const at::Tensor x = r.RobertaEmbeddings(ids, types);
    const std::string l = "encoder.layer.0.";
    const at::Tensor a = r.Ln(r.Attention(x, mask, l) + x, l + "attention.output.LayerNorm");
    const at::Tensor z =
        r.Lin(Ref::Gelu(r.Lin(a, l + "intermediate.dense")), l + "output.dense") + a;
    const at::Tensor h =
        own_norm ? r.Ln(z, l + "output.adapter_layer_norm") : r.Ln(z, l + "output.LayerNorm");
    const std::string ad = l + "output.adapter_modules.de_DE.";
    const at::Tensor adapted =
        r.Lin(Ref::Gelu(r.Lin(h, ad + "dense1")), ad + "dense2") + (own_norm ? z : h);
    const at::Tensor want = r.Ln(adapted, l + "output.LayerNorm");
    EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(want, mask)), 1e-10) << own_norm;
    // The other languages' adapters: state_dict entries, not weights.
    EXPECT_FALSE(HasWeight(*m, l + "output.adapter_modules.en_XX.dense1.weight"));
    std::map<std::string, std::vector<int64_t>> sd;
    for (const StateDictEntry& e : StateDictShapes(*m)) sd[e.name] = e.shape;
    EXPECT_EQ(sd.at(l + "output.adapter_modules.fr_XX.dense2.weight"),
              (std::vector<int64_t>{kHid, kHid / 2}));
    EXPECT_TRUE(sd.count(l + "output.adapter_modules.en_XX.dense1.bias"));
  }
}

// pre_norm: x + attn(attention.output.LayerNorm(x)); z = a + ffn(output.LayerNorm(a)); the
// adapter reuses output.LayerNorm; encoder.LayerNorm at the end.
TEST(EncoderVariantsTest, XmodPreNormAsTransformers) {
  nlohmann::json cfg = XmodSmall("XmodModel");
  cfg["pre_norm"] = true;
  const auto [m, w, ids, mask, types, out] = RunSmall(cfg, 5, 1);
  ASSERT_NE(m, nullptr);
  const Ref r{{w}, 1e-5};
  const at::Tensor x = r.RobertaEmbeddings(ids, types);
  const std::string l = "encoder.layer.0.";
  const at::Tensor a = r.Attention(r.Ln(x, l + "attention.output.LayerNorm"), mask, l) + x;
  const at::Tensor z =
      r.Lin(Ref::Gelu(r.Lin(r.Ln(a, l + "output.LayerNorm"), l + "intermediate.dense")),
            l + "output.dense") +
      a;
  const at::Tensor h = r.Ln(z, l + "output.LayerNorm");
  const std::string ad = l + "output.adapter_modules.de_DE.";
  const at::Tensor want =
      r.Ln(r.Lin(Ref::Gelu(r.Lin(h, ad + "dense1")), ad + "dense2") + h, "encoder.LayerNorm");
  EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(want, mask)), 1e-10);
  ExpectConfigError("XmodModel", "default_language", nullptr, "default_language");
  ExpectConfigError("XmodModel", "default_language", "xx_YY", "default_language");
  ExpectConfigError("XmodModel", "languages", "en_XX", "languages");
}

// ---- RoCBert
// -------------------------------------------------------------------------------------

// RoCBertEmbeddings.forward with concat_input: map_inputs_layer(cat(word, shape_embed,
// pronunciation_embed)) + token type + position (arange), LayerNorm; without it:
// (LayerNorm(word + token type + position) + shape + pronunciation) / 3. Then BERT's layer.
TEST(EncoderVariantsTest, RocBertJoinsShapeAndPronunciationAsTransformers) {
  for (const bool concat : {true, false}) {
    nlohmann::json cfg = Small("RoCBertModel", "roc_bert", 0);
    cfg["concat_input"] = concat;
    cfg["shape_vocab_size"] = 30;
    cfg["shape_embed_dim"] = 6;
    cfg["pronunciation_vocab_size"] = 20;
    cfg["pronunciation_embed_dim"] = concat ? 4 : kHid;
    cfg["shape_embed_dim"] = concat ? 6 : kHid;
    auto m = BuildFull(cfg);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(HasWeight(*m, "embeddings.map_inputs_layer.weight"), concat);
    const WeightMap w = m->InitWeights(6, at::kDouble);
    at::Tensor ids, mask;
    PaddedInputs(kVocab, 0, kSeq, ids, mask);
    const at::Tensor types = HalfTypes(kSeq);
    const at::Tensor shape_ids = (ids * 3 + 1).remainder(30).masked_fill(mask.eq(0), 0);
    const at::Tensor pron_ids = (ids * 5 + 2).remainder(20).masked_fill(mask.eq(0), 0);
    const auto out = m->Forward(w, {{"input_ids", ids},
                                    {"attention_mask", mask},
                                    {"token_type_ids", types},
                                    {"input_shape_ids", shape_ids},
                                    {"input_pronunciation_ids", pron_ids}});
    const Ref r{{w}, 1e-5};
    const at::Tensor pos = at::arange(kSeq, at::kLong).repeat({2, 1});
    const at::Tensor word = r.Emb("embeddings.word_embeddings.weight", ids);
    const at::Tensor shape = r.Emb("embeddings.shape_embed.weight", shape_ids);
    const at::Tensor pron = r.Emb("embeddings.pronunciation_embed.weight", pron_ids);
    const at::Tensor rest = r.Emb("embeddings.token_type_embeddings.weight", types) +
                            r.Emb("embeddings.position_embeddings.weight", pos);
    at::Tensor x;
    if (concat) {
      x = r.Ln(r.Lin(at::cat({word, shape, pron}, -1), "embeddings.map_inputs_layer") + rest,
               "embeddings.LayerNorm");
    } else {
      x = (r.Ln(word + rest, "embeddings.LayerNorm") + shape + pron) / 3.0;
    }
    const std::string l = "encoder.layer.0.";
    const at::Tensor a = r.Ln(r.Attention(x, mask, l) + x, l + "attention.output.LayerNorm");
    const at::Tensor want = r.Ffn(a, l);
    EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(want, mask)), 1e-10) << concat;
  }
  // The batches carry both id kinds, past the pad row where the mask is on.
  auto tiny = Build("RoCBertForTokenClassification");
  ASSERT_NE(tiny, nullptr);
  const Batch b = tiny->MakeBatch(1, 2);
  ASSERT_TRUE(b.inputs.count("input_shape_ids"));
  ASSERT_TRUE(b.inputs.count("input_pronunciation_ids"));
  const at::Tensor on = b.inputs.at("attention_mask").eq(1);
  EXPECT_TRUE(b.inputs.at("input_shape_ids").masked_select(on).ne(0).all().item<bool>());
  ExpectConfigError("RoCBertModel", "shape_vocab_size", 0, "shape_vocab_size");
}

// ---- SqueezeBERT
// ---------------------------------------------------------------------------------

// SqueezeBertModule over [N, C, W]: q / k / v = Conv1d(groups)(x); softmax(q k / sqrt(d) + mask)
// v; post_attention = SqueezeBertLayerNorm(conv1d(ctx) + x) (LayerNorm over C); intermediate =
// gelu(conv1d(.)); output = layernorm(conv1d(.) + post_attention). at::conv1d here, not matmuls.
TEST(EncoderVariantsTest, SqueezeBertGroupedConvolutionsAsTransformers) {
  nlohmann::json cfg = Small("SqueezeBertModel", "squeezebert", 0);
  cfg["embedding_size"] = kHid;
  cfg["q_groups"] = 2;
  cfg["k_groups"] = 4;
  cfg["v_groups"] = 2;
  cfg["post_attention_groups"] = 1;
  cfg["intermediate_groups"] = 4;
  cfg["output_groups"] = 2;
  const auto [m, w, ids, mask, types, out] = RunSmall(cfg, 7, 0);
  ASSERT_NE(m, nullptr);
  const Ref r{{w}, 1e-5};
  const at::Tensor x = r.Ln(r.Emb("embeddings.word_embeddings.weight", ids) +
                                r.Emb("embeddings.position_embeddings.weight",
                                      at::arange(kSeq, at::kLong).repeat({2, 1})) +
                                r.Emb("embeddings.token_type_embeddings.weight", types),
                            "embeddings.LayerNorm")
                           .permute({0, 2, 1});  // [N, C, W]
  const std::string l = "encoder.layers.0.";
  auto conv = [&](const at::Tensor& t, const std::string& p, int64_t g) {
    const std::vector<int64_t> one = {1}, zero = {0};
    return at::conv1d(t, w.at(p + ".weight"), w.at(p + ".bias"), at::IntArrayRef(one),
                      at::IntArrayRef(zero), at::IntArrayRef(one), g);
  };
  auto ln_c = [&](const at::Tensor& t, const std::string& p) {  // SqueezeBertLayerNorm
    return r.Ln(t.permute({0, 2, 1}), p).permute({0, 2, 1});
  };
  const int64_t n = 2, d = kHid / kHeads;
  const at::Tensor q =
      conv(x, l + "attention.query", 2).view({n, kHeads, d, kSeq}).permute({0, 1, 3, 2});
  const at::Tensor k = conv(x, l + "attention.key", 4).view({n, kHeads, d, kSeq});
  const at::Tensor v =
      conv(x, l + "attention.value", 2).view({n, kHeads, d, kSeq}).permute({0, 1, 3, 2});
  const at::Tensor ext =
      (1.0 - mask.to(at::kDouble)).view({n, 1, 1, kSeq}) * std::numeric_limits<double>::lowest();
  const at::Tensor probs = at::softmax(at::matmul(q, k) / std::sqrt(double(d)) + ext, -1);
  const at::Tensor ctx = at::matmul(probs, v).permute({0, 1, 3, 2}).reshape({n, kHid, kSeq});
  const at::Tensor post =
      ln_c(conv(ctx, l + "post_attention.conv1d", 1) + x, l + "post_attention.layernorm");
  const at::Tensor inter = Ref::Gelu(conv(post, l + "intermediate.conv1d", 4));
  const at::Tensor want =
      ln_c(conv(inter, l + "output.conv1d", 2) + post, l + "output.layernorm").permute({0, 2, 1});
  EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(want, mask)), 1e-10);
  EXPECT_LT(MaxAbs(out[1], at::tanh(r.Lin(want.select(1, 0), "pooler.dense"))), 1e-10);
  // Every head holds the pooler; the token-level ones never call it.
  auto tok = Build("SqueezeBertForTokenClassification");
  ASSERT_NE(tok, nullptr);
  EXPECT_FALSE(HasWeight(*tok, "transformer.pooler.dense.weight"));
  bool pooler = false;
  for (const StateDictEntry& e : StateDictShapes(*tok))
    pooler |= e.name == "transformer.pooler.dense.weight";
  EXPECT_TRUE(pooler);
  ExpectConfigError("SqueezeBertModel", "q_groups", 5, "q_groups");
  ExpectConfigError("SqueezeBertModel", "embedding_size", 512, "embedding_size");
}

// ---- ConvBERT
// ------------------------------------------------------------------------------------

// ConvBertSelfAttention.forward: q k v over num_attention_heads / 2 heads; key_conv =
// pointwise(depthwise(x^T)) + bias (at::conv1d here); kernel = softmax(conv_kernel_layer(key_conv
// * q)) over conv_kernel_size; conv_out_layer(x) through F.unfold (at::im2col here) times the
// kernel; cat([ctx, conv], heads) -> attention.output; then BERT's FFN.
TEST(EncoderVariantsTest, ConvBertMixedAttentionAsTransformers) {
  nlohmann::json cfg = Small("ConvBertModel", "convbert", 0);
  cfg["num_attention_heads"] = 4;
  cfg["embedding_size"] = 6;
  cfg["conv_kernel_size"] = 3;
  const auto [m, w, ids, mask, types, out] = RunSmall(cfg, 8, 0);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(HasWeight(*m, "embeddings_project.weight"));
  const Ref r{{w}, 1e-5};
  const at::Tensor x = r.Lin(r.Ln(r.Emb("embeddings.word_embeddings.weight", ids) +
                                      r.Emb("embeddings.position_embeddings.weight",
                                            at::arange(kSeq, at::kLong).repeat({2, 1})) +
                                      r.Emb("embeddings.token_type_embeddings.weight", types),
                                  "embeddings.LayerNorm"),
                             "embeddings_project");
  const std::string l = "encoder.layer.0.", a = l + "attention.self.";
  const int64_t n = 2, nh = 2, d = kHid / 4, all = nh * d, k = 3;
  const std::vector<int64_t> one = {1}, pad = {1}, zero = {0};
  const at::Tensor dw =
      at::conv1d(x.transpose(1, 2), w.at(a + "key_conv_attn_layer.depthwise.weight"), {},
                 at::IntArrayRef(one), at::IntArrayRef(pad), at::IntArrayRef(one), kHid);
  const at::Tensor key_conv = (at::conv1d(dw, w.at(a + "key_conv_attn_layer.pointwise.weight")) +
                               w.at(a + "key_conv_attn_layer.bias"))
                                  .transpose(1, 2);
  const at::Tensor mq = r.Lin(x, a + "query");
  const at::Tensor kernel =
      at::softmax(r.Lin(key_conv * mq, a + "conv_kernel_layer").reshape({-1, k, 1}), 1);
  const at::Tensor co =
      r.Lin(x, a + "conv_out_layer").transpose(1, 2).unsqueeze(-1);            // [N, A, S, 1]
  const at::Tensor unfolded = at::im2col(co, {k, 1}, {1, 1}, {1, 0}, {1, 1});  // [N, A k, S]
  const at::Tensor conv =
      at::matmul(unfolded.transpose(1, 2).reshape({-1, d, k}), kernel).reshape({n, kSeq, nh, d});
  auto split = [&](const at::Tensor& t) { return t.view({n, kSeq, nh, d}).transpose(1, 2); };
  const at::Tensor ext =
      (1.0 - mask.to(at::kDouble)).view({n, 1, 1, kSeq}) * std::numeric_limits<double>::lowest();
  const at::Tensor probs = at::softmax(
      at::matmul(split(mq), split(r.Lin(x, a + "key")).transpose(-1, -2)) / std::sqrt(double(d)) +
          ext,
      -1);
  const at::Tensor ctx = at::matmul(probs, split(r.Lin(x, a + "value"))).permute({0, 2, 1, 3});
  const at::Tensor joined = at::cat({ctx, conv}, 2).reshape({n, kSeq, kHid});
  const at::Tensor y =
      r.Ln(r.Lin(joined, l + "attention.output.dense") + x, l + "attention.output.LayerNorm");
  const at::Tensor want = r.Ffn(y, l);
  EXPECT_EQ(all * 2, kHid);
  EXPECT_LT(MaxAbs(Kept(out[0], mask), Kept(want, mask)), 1e-10);
  ExpectConfigError("ConvBertModel", "head_ratio", 3, "head_ratio");
  ExpectConfigError("ConvBertModel", "conv_kernel_size", 8, "conv_kernel_size");
  ExpectConfigError("ConvBertModel", "num_groups", 2, "num_groups");
}

}  // namespace
}  // namespace ts::zoo
