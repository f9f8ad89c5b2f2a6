// bros: BROS (modeling_bros.py) as a family stack on the encoder trunk (encoder.h Stack): BERT's
// embeddings (word + token type, then the absolute positions, LayerNorm) under the trunk's BERT
// post-LN layers (Stack::BertLayers) with BrosSelfAttention, whose scores add a relative 2D
// position term: each token's box (x0, y0, x1, y1), widened to its four corners (x0, y0, x1, y0,
// x1, y1, x0, y1) and scaled by bbox_scale, is subtracted from every other token's (key box - query
// box), each of the eight coordinates embedded by the transformer-XL sinusoid [sin | cos] at
// inv_freq 10000^(-2i / d1) (d1 = hidden_size / 4 / 8), concatenated and projected to the head size
// by embeddings.bbox_projection (no bias); query i's term for key j is q_i . proj(sinusoid(box_j -
// box_i)), shared by the heads, added to q k^T before the 1 / sqrt(head size). Heads: the tanh
// pooler (BrosModel) and the token classifier (BrosForTokenClassification, whose unused pooler is a
// state_dict entry, as are the sinusoids' persistent inv_freq buffers). Batches carry `bbox` float
// [B, S, 4] in [0, 1] as BrosProcessor normalises them (padding boxes zero); transformers'
// BrosModel cannot run without it. dim_bbox other than 8, a hidden_size whose sinusoid widths do
// not add up (hidden_size / 4 / 8 even) and relative position_embedding_type are refused naming the
// field. naver-clova-ocr/bros-base-uncased.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo::internal::encoder {
namespace {

// Coordinates per box after the corner widening (config dim_bbox, the only value supported).
constexpr int64_t kDimBbox = 8;

// BrosPositionalEmbedding1D's inv_freq: 1 / 10000^(arange(0, d1, 2) / d1), float32 values.
std::vector<double> InvFreq(int64_t d1) {
  std::vector<double> inv;
  for (int64_t i = 0; i < d1; i += 2) {
    const float e = static_cast<float>(i) / static_cast<float>(d1);
    inv.push_back(static_cast<float>(1.0f / std::pow(10000.0f, e)));
  }
  return inv;
}

class BrosStack : public Stack {
 public:
  BrosStack(const Recipe& r, double bbox_scale) : r_(r), bbox_scale_(bbox_scale) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden;
    word_ = add(p + "embeddings.word_embeddings.weight", {r_.vocab, h});
    pos_ = add(p + "embeddings.position_embeddings.weight", {r_.max_pos, h});
    type_ = add(p + "embeddings.token_type_embeddings.weight", {r_.type_vocab, h});
    emb_norm_ = p + "embeddings.LayerNorm";
    add(emb_norm_ + ".weight", {h});
    add(emb_norm_ + ".bias", {h});
    proj_ = add(p + "embeddings.bbox_projection.weight", {h / r_.heads, h / 4});
  }

  std::string WordEmbedding() const override { return word_; }
  bool BertLayers() const override { return true; }

  // The embeddings, and for every layer the boxes' projected sinusoids (BoxPositions).
  Embedded Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor&,
                 const at::Tensor& types, const TensorMap& inputs) const override {
    const at::Tensor bbox = GetOptionalInput(inputs, "bbox");
    TORCH_CHECK(bbox.defined(), "BrosModel needs bbox (its attention reads the boxes)");
    const at::Tensor ty = types.defined() ? types : at::zeros_like(ids);
    at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, r_.pad.value_or(-1)) +
                   nn::Embedding(GetWeight(w, type_), ty);
    x = x + nn::Embedding(GetWeight(w, pos_), at::arange(ids.size(1), ids.options()));
    x = nn::LayerNorm(x, GetWeight(w, emb_norm_ + ".weight"), GetWeight(w, emb_norm_ + ".bias"),
                      r_.eps);
    at::Tensor rel = BoxPositions(w, bbox.to(x.scalar_type()));
    return {std::move(x), std::move(rel)};
  }

  // BrosSelfAttention: BERT's with the box term q_i . rel_ij in the scores.
  at::Tensor SelfAttention(const WeightMap& w, const std::string& self, const at::Tensor& x,
                           const at::Tensor& blocked, const at::Tensor& rel) const override {
    const int64_t n = x.size(0), s = x.size(1), nh = r_.heads, hd = r_.hidden / nh;
    auto heads = [&](const at::Tensor& t) { return t.view({n, s, nh, hd}).transpose(1, 2); };
    const at::Tensor q = heads(Lin(w, x, self + "query")), k = heads(Lin(w, x, self + "key"));
    const at::Tensor v = heads(Lin(w, x, self + "value"));
    // einsum("bnid,bijd->bnij"): per query row i, [nh, d] x [d, S].
    const at::Tensor box = nn::Matmul(q.transpose(1, 2), rel.transpose(-1, -2)).transpose(1, 2);
    at::Tensor scores =
        (nn::Matmul(q, k.transpose(-1, -2)) + box) / std::sqrt(static_cast<double>(hd));
    scores = nn::MaskBlocked(scores, blocked);
    return nn::Matmul(at::softmax(scores, -1), v);
  }

  // Boxes [N, S, 4] in [0, 1], x0 <= x1 and y0 <= y1, zero for padded tokens.
  void AddInputs(Head, at::Generator& gen, at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& inputs) const override {
    const int64_t n = ids.size(0), s = ids.size(1);
    const at::Tensor lo = at::rand({n, s, 2}, gen) * 0.5;
    const at::Tensor box = at::cat({lo, lo + at::rand({n, s, 2}, gen) * 0.5}, -1);
    inputs["bbox"] = box.masked_fill(mask.eq(0).unsqueeze(-1), 0);
  }

 private:
  static at::Tensor Lin(const WeightMap& w, const at::Tensor& x, const std::string& n) {
    return nn::Linear(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"));
  }

  // BrosModel.forward's corner widening and scaling, then calculate_bbox_pos_emb:
  // [N, S(query i), S(key j), head size] = bbox_projection(sinusoid(box_j - box_i)).
  at::Tensor BoxPositions(const WeightMap& w, const at::Tensor& bbox) const {
    // Built from traced ops only (a tensor made from host data would not survive the trace).
    auto col = [&](int64_t i) { return bbox.select(-1, i); };
    const at::Tensor b =
        at::stack({col(0), col(1), col(2), col(1), col(2), col(3), col(0), col(3)}, -1) *
        bbox_scale_;
    const at::Tensor rel = b.unsqueeze(1) - b.unsqueeze(2);  // [N, i, j, 8]: box_j - box_i
    const int64_t d1 = r_.hidden / 4 / kDimBbox;
    // 1 / (10000 ** (arange(0.0, d1, 2.0) / d1)) in float32, as the buffer holds it.
    const at::Tensor expo =
        at::arange(0, d1, 2, bbox.options().dtype(at::kFloat)) / static_cast<double>(d1);
    const at::Tensor inv = at::reciprocal(at::pow(10000.0, expo)).to(bbox.scalar_type());
    std::vector<at::Tensor> parts;
    for (int64_t c = 0; c < kDimBbox; ++c) {  // x_pos_emb and y_pos_emb: the same inv_freq
      const at::Tensor arg = rel.select(-1, c).unsqueeze(-1) * inv;
      parts.push_back(at::cat({at::sin(arg), at::cos(arg)}, -1));
    }
    return nn::Linear(at::cat(parts, -1), GetWeight(w, proj_));
  }

  Recipe r_;
  double bbox_scale_ = 100.0;
  std::string word_, pos_, type_, emb_norm_, proj_;
};

