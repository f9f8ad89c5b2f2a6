// Tests for BART's sibling encoder-decoders (families/marian.cc, pegasus.cc, blenderbot.cc,
// blenderbot_small.cc, m2m_100.cc): each expected value is written from the transformers 5
// modeling file named in the test, not from the zoo.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

using testing::Build;
using testing::HasWeight;
using testing::LinWithBias;
using testing::Ln;
using testing::RelDiff;

constexpr double kLnEps = 1e-5;  // every nn.LayerNorm here: the default eps

// MarianSinusoidalPositionalEmbedding.create_weight / PegasusSinusoidalPositionalEmbedding:
// W[p, i] = sin(p / 10000^(2i/d)), W[p, d/2 + i] = cos(p / 10000^(2i/d)), i < d/2 (even d).
at::Tensor MarianTable(int64_t rows, int64_t d) {
  at::Tensor out = at::zeros({rows, d}, at::kDouble);
  for (int64_t p = 0; p < rows; ++p) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = static_cast<double>(p) / std::pow(10000.0, 2.0 * i / d);
      out[p][i] = std::sin(angle);
      out[p][d / 2 + i] = std::cos(angle);
    }
  }
  return out;
}

struct DecoderRef {
  bool pre_ln = false;       // pegasus, blenderbot
  bool scale = true;         // embeddings * sqrt(d) (the config's scale_embedding)
  bool norm_tokens = false;  // blenderbot-small: layernorm_embedding(tokens) + positions
  bool sinusoid = false;     // marian, pegasus: the table holds the formula's values
  std::function<at::Tensor(const at::Tensor&)> act;
};

// One decoder layer of *ForCausalLM (modeling_bart.py BartDecoderLayer without cross-attention,
// as the siblings copy it; pegasus / blenderbot: PegasusDecoderLayer's pre-LN order), written
// from the HF forward: q scaled by head_dim**-0.5, causal softmax, out_proj; fc1, act, fc2;
// the final decoder layer_norm when pre-LN; logits = h @ embed_tokens^T.
at::Tensor CausalLmReference(const WeightMap& w, const at::Tensor& ids, int64_t heads,
                             const DecoderRef& r) {
  const std::string p = "model.decoder.";
  const at::Tensor& table = w.at(p + "embed_tokens.weight");
  const int64_t d = table.size(1), s = ids.size(1), b = ids.size(0), hd = d / heads;
  at::Tensor x = at::embedding(table, ids);
  if (r.scale && !r.norm_tokens) x = x * std::sqrt(static_cast<double>(d));
  if (r.norm_tokens) x = Ln(w, p + "layernorm_embedding", x, kLnEps);
  // Positions at arange(S), no offset (the sinusoid tables' values are checked by the caller).
  x = x + w.at(p + "embed_positions.weight").narrow(0, 0, s);
  const std::string l = p + "layers.0.";
  auto attn = [&](const at::Tensor& h) {
    auto split = [&](const at::Tensor& t) { return t.view({b, s, heads, hd}).transpose(1, 2); };
    at::Tensor q = split(LinWithBias(w, l + "self_attn.q_proj", h) * std::pow(hd, -0.5));
    at::Tensor k = split(LinWithBias(w, l + "self_attn.k_proj", h));
    at::Tensor v = split(LinWithBias(w, l + "self_attn.v_proj", h));
    at::Tensor scores = at::matmul(q, k.transpose(-1, -2));
    at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
    scores = scores.masked_fill(future, -1e300);
    at::Tensor o = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({b, s, d});
    return LinWithBias(w, l + "self_attn.out_proj", o);
  };
  auto ffn = [&](const at::Tensor& h) {
    return LinWithBias(w, l + "fc2", r.act(LinWithBias(w, l + "fc1", h)));
  };
  if (r.pre_ln) {
    x = x + attn(Ln(w, l + "self_attn_layer_norm", x, kLnEps));
    x = x + ffn(Ln(w, l + "final_layer_norm", x, kLnEps));
    x = Ln(w, p + "layer_norm", x, kLnEps);
  } else {
    x = Ln(w, l + "self_attn_layer_norm", x + attn(x), kLnEps);
    x = Ln(w, l + "final_layer_norm", x + ffn(x), kLnEps);
  }
  return at::linear(x, table);
}

TEST(BartVariantsTest, CausalLmsComputeTheirTransformersDecoders) {
  auto relu = [](const at::Tensor& t) { return at::relu(t); };
  auto gelu = [](const at::Tensor& t) { return at::gelu(t); };
  auto silu = [](const at::Tensor& t) { return at::silu(t); };
  const struct {
    const char* arch;
    DecoderRef ref;
  } cases[] = {
      {"MarianForCausalLM", {.sinusoid = true, .act = silu}},  // opus-mt: swish, post-LN
      {"PegasusForCausalLM", {.pre_ln = true, .sinusoid = true, .act = relu}},
      {"BlenderbotForCausalLM", {.pre_ln = true, .act = gelu}},
      {"BlenderbotSmallForCausalLM", {.norm_tokens = true, .act = gelu}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.arch);
    nlohmann::json cfg = *ExampleConfig(c.arch);
    cfg["decoder_layers"] = 1;
    auto m = Build(c.arch, cfg);
    ASSERT_TRUE(m);
    ASSERT_EQ(m->spec().tiny_config["decoder_layers"], 1);
    const WeightMap w = m->InitWeights(11, at::kDouble);
    if (c.ref.sinusoid) {
      const at::Tensor& t = w.at("model.decoder.embed_positions.weight");
      EXPECT_LT((t - MarianTable(t.size(0), t.size(1))).abs().max().item<double>(), 1e-6);
    }
    Batch batch = m->MakeBatch(2, 0);
    TensorMap in = batch.inputs;
    in.erase("attention_mask");  // no padding: the reference has the causal mask only
    const at::Tensor ids = in.at("input_ids");
    const int64_t heads = m->spec().tiny_config["decoder_attention_heads"].get<int64_t>();
    const at::Tensor want = CausalLmReference(w, ids, heads, c.ref);
    EXPECT_LT(RelDiff(m->Forward(w, in)[0], want), 1e-9);
  }
}

