// Family pieces of the encoder trunk that only one family uses: X-MOD's language adapter
// (modeling_xmod.py XmodAdapter, XmodOutput: dense2(act(dense1(h))) + residual over one
// language's adapter, encoder.h Recipe::adapter), RoCBert's shape and pronunciation embeddings
// (modeling_roc_bert.py RoCBertEmbeddings), SqueezeBERT's grouped 1x1 convolutions
// (modeling_squeezebert.py) and ConvBERT's mixed attention (modeling_convbert.py).
#include <cmath>
#include <vector>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/encoder_model.h"

namespace ts::zoo::internal::encoder {

void EncoderModel::AddAdapter(const std::string& lp, LayerW& l) {
  const int64_t h = r_.hidden, b = r_.adapter;
  if (r_.adapter_norm) {
    l.adln = Add(lp + "output.adapter_layer_norm.weight", {h});
    l.adlnb = Add(lp + "output.adapter_layer_norm.bias", {h});
  }
  const std::string m = lp + "output.adapter_modules." + r_.adapter_lang + ".";
  AddLinear(m + "dense1", b, h, l.ad1, l.ad1b);
  AddLinear(m + "dense2", h, b, l.ad2, l.ad2b);
}

// XmodOutput.lang_adapter with every row in the one language.
at::Tensor EncoderModel::LangAdapter(const WeightMap& w, const LayerW& l, const at::Tensor& z,
                                     const std::string& norm, const std::string& normb) const {
  at::Tensor h = z;
  if (r_.adapter_norm) {
    h = nn::LayerNorm(z, GetWeight(w, l.adln), GetWeight(w, l.adlnb), r_.eps);
  } else if (r_.adapter_reuse_norm) {
    h = nn::LayerNorm(z, GetWeight(w, norm), GetWeight(w, normb), r_.eps);
  }
  const at::Tensor residual = r_.ln_before_adapter ? h : z;
  at::Tensor a = nn::Activate(nn::Linear(h, GetWeight(w, l.ad1), GetWeight(w, l.ad1b)), r_.act);
  return nn::Linear(a, GetWeight(w, l.ad2), GetWeight(w, l.ad2b)) + residual;
}

}  // namespace ts::zoo::internal::encoder

namespace ts::zoo::internal::encoder {

// RoCBertEmbeddings.__init__: pronunciation_embed, then shape_embed (padding_idx pad_token_id);
// a disabled one is never read (its family's state_dict rules add it, seeded).
void EncoderModel::AddRocTables(const std::string& p) {
  if (r_.pron_on)
    pron_ = Add(p + "embeddings.pronunciation_embed.weight", {r_.pron_vocab, r_.pron_dim});
  if (r_.shape_on)
    shape_ = Add(p + "embeddings.shape_embed.weight", {r_.shape_vocab, r_.shape_dim});
}

void EncoderModel::AddRocMap(const std::string& p) {
  const int64_t in =
      r_.embedding + (r_.pron_on ? r_.pron_dim : 0) + (r_.shape_on ? r_.shape_dim : 0);
  AddLinear(p + "embeddings.map_inputs_layer", r_.hidden, in, map_, mapb_);
}

at::Tensor EncoderModel::RocJoin(const WeightMap& w, const at::Tensor& x,
                                 const ExtraInputs& extra) const {
  const int64_t pad = r_.pad.value_or(-1);
  // concat_input: ids not given are zeros (RoCBertEmbeddings.forward).
  auto ids_or_zeros = [&](const at::Tensor& t) {
    return t.defined() ? t : at::zeros({x.size(0), x.size(1)}, x.options().dtype(at::kLong));
  };
  if (!map_.empty()) {
    std::vector<at::Tensor> parts = {x};
    if (r_.shape_on)
      parts.push_back(nn::Embedding(GetWeight(w, shape_), ids_or_zeros(extra.shape_ids), pad));
    if (r_.pron_on)
      parts.push_back(nn::Embedding(GetWeight(w, pron_), ids_or_zeros(extra.pron_ids), pad));
    return nn::Linear(at::cat(parts, -1), GetWeight(w, map_), GetWeight(w, mapb_));
  }
  // Not concatenated: (LayerNorm(...) + the given enabled lookups) / (1 + their count).
  at::Tensor sum = x;
  double denominator = 1.0;
  if (r_.shape_on && extra.shape_ids.defined()) {
    sum = sum + nn::Embedding(GetWeight(w, shape_), extra.shape_ids, pad);
    denominator += 1.0;
  }
  if (r_.pron_on && extra.pron_ids.defined()) {
    sum = sum + nn::Embedding(GetWeight(w, pron_), extra.pron_ids, pad);
    denominator += 1.0;
  }
  return sum / denominator;
}

void EncoderModel::AddRocInputs(at::Generator& gen, int64_t rows, int64_t s, const at::Tensor& mask,
                                ExtraInputs& out) const {
  const auto lopts = at::TensorOptions().dtype(at::kLong);
  const int64_t pad = r_.pad.value_or(0);
  auto draw = [&](int64_t vocab) {
    at::Tensor t = at::randint(0, vocab, {rows, s}, gen, lopts);
    if (r_.pad) t = t.masked_fill(t.eq(pad), (pad + 1) % vocab);
    return r_.pad ? t.masked_fill(mask.eq(0), pad) : t;
  };
  out.shape_ids = draw(r_.shape_vocab);
  out.pron_ids = draw(r_.pron_vocab);
}

}  // namespace ts::zoo::internal::encoder