Status ParseBros(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(int64_t dim_bbox, r.Int("dim_bbox", kDimBbox));
  if (dim_bbox != kDimBbox)
    return r.Error("dim_bbox", "only 8 is supported (the four corners of each box)");
  TS_ASSIGN_OR_RETURN(double bbox_scale, r.Double("bbox_scale", 100.0));
  // BrosConfig: dim_bbox_sinusoid_emb_2d = hidden_size // 4, its 1D width // dim_bbox; the eight
  // [sin | cos] halves must add up to it for bbox_projection to read them.
  const int64_t d2 = c.hidden / 4, d1 = d2 / kDimBbox;
  if (c.hidden % 4 != 0 || d2 % kDimBbox != 0 || d1 % 2 != 0 || d1 == 0) {
    return r.Error("hidden_size", "must be a multiple of 64 (the box sinusoid widths, got " +
                                      std::to_string(c.hidden) + ")");
  }
  c.stack = [bbox_scale](const Recipe& rec) {
    return std::make_unique<BrosStack>(rec, bbox_scale);
  };
  return OkStatus();
}

// A width the box sinusoids divide: 64 (16 per head at 4 heads).
void ScaleBros(const Recipe&, json& t) {
  const int64_t h = t["hidden_size"].get<int64_t>();
  if (h % 64 != 0) t["hidden_size"] = 64;
}

// The persistent inv_freq buffers of x_pos_emb / y_pos_emb, and BrosForTokenClassification's
// pooler (BrosModel builds it; the class never calls it).
void BrosStateDictExtra(StateDictBuilder& sd) {
  std::string base;
  for (const std::string& b : {std::string("bros."), std::string()}) {
    if (sd.HasWeight(b + "embeddings.word_embeddings.weight")) {
      base = b;
      break;
    }
  }
  const std::vector<int64_t>& word = sd.weights().at(base + "embeddings.word_embeddings.weight");
  const int64_t h = word[1], d1 = h / 4 / kDimBbox;
  for (const char* t : {"x_pos_emb", "y_pos_emb"}) {
    sd.Add({base + "embeddings.bbox_sinusoid_emb." + t + ".inv_freq",
            {d1 / 2},
            at::kFloat,
            "",
            std::nullopt,
            InvFreq(d1)});
  }
  if (!sd.HasWeight(base + "pooler.dense.weight")) {
    sd.AddUnused(base + "pooler.dense.weight", {h, h});
    sd.AddUnused(base + "pooler.dense.bias", {h});
  }
}

}  // namespace

EncoderFamily Bros() {
  json example = BertExample();
  example["model_type"] = "bros";
  example["vocab_size"] = 30522;
  example["dim_bbox"] = 8;
  example["bbox_scale"] = 100.0;
  example["n_relations"] = 1;
  return {
      .model_type = "bros",
      .structure = {.base = "bros."},
      .names = {.pooler = "pooler.dense"},
      .absolute_positions = true,
      .parse = ParseBros,
      .scale_extra = ScaleBros,
      .classes = {.base = "BrosModel", .token_cls = "BrosForTokenClassification"},
      .example = example,
      .state_dict = {.extra = BrosStateDictExtra},
  };
}

TS_ZOO_ENCODER_FAMILY(Bros);

}  // namespace ts::zoo::internal::encoder
