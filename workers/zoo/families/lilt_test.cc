// LiLT against modeling_lilt.py: one layer in double, the expected values computed here from that
// file's formulas (two softmaxes, as LiltSelfAttention computes them), not from the zoo's stack.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

using testing::BuildFull;
using testing::ExpectConfigError;
using testing::MaxAbs;

constexpr int64_t kSeq = 6, kHid = 12, kHeads = 2, kRatio = 2;

nlohmann::json LiltSmall(const std::string& arch) {
  return {{"architectures", {arch}},
          {"model_type", "lilt"},
          {"hidden_size", kHid},
          {"num_attention_heads", kHeads},
          {"intermediate_size", 8},
          {"num_hidden_layers", 1},
          {"vocab_size", 40},
          {"max_position_embeddings", 20},
          {"type_vocab_size", 2},
          {"pad_token_id", 1},
          {"layer_norm_eps", 1e-5},
          {"hidden_act", "gelu"},
          {"channel_shrink_ratio", kRatio},
          {"max_2d_position_embeddings", 20}};
}

// The written-out modules, every LayerNorm at LiltSmall's eps.
struct LiltRef : testing::WrittenOutRef {
  at::Tensor Ln(const at::Tensor& x, const std::string& p) const {
    return WrittenOutRef::Ln(x, p, 1e-5);
  }
};

// One LiltLayer: LiltSelfAttention's text scores / sqrt(d) + layout scores / sqrt(d / ratio),
// softmaxed once for the layout values and once for the text values (the two sums in their two
// orders), LiltSelfOutput for each stream, then each stream's FFN.
std::pair<at::Tensor, at::Tensor> LayerRef(const LiltRef& r, const std::string& l,
                                           const at::Tensor& x, const at::Tensor& lay,
                                           const at::Tensor& ext) {
  const int64_t d = kHid / kHeads, ld = d / kRatio;
  auto split = [&](const at::Tensor& t, int64_t dd) {
    return t.view({2, kSeq, kHeads, dd}).transpose(1, 2);
  };
  auto merge = [&](const at::Tensor& t) { return t.transpose(1, 2).reshape({2, kSeq, -1}); };
  const at::Tensor ts = at::matmul(split(r.Lin(x, l + "attention.self.query"), d),
                                   split(r.Lin(x, l + "attention.self.key"), d).transpose(-1, -2)) /
                        std::sqrt(double(d));
  const at::Tensor ls =
      at::matmul(split(r.Lin(lay, l + "attention.self.layout_query"), ld),
                 split(r.Lin(lay, l + "attention.self.layout_key"), ld).transpose(-1, -2)) /
      std::sqrt(double(ld));
  const at::Tensor lctx = merge(at::matmul(
      at::softmax(ls + ts + ext, -1), split(r.Lin(lay, l + "attention.self.layout_value"), ld)));
  const at::Tensor tctx = merge(
      at::matmul(at::softmax(ts + ls + ext, -1), split(r.Lin(x, l + "attention.self.value"), d)));
  const at::Tensor a =
      r.Ln(r.Lin(tctx, l + "attention.output.dense") + x, l + "attention.output.LayerNorm");
  const at::Tensor la = r.Ln(r.Lin(lctx, l + "attention.layout_output.dense") + lay,
                             l + "attention.layout_output.LayerNorm");
  const at::Tensor y =
      r.Ln(r.Lin(LiltRef::Gelu(r.Lin(a, l + "intermediate.dense")), l + "output.dense") + a,
           l + "output.LayerNorm");
  const at::Tensor ly = r.Ln(
      r.Lin(LiltRef::Gelu(r.Lin(la, l + "layout_intermediate.dense")), l + "layout_output.dense") +
          la,
      l + "layout_output.LayerNorm");
  return {y, ly};
}

// LiltTextEmbeddings (RoBERTa positions), LiltLayoutEmbeddings (cat of the x0, y0, x1, y1, h, w
// lookups, box_linear_embeddings + box_position_embeddings at the text's position ids,
// LayerNorm), two layers (the second reads the first's layout stream through its scores), the
// tanh pooler.
TEST(LiltTest, LayersAsTransformers) {
  nlohmann::json cfg = LiltSmall("LiltModel");
  cfg["num_hidden_layers"] = 2;
  auto m = BuildFull(cfg);
  ASSERT_NE(m, nullptr);
  const WeightMap w = m->InitWeights(17, at::kDouble);
  at::Tensor ids = (at::arange(2 * kSeq, at::kLong).view({2, kSeq}) * 7 + 3).remainder(40);
  ids = ids.masked_fill(ids.eq(1), 3);
  at::Tensor mask = at::ones({2, kSeq}, at::kLong);
  mask[1].narrow(0, kSeq - 2, 2).fill_(0);
  ids = ids.masked_fill(mask.eq(0), 1);
  at::Tensor types = at::zeros({2, kSeq}, at::kLong);
  types.narrow(1, kSeq / 2, kSeq - kSeq / 2).fill_(1);
  const at::Tensor idx = at::arange(2 * kSeq * 2, at::kLong).view({2, kSeq, 2});
  const at::Tensor lo = (idx * 3) % 9;
  const at::Tensor bbox = at::cat({lo, lo + idx % 5}, -1);
  const auto out = m->Forward(
      w, {{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}, {"bbox", bbox}});
  const LiltRef r{{w}};
  const at::Tensor keep = ids.ne(1).to(at::kLong);
  const at::Tensor pos = at::cumsum(keep, 1) * keep + 1;
  at::Tensor x = r.Ln(r.Emb("embeddings.word_embeddings.weight", ids) +
                          r.Emb("embeddings.token_type_embeddings.weight", types) +
                          r.Emb("embeddings.position_embeddings.weight", pos),
                      "embeddings.LayerNorm");
  auto b = [&](int64_t i) { return bbox.select(-1, i); };
  const std::string le = "layout_embeddings.";
  const at::Tensor spatial = at::cat({r.Emb(le + "x_position_embeddings.weight", b(0)),
                                      r.Emb(le + "y_position_embeddings.weight", b(1)),
                                      r.Emb(le + "x_position_embeddings.weight", b(2)),
                                      r.Emb(le + "y_position_embeddings.weight", b(3)),
                                      r.Emb(le + "h_position_embeddings.weight", b(3) - b(1)),
                                      r.Emb(le + "w_position_embeddings.weight", b(2) - b(0))},
                                     -1);
  at::Tensor lay = r.Ln(r.Lin(spatial, le + "box_linear_embeddings") +
                            r.Emb(le + "box_position_embeddings.weight", pos),
                        le + "LayerNorm");
  const at::Tensor ext =
      (1.0 - mask.to(at::kDouble)).view({2, 1, 1, kSeq}) * std::numeric_limits<double>::lowest();
  for (int i = 0; i < 2; ++i)
    std::tie(x, lay) = LayerRef(r, "encoder.layer." + std::to_string(i) + ".", x, lay, ext);
  const at::Tensor kept = mask.unsqueeze(-1).to(at::kDouble);
  EXPECT_LT(MaxAbs(out[0] * kept, x * kept), 1e-10);
  EXPECT_LT(MaxAbs(out[1], at::tanh(r.Lin(x.select(1, 0), "pooler.dense"))), 1e-10);
}

TEST(LiltTest, RefusesWhatItDoesNotSupport) {
  ExpectConfigError("LiltModel", "channel_shrink_ratio", 5, "channel_shrink_ratio");
  ExpectConfigError("LiltModel", "position_embedding_type", "relative_key",
                    "position_embedding_type");
}

}  // namespace
}  // namespace ts::zoo