namespace ts::zoo::internal::encoder {

// nn.Conv1d(cin, cout, kernel_size=1, groups=g) over [N, C, W] is, over [N, S, C], one matmul per
// group: output channels [j * cout / g, (j + 1) * cout / g) from input channels
// [j * cin / g, (j + 1) * cin / g).
at::Tensor EncoderModel::Project(const WeightMap& w, const at::Tensor& x, const std::string& wn,
                                 const std::string& bn, int64_t groups) const {
  const at::Tensor wt = GetWeight(w, wn), b = GetWeight(w, bn);
  const int64_t n = x.size(0), s = x.size(1), in = x.size(2), out = wt.size(0);
  if (groups == 1) return nn::Linear(x, wt.squeeze(-1), b);
  const at::Tensor xs = x.reshape({n * s, groups, in / groups}).transpose(0, 1);
  const at::Tensor wg = wt.view({groups, out / groups, in / groups}).transpose(1, 2);
  return nn::Matmul(xs, wg).transpose(0, 1).reshape({n, s, out}) + b;
}

// ConvDropoutLayerNorm(ctx, x), ConvActivation, ConvDropoutLayerNorm(., post_attention).
at::Tensor EncoderModel::SqueezeLayer(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                                      const at::Tensor& ctx) const {
  const Recipe::ConvGroups& g = r_.conv_groups;
  const at::Tensor y = nn::LayerNorm(Project(w, ctx, l.o, l.ob, g.o) + x, GetWeight(w, l.ln1),
                                     GetWeight(w, l.ln1b), r_.eps);
  const at::Tensor f = nn::Activate(Project(w, y, l.fi, l.fib, g.fi), r_.act);
  return nn::LayerNorm(Project(w, f, l.fo, l.fob, g.fo) + y, GetWeight(w, l.ln2),
                       GetWeight(w, l.ln2b), r_.eps);
}

}  // namespace ts::zoo::internal::encoder