// M2M100SinusoidalPositionalEmbedding (modeling_m2m_100.py): positions are
// padding_idx + cumsum(ids != pad) on real tokens, so left padding moves no real token's position
// (BART's arange(S) + 2 would); the table is a non-persistent buffer, in no state_dict.
TEST(BartVariantsTest, M2m100PositionsCountRealTokensAndAreNoWeight) {
  auto m = Build("M2M100Model");
  ASSERT_TRUE(m);
  for (const auto& e : StateDictShapes(*m))
    EXPECT_EQ(e.name.find("embed_positions"), std::string::npos) << e.name;
  EXPECT_FALSE(HasWeight(*m, "final_logits_bias"));
  const WeightMap w = m->InitWeights(4, at::kDouble);
  const int64_t pad = m->spec().tiny_config["pad_token_id"].get<int64_t>();
  const int64_t s = 12, k = 3;
  at::Tensor ids = at::arange(5, 5 + s, at::kLong).unsqueeze(0);
  at::Tensor dec = at::arange(20, 20 + s, at::kLong).unsqueeze(0);
  TensorMap plain{{"input_ids", ids},
                  {"attention_mask", at::ones({1, s}, at::kLong)},
                  {"decoder_input_ids", dec},
                  {"decoder_attention_mask", at::ones({1, s}, at::kLong)}};
  auto left_pad = [&](const at::Tensor& t) {
    return at::cat({at::full({1, k}, pad, at::kLong), t}, 1);
  };
  at::Tensor mask = at::cat({at::zeros({1, k}, at::kLong), at::ones({1, s}, at::kLong)}, 1);
  TensorMap padded{{"input_ids", left_pad(ids)},
                   {"attention_mask", mask},
                   {"decoder_input_ids", left_pad(dec)},
                   {"decoder_attention_mask", mask}};
  const auto a = m->Forward(w, plain);
  const auto b = m->Forward(w, padded);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(RelDiff(b[i].narrow(1, k, s), a[i]), 1e-9) << i;
}

// State-dict layouts of the five families (their modeling files' modules): which stacks have
// layernorm_embedding, a final layer_norm, a position table and final_logits_bias.
TEST(BartVariantsTest, EachFamilyHasItsTransformersModules) {
  const struct {
    const char* arch;
    bool emb_norm, final_norm, positions, logits_bias;
  } cases[] = {
      {"MarianMTModel", false, false, true, true},
      {"PegasusForConditionalGeneration", false, true, true, true},
      {"BlenderbotForConditionalGeneration", false, true, true, true},
      {"BlenderbotSmallForConditionalGeneration", true, false, true, true},
      {"M2M100ForConditionalGeneration", false, true, false, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.arch);
    auto m = Build(c.arch);
    ASSERT_TRUE(m);
    std::set<std::string> keys;
    for (const auto& e : StateDictShapes(*m)) keys.insert(e.name);
    for (const char* stack : {"encoder", "decoder"}) {
      const std::string p = std::string("model.") + stack + ".";
      EXPECT_EQ(keys.count(p + "layernorm_embedding.weight"), c.emb_norm ? 1u : 0u) << stack;
      EXPECT_EQ(keys.count(p + "layer_norm.weight"), c.final_norm ? 1u : 0u) << stack;
      EXPECT_EQ(keys.count(p + "embed_positions.weight"), c.positions ? 1u : 0u) << stack;
      EXPECT_EQ(keys.count(p + "embed_tokens.weight"), 1u) << stack;  // tied to model.shared
    }
    EXPECT_EQ(keys.count("final_logits_bias"), c.logits_bias ? 1u : 0u);
    EXPECT_EQ(keys.count("lm_head.weight"), 1u);
    EXPECT_EQ(keys.count("model.shared.weight"), 1u);
    // Positions at arange(S), no offset: the table has max_position_embeddings rows.
    if (c.positions) {
      const int64_t rows = m->spec().tiny_config["max_position_embeddings"].get<int64_t>();
      for (const auto& [n, shape] : m->WeightShapes()) {
        if (n == "model.encoder.embed_positions.weight") {
          EXPECT_EQ(shape[0], rows);
        }
      }
    }
  }
  // Their CausalLMs keep each decoder layer's unused cross-attention, as transformers builds it.
  auto lm = Build("PegasusForCausalLM");
  bool cross = false;
  for (const auto& e : StateDictShapes(*lm))
    cross = cross || e.name == "model.decoder.layers.0.encoder_attn.q_proj.weight";
  EXPECT_TRUE(cross);
}

TEST(BartVariantsTest, MarianRefusesSeparateTables) {
  testing::ExpectConfigError("MarianMTModel", "share_encoder_decoder_embeddings", false,
                             "share_encoder_decoder_embeddings");
}

}  // namespace
}  // namespace ts::zoo
