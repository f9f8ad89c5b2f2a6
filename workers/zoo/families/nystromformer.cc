// nystromformer: Nyströmformer (modeling_nystromformer.py) as a family stack on the encoder trunk
// (encoder.h Stack): BERT's embeddings with the position ids offset by 2 (a table of
// max_position_embeddings + 2 rows) and post-LN layers whose self-attention scales q and k by
// head_size^-1/4 each and then either attends in full (num_landmarks == segment_means_seq_len:
// softmax(q k^T + mask) v, what the uw-madison checkpoints run) or by the Nyström approximation:
// landmarks the means of num_landmarks consecutive segments of q and k (over every token, padded
// ones included, as transformers' reshape takes them), kernel_1 = softmax(q k_l^T), kernel_2 =
// softmax(q_l k_l^T), kernel_3 = softmax(q_l k^T + mask), and softmax-free
// kernel_1 . pinv(kernel_2) . (kernel_3 v), pinv by the six iterations of the Moore-Penrose
// scheme Z <- Z/4 (13 I - K Z (15 I - K Z (7 I - K Z))) from Z_0 = K^T / max(column sums of K)
// (the max over the whole batch, the "original" init). Then a depthwise conv over the sequence
// of the values (conv_kernel_size, zero padded, no bias; absent when the field is null) is added
// to the context. Heads: RoBERTa-style classifier.dense (hidden_act) / out_proj over token 0,
// pre_classifier (ReLU) / classifier for multiple choice, BERT's cls.predictions with the decoder
// tied, the token classifier and qa_outputs; NystromformerModel has no pooler. Refused naming the
// field: inv_coeff_init_option true (transformers then reads config["inv_init_coeff_option"] and
// fails), landmarks that do not divide segment_means_seq_len, an even conv_kernel_size (the
// conv's output is then one row longer than the context) and relative position_embedding_type.
// The landmark branch needs the sequence to be segment_means_seq_len tokens long (transformers'
// reshape): the forward refuses other lengths. uw-madison/nystromformer-512.
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {
namespace {

// The Moore-Penrose iterations NystromformerSelfAttention.iterative_inv runs (n_iter=6).
constexpr int64_t kPinvIterations = 6;

struct NystromOptions {
  int64_t landmarks = 64, segment_len = 64;
  std::optional<int64_t> conv_kernel = 65;
};

struct NystromLayerW {
  std::string q, k, v, conv, o, o_norm, inter, out, out_norm;
};

class NystromStack : public Stack {
 public:
  NystromStack(const Recipe& r, NystromOptions o) : r_(r), o_(o) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden;
    word_ = add(p + "embeddings.word_embeddings.weight", {r_.vocab, h});
    pos_ = add(p + "embeddings.position_embeddings.weight", {r_.max_pos + 2, h});
    type_ = add(p + "embeddings.token_type_embeddings.weight", {r_.type_vocab, h});
    emb_norm_ = Norm(add, p + "embeddings.LayerNorm");
    for (int64_t i = 0; i < r_.layers; ++i) {
      const std::string lp = p + "encoder.layer." + std::to_string(i) + ".";
      NystromLayerW l;
      l.q = Linear(add, lp + "attention.self.query", h, h);
      l.k = Linear(add, lp + "attention.self.key", h, h);
      l.v = Linear(add, lp + "attention.self.value", h, h);
      if (o_.conv_kernel)
        l.conv = add(lp + "attention.self.conv.weight", {r_.heads, 1, *o_.conv_kernel, 1});
      l.o = Linear(add, lp + "attention.output.dense", h, h);
      l.o_norm = Norm(add, lp + "attention.output.LayerNorm");
      l.inter = Linear(add, lp + "intermediate.dense", r_.inter, h);
      l.out = Linear(add, lp + "output.dense", h, r_.inter);
      l.out_norm = Norm(add, lp + "output.LayerNorm");
      layers_.push_back(std::move(l));
    }
  }

  std::string WordEmbedding() const override { return word_; }

  at::Tensor Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                    const at::Tensor& types, const at::Tensor&) const override {
    const int64_t s = ids.size(1);
    TORCH_CHECK(o_.landmarks == o_.segment_len || s == o_.segment_len,
                "Nystromformer's landmarks need sequences of segment_means_seq_len (",
                o_.segment_len, ") tokens, got ", s);
    const at::Tensor ty = types.defined() ? types : at::zeros_like(ids);
    at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, r_.pad.value_or(-1)) +
                   nn::Embedding(GetWeight(w, type_), ty);
    x = x + nn::Embedding(GetWeight(w, pos_), at::arange(s, ids.options()) + 2);
    x = Ln(w, x, emb_norm_);
    // get_extended_attention_mask: padded keys blocked for every query (landmark queries too).
    const at::Tensor blocked =
        mask.defined() ? mask.eq(0).view({ids.size(0), 1, 1, s}) : at::Tensor();
    for (const NystromLayerW& l : layers_) x = Layer(w, l, x, blocked);
    return x;
  }

 private:
  static std::string Linear(const AddFn& add, const std::string& n, int64_t out, int64_t in) {
    add(n + ".weight", {out, in});
    add(n + ".bias", {out});
    return n;
  }
  std::string Norm(const AddFn& add, const std::string& n) const {
    add(n + ".weight", {r_.hidden});
    add(n + ".bias", {r_.hidden});
    return n;
  }
  at::Tensor Ln(const WeightMap& w, const at::Tensor& x, const std::string& n) const {
    return nn::LayerNorm(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"), r_.eps);
  }
  at::Tensor Lin(const WeightMap& w, const at::Tensor& x, const std::string& n) const {
    return nn::Linear(x, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"));
  }

  // iterative_inv with the "original" init: Z_0 = K^T / max over everything of K's column sums.
  static at::Tensor PseudoInverse(const at::Tensor& k) {
    const at::Tensor eye = at::eye(k.size(-1), k.options());
    at::Tensor z = k.transpose(-1, -2) / at::max(k.sum(-2));
    for (int64_t i = 0; i < kPinvIterations; ++i) {
      const at::Tensor kz = nn::Matmul(k, z);
      z = nn::Matmul(0.25 * z, 13 * eye - nn::Matmul(kz, 15 * eye - nn::Matmul(kz, 7 * eye - kz)));
    }
    return z;
  }

  // NystromformerSelfAttention over [N, heads, S, d]; returns [N, heads, S, d].
  at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& blocked) const {
    if (o_.landmarks == o_.segment_len) {
      return nn::Matmul(
          at::softmax(nn::MaskBlocked(nn::Matmul(q, k.transpose(-1, -2)), blocked), -1), v);
    }
    const int64_t n = q.size(0), nh = q.size(1), d = q.size(3);
    const int64_t per = o_.segment_len / o_.landmarks;
    auto landmarks = [&](const at::Tensor& t) {
      return t.reshape({n, nh, o_.landmarks, per, d}).mean(-2);
    };
    const at::Tensor ql = landmarks(q), kl = landmarks(k);
    const at::Tensor k1 = at::softmax(nn::Matmul(q, kl.transpose(-1, -2)), -1);
    const at::Tensor k2 = at::softmax(nn::Matmul(ql, kl.transpose(-1, -2)), -1);
    const at::Tensor k3 =
        at::softmax(nn::MaskBlocked(nn::Matmul(ql, k.transpose(-1, -2)), blocked), -1);
    return nn::Matmul(nn::Matmul(k1, PseudoInverse(k2)), nn::Matmul(k3, v));
  }

  at::Tensor Layer(const WeightMap& w, const NystromLayerW& l, const at::Tensor& x,
                   const at::Tensor& blocked) const {
    const int64_t n = x.size(0), s = x.size(1), nh = r_.heads, hd = r_.hidden / nh;
    auto heads = [&](const at::Tensor& t) { return t.view({n, s, nh, hd}).transpose(1, 2); };
    const double root4 = std::sqrt(std::sqrt(static_cast<double>(hd)));
    const at::Tensor q = heads(Lin(w, x, l.q)) / root4, k = heads(Lin(w, x, l.k)) / root4;
    const at::Tensor v = heads(Lin(w, x, l.v));
    at::Tensor ctx = Attend(q, k, v, blocked);
    if (o_.conv_kernel) {  // Conv2d(heads, heads, (K, 1), padding (K // 2, 0), groups=heads)
      const int64_t half = *o_.conv_kernel / 2;
      const at::Tensor padded = at::constant_pad_nd(v, {0, 0, half, half}, 0);
      ctx = ctx + nn::Conv2d(padded, GetWeight(w, l.conv), at::Tensor(), 1, 0, nh);
    }
    const at::Tensor a =
        Ln(w, Lin(w, ctx.transpose(1, 2).reshape({n, s, r_.hidden}), l.o) + x, l.o_norm);
    return Ln(w, Lin(w, nn::Activate(Lin(w, a, l.inter), r_.act), l.out) + a, l.out_norm);
  }

  Recipe r_;
  NystromOptions o_;
  std::string word_, pos_, type_, emb_norm_;
  std::vector<NystromLayerW> layers_;
};