namespace ts::zoo::internal::encoder {

void EncoderModel::AddConvAttention(const std::string& lp, LayerW& l) {
  const int64_t h = r_.hidden, hd = h / r_.heads, nh = r_.heads / 2, a = nh * hd;
  const int64_t k = r_.conv_kernel;
  const std::string p = lp + "attention.self.";
  AddLinear(p + "query", a, h, l.q, l.qb);
  AddLinear(p + "key", a, h, l.k, l.kb);
  AddLinear(p + "value", a, h, l.v, l.vb);
  l.sb = Add(p + "key_conv_attn_layer.bias", {a, 1});
  l.dw = Add(p + "key_conv_attn_layer.depthwise.weight", {h, 1, k});
  l.pw = Add(p + "key_conv_attn_layer.pointwise.weight", {a, h, 1});
  AddLinear(p + "conv_kernel_layer", nh * k, a, l.ck, l.ckb);
  AddLinear(p + "conv_out_layer", a, h, l.co, l.cob);
}

// ConvBertSelfAttention.forward, then ConvBertSelfOutput and BERT's FFN (post-LN). Over [N, S, C]:
// the depthwise Conv1d(groups=C, padding k // 2) is a sum of k shifted, per-channel-scaled copies;
// nn.Unfold([k, 1], padding (k - 1) // 2) is the k shifted copies stacked last.
at::Tensor EncoderModel::ConvBertLayer(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                                       const at::Tensor& blocked) const {
  const int64_t n = x.size(0), s = x.size(1), h = r_.hidden;
  const int64_t hd = h / r_.heads, nh = r_.heads / 2, a = nh * hd, k = r_.conv_kernel;
  const int64_t pad = (k - 1) / 2;
  auto shifted = [&](const at::Tensor& t) {  // [N, S, C] -> k copies [N, S, C], j - pad later
    const at::Tensor tp = at::constant_pad_nd(t, {0, 0, pad, pad});
    std::vector<at::Tensor> out;
    for (int64_t j = 0; j < k; ++j) out.push_back(tp.narrow(1, j, s));
    return out;
  };
  const at::Tensor mq = nn::Linear(x, GetWeight(w, l.q), GetWeight(w, l.qb));
  const at::Tensor dw = GetWeight(w, l.dw).view({h, k});
  const std::vector<at::Tensor> xs = shifted(x);
  at::Tensor depth = xs[0] * dw.select(1, 0);
  for (int64_t j = 1; j < k; ++j) depth = depth + xs[static_cast<size_t>(j)] * dw.select(1, j);
  const at::Tensor key_conv =
      nn::Linear(depth, GetWeight(w, l.pw).view({a, h})) + GetWeight(w, l.sb).view({a});
  const at::Tensor kernel = at::softmax(
      nn::Linear(key_conv * mq, GetWeight(w, l.ck), GetWeight(w, l.ckb)).reshape({-1, k, 1}), 1);
  const at::Tensor co = nn::Linear(x, GetWeight(w, l.co), GetWeight(w, l.cob));
  const at::Tensor windows = at::stack(shifted(co), -1).reshape({-1, hd, k});  // [N S nh, hd, k]
  const at::Tensor conv = nn::Matmul(windows, kernel).reshape({n, s, nh, hd});
  auto heads = [&](const at::Tensor& t) { return t.view({n, s, nh, hd}).transpose(1, 2); };
  const at::Tensor ctx =
      nn::Attention(heads(mq), heads(nn::Linear(x, GetWeight(w, l.k), GetWeight(w, l.kb))),
                    heads(nn::Linear(x, GetWeight(w, l.v), GetWeight(w, l.vb))), blocked,
                    1.0 / std::sqrt(static_cast<double>(hd)));
  const at::Tensor joined = at::cat({ctx.transpose(1, 2), conv}, 2).reshape({n, s, h});
  const at::Tensor y = nn::LayerNorm(nn::Linear(joined, GetWeight(w, l.o), GetWeight(w, l.ob)) + x,
                                     GetWeight(w, l.ln1), GetWeight(w, l.ln1b), r_.eps);
  const at::Tensor f = nn::Activate(nn::Linear(y, GetWeight(w, l.fi), GetWeight(w, l.fib)), r_.act);
  return nn::LayerNorm(nn::Linear(f, GetWeight(w, l.fo), GetWeight(w, l.fob)) + y,
                       GetWeight(w, l.ln2), GetWeight(w, l.ln2b), r_.eps);
}

}  // namespace ts::zoo::internal::encoder
