// wav2vec2-bert's intermediate FFN and adapter (audio.h Wav2Vec2Recipe::adapter), as
// modular_wav2vec2_bert.py builds them after the encoder: with use_intermediate_ffn_before_adapter,
// hs + 0.5 x intermediate_ffn(hs) (Wav2Vec2BertFeedForward with ReLU); then
// Wav2Vec2BertAdapter: `proj` and `proj_layer_norm` when output_hidden_size differs from
// hidden_size, and per layer (Wav2Vec2BertAdapterLayer) a residual branch (residual_layer_norm,
// residual_conv of adapter_kernel_size at adapter_stride with padding stride / 2 to twice the
// width, GLU over the channels) beside self_attn_layer_norm, self_attn_conv and GLU, then the
// self-attention without positions plus the residual, then ffn_layer_norm and the FFN of
// adapter_act plus the residual.
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/audio.h"

namespace ts::zoo::internal {
namespace {

at::Tensor AdapterLn(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), eps);
}

at::Tensor AdapterLin(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::Linear(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"));
}

// Wav2Vec2BertFeedForward under `p` with activation `act`.
at::Tensor AdapterFfn(const WeightMap& w, const std::string& p, const at::Tensor& x,
                      Activation act) {
  return AdapterLin(w, p + ".output_dense",
                    nn::Activate(AdapterLin(w, p + ".intermediate_dense", x), act));
}

}  // namespace

void Wav2Vec2Trunk::AddBertAdapter() {
  const int64_t h = r_.hidden, o = r_.out_hidden, k = r_.adapter_kernel;
  if (r_.adapter) {
    if (o != h) {
      AddLinear(pre_ + "adapter.proj", o, h);
      AddLn(pre_ + "adapter.proj_layer_norm", o);
    }
    for (int64_t i = 0; i < r_.adapter_layers; ++i) {
      const std::string lp = pre_ + "adapter.layers." + std::to_string(i) + ".";
      AddLn(lp + "residual_layer_norm", o);
      Add(lp + "residual_conv.weight", {2 * o, o, k});
      Add(lp + "residual_conv.bias", {2 * o});
      AddLn(lp + "self_attn_layer_norm", o);
      Add(lp + "self_attn_conv.weight", {2 * o, o, k});
      Add(lp + "self_attn_conv.bias", {2 * o});
      for (const char* n : {"linear_q", "linear_k", "linear_v", "linear_out"}) {
        AddLinear(lp + "self_attn." + n, o, o);
      }
      AddLn(lp + "ffn_layer_norm", o);
      AddLinear(lp + "ffn.intermediate_dense", r_.intermediate, o);
      AddLinear(lp + "ffn.output_dense", o, r_.intermediate);
    }
  }
  if (r_.intermediate_ffn) {
    AddLinear(pre_ + "intermediate_ffn.intermediate_dense", r_.intermediate, h);
    AddLinear(pre_ + "intermediate_ffn.output_dense", h, r_.intermediate);
  }
}

at::Tensor Wav2Vec2Trunk::BertAdapter(const WeightMap& w, at::Tensor hs) const {
  if (r_.intermediate_ffn) {
    hs = hs + 0.5 * AdapterFfn(w, pre_ + "intermediate_ffn", hs, Activation::kRelu);
  }
  if (!r_.adapter) return hs;
  const int64_t o = r_.out_hidden, s = r_.adapter_stride;
  if (o != r_.hidden) {
    hs = AdapterLn(w, pre_ + "adapter.proj_layer_norm", AdapterLin(w, pre_ + "adapter.proj", hs),
                   r_.eps);
  }
  auto glu_conv = [&](const std::string& p, const at::Tensor& x) {  // [B, T, o] -> [B, T', o]
    at::Tensor y = UnfoldConv1d(x.transpose(1, 2), GetWeight(w, p + ".weight"),
                                GetWeight(w, p + ".bias"), s, s / 2)
                       .transpose(1, 2);
    return y.narrow(2, 0, o) * at::sigmoid(y.narrow(2, o, o));
  };
  const int64_t heads = r_.heads, hd = o / heads;
  for (int64_t i = 0; i < r_.adapter_layers; ++i) {
    const std::string lp = pre_ + "adapter.layers." + std::to_string(i) + ".";
    at::Tensor residual =
        glu_conv(lp + "residual_conv", AdapterLn(w, lp + "residual_layer_norm", hs, r_.eps));
    at::Tensor x =
        glu_conv(lp + "self_attn_conv", AdapterLn(w, lp + "self_attn_layer_norm", hs, r_.eps));
    const int64_t b = x.size(0), t = x.size(1);
    auto split = [&](const at::Tensor& y) { return y.view({b, t, heads, hd}).transpose(1, 2); };
    at::Tensor q = split(AdapterLin(w, lp + "self_attn.linear_q", x));
    at::Tensor k = split(AdapterLin(w, lp + "self_attn.linear_k", x));
    at::Tensor v = split(AdapterLin(w, lp + "self_attn.linear_v", x));
    at::Tensor scores =
        nn::Matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(hd)));
    at::Tensor ctx = nn::Matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({b, t, o});
    hs = AdapterLin(w, lp + "self_attn.linear_out", ctx) + residual;
    hs =
        AdapterFfn(w, lp + "ffn", AdapterLn(w, lp + "ffn_layer_norm", hs, r_.eps), r_.adapter_act) +
        hs;
  }
  return hs;
}

}  // namespace ts::zoo::internal