Status ParseNystromformer(const ConfigReader& r, const json& config, Recipe& c) {
  NystromOptions o;
  TS_ASSIGN_OR_RETURN(o.landmarks, r.Int("num_landmarks", 64));
  TS_RETURN_IF_ERROR(Positive(r, "num_landmarks", o.landmarks));
  TS_ASSIGN_OR_RETURN(o.segment_len, r.Int("segment_means_seq_len", 64));
  TS_RETURN_IF_ERROR(Positive(r, "segment_means_seq_len", o.segment_len));
  if (o.segment_len % o.landmarks != 0) {
    return r.Error("num_landmarks", "must divide segment_means_seq_len (" +
                                        std::to_string(o.segment_len) + " % " +
                                        std::to_string(o.landmarks) + " != 0)");
  }
  auto it = config.find("conv_kernel_size");
  if (it != config.end() && it->is_null()) {
    o.conv_kernel = std::nullopt;
  } else {
    TS_ASSIGN_OR_RETURN(int64_t kernel, r.Int("conv_kernel_size", 65));
    TS_RETURN_IF_ERROR(Positive(r, "conv_kernel_size", kernel));
    if (kernel % 2 == 0) return r.Error("conv_kernel_size", "must be odd (got an even size)");
    o.conv_kernel = kernel;
  }
  TS_ASSIGN_OR_RETURN(bool inv_option, r.Bool("inv_coeff_init_option", false));
  if (inv_option) {
    return r.Error("inv_coeff_init_option",
                   "true is unsupported (transformers then reads the undeclared "
                   "inv_init_coeff_option)");
  }
  c.stack = [o](const Recipe& rec) { return std::make_unique<NystromStack>(rec, o); };
  return OkStatus();
}

