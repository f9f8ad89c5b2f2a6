// Family pieces of the encoder trunk that only one family uses: X-MOD's language adapter
// (modeling_xmod.py XmodAdapter, XmodOutput: dense2(act(dense1(h))) + residual over one
// language's adapter, encoder.h Recipe::adapter) and RoCBert's shape and pronunciation
// embeddings (modeling_roc_bert.py RoCBertEmbeddings).
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
