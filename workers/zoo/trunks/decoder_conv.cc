// The decoder trunk's short-convolution mixer (Recipe::conv_layers; lfm2's Lfm2ShortConv, slow
// path): on the layers it marks, in place of the attention.
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/decoder_model.h"

namespace ts::zoo::internal::decoder {

// Lfm2ShortConv's modules in its registration order: conv, in_proj, out_proj.
void DecoderModel::AddShortConv(const std::string& p, LayerW& l) {
  const int64_t h = c_.hidden;
  l.conv = true;
  l.conv_w = Add(p + "conv.weight", {h, 1, c_.conv_kernel});
  if (c_.conv_bias) l.conv_b = Add(p + "conv.bias", {h});
  l.conv_in = Add(p + "in_proj.weight", {3 * h, h});
  if (c_.conv_bias) l.conv_in_b = Add(p + "in_proj.bias", {3 * h});
  l.conv_out = Add(p + "out_proj.weight", {h, h});
  if (c_.conv_bias) l.conv_out_b = Add(p + "out_proj.bias", {h});
}

// apply_mask_to_padding_states (padded positions zeroed when batch and length exceed 1), then
// in_proj into B, C, x along the channels, y = C * conv(B * x) with the depthwise conv padded by
// kernel - 1 on both sides and cut to the first S outputs (causal), then out_proj.
at::Tensor DecoderModel::ShortConv(const WeightMap& w, const LayerW& l, const at::Tensor& in,
                                   const at::Tensor& mask) const {
  const int64_t s = in.size(1), h = c_.hidden;
  at::Tensor x = in;
  if (mask.defined() && mask.size(0) > 1 && mask.size(1) > 1)
    x = x * mask.unsqueeze(-1).to(x.scalar_type());
  at::Tensor bcx =
      nn::Linear(x, GetWeight(w, l.conv_in), GetOptionalWeight(w, l.conv_in_b)).transpose(-1, -2);
  at::Tensor bg = bcx.narrow(-2, 0, h), cg = bcx.narrow(-2, h, h), xs = bcx.narrow(-2, 2 * h, h);
  at::Tensor conv = nn::Conv1d(bg * xs, GetWeight(w, l.conv_w), GetOptionalWeight(w, l.conv_b),
                               /*stride=*/1, /*padding=*/c_.conv_kernel - 1, /*groups=*/h);
  at::Tensor y = (cg * conv.narrow(-1, 0, s)).transpose(-1, -2);
  return nn::Linear(y, GetWeight(w, l.conv_out), GetOptionalWeight(w, l.conv_out_b));
}

}  // namespace ts::zoo::internal::decoder