// The run's sequence is the segment length: full attention stays full (landmarks = tokens),
// the landmark branch keeps its tokens per landmark (at least one landmark).
void ScaleNystromformer(const Recipe&, json& t) {
  const int64_t seq = TinyProfile::kSeqLen;
  const int64_t landmarks = t.value("num_landmarks", int64_t{64});
  const int64_t segment = t.value("segment_means_seq_len", int64_t{64});
  int64_t tiny = seq;
  if (landmarks != segment) {
    const int64_t per = std::max<int64_t>(1, segment / landmarks);
    tiny = per >= seq || seq % per != 0 ? 1 : seq / per;
  }
  t["segment_means_seq_len"] = seq;
  t["num_landmarks"] = tiny;
}

}  // namespace

EncoderFamily Nystromformer() {
  json example = BertExample();
  example["model_type"] = "nystromformer";
  example["vocab_size"] = 30000;
  example["max_position_embeddings"] = 510;
  example["hidden_act"] = "gelu_new";
  example["layer_norm_eps"] = 1e-5;
  example["pad_token_id"] = 1;
  example["bos_token_id"] = 0;
  example["eos_token_id"] = 2;
  example["segment_means_seq_len"] = 64;
  example["num_landmarks"] = 64;
  example["conv_kernel_size"] = 65;
  example["inv_coeff_init_option"] = false;
  return {
      .model_type = "nystromformer",
      .defaults = {.act = "gelu_new", .eps = 1e-5, .pad = 1},
      .structure = {.base = "nystromformer."},
      .names = {.seq_pooled = false,
                .seq_dense = "classifier.dense",
                .seq_act = DenseAct::kHiddenAct,
                .seq_out = "classifier.out_proj",
                .choice_pooled = false,
                .choice_dense = "pre_classifier",
                .choice_act = DenseAct::kRelu,
                .lm_dense = "cls.predictions.transform.dense",
                .lm_norm = "cls.predictions.transform.LayerNorm",
                .lm_bias = "cls.predictions"},
      .absolute_positions = true,
      .parse = ParseNystromformer,
      .scale_extra = ScaleNystromformer,
      .classes = AllHeads("Nystromformer", /*causal=*/false),
      .example = example,
  };
}

TS_ZOO_ENCODER_FAMILY(Nystromformer);

}  // namespace ts::zoo::internal::encoder
