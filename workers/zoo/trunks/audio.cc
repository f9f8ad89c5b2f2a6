// The audio trunk (audio.h): Whisper's conv stem, wav2vec2's feature encoder, positional conv
// and encoder. The op order is the one the audio families had before the trunk existed.
#include "workers/zoo/trunks/audio.h"

#include <algorithm>
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

at::Tensor Ln(const WeightMap& w, const std::string& p, const at::Tensor& x, double eps) {
  return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), eps);
}

at::Tensor Lin(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::Linear(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"));
}

// wav2vec2 self-attention: q/k/v/out projections with biases under `p`, no mask.
at::Tensor SelfAttention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                         int64_t heads) {
  const int64_t b = x.size(0), s = x.size(1), h = x.size(2), hd = h / heads;
  at::Tensor q = Lin(w, p + "q_proj", x).view({b, s, heads, hd}).transpose(1, 2);
  at::Tensor k = Lin(w, p + "k_proj", x).view({b, s, heads, hd}).transpose(1, 2);
  at::Tensor v = Lin(w, p + "v_proj", x).view({b, s, heads, hd}).transpose(1, 2);
  at::Tensor ctx = nn::Attention(q, k, v, at::Tensor(), 1.0 / std::sqrt(static_cast<double>(hd)));
  return Lin(w, p + "out_proj", ctx.transpose(1, 2).reshape({b, s, h}));
}

}  // namespace

// HF's nn.GroupNorm(num_groups = channels) over [B, C, T]: each channel normalized over time,
// then scaled and shifted. Written out (mean, centred variance) rather than at::group_norm: a
// device without a group_norm kernel runs ATen's decomposition (native_batch_norm on a
// reshaped view, then addcmul) while the CPU reference runs the fused kernel, and on the first
// conv layer's output (a large offset against a small spread over ~thousands of frames) the two
// fp32 algorithms differ by half the model's bf16 noise, which failed honest devices. These ops
// compute the same way everywhere.
at::Tensor ChannelGroupNorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            double eps) {
  const at::Tensor centred = x - x.mean({2}, /*keepdim=*/true);
  const at::Tensor var = centred.pow(2).mean({2}, /*keepdim=*/true);
  return centred / (var + eps).sqrt() * weight.view({1, -1, 1}) + bias.view({1, -1, 1});
}

// Not at::conv1d: libtorch 1.13's mkldnn conv1d backward returns garbage weight gradients
// (uninitialised memory, different on every run) when the gradient reaching it comes back
// through the encoder's [B, T, C] layout, which made every audio model's training diverge.
at::Tensor UnfoldConv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                        int64_t stride, int64_t padding, int64_t groups) {
  const int64_t bsz = x.size(0), c = x.size(1), o = w.size(0), k = w.size(2);
  at::Tensor xp = padding > 0 ? at::constant_pad_nd(x, {padding, padding}) : x;
  at::Tensor win = xp.unfold(2, k, stride);  // [B, C, T', k]
  const int64_t t = win.size(2);
  at::Tensor cols = win.permute({0, 2, 1, 3}).reshape({bsz, t, c * k});  // columns c * k + j
  at::Tensor wm = w.reshape({o, (c / groups) * k});
  if (groups > 1) {
    // Grouped: the block-diagonal [O, C * k] matrix of the groups' [O / G, C / G * k] blocks, so
    // that one Linear (one matmul class for the device) computes every group.
    wm = at::block_diag(wm.chunk(groups, 0));
  }
  return nn::Linear(cols, wm, b).transpose(1, 2);
}

bool InitConvWeight(const std::string& name, at::Tensor& t, at::Generator& gen) {
  if (t.dim() != 3 || name.size() <= 7 || name.compare(name.size() - 7, 7, ".weight") != 0) {
    return false;
  }
  const double fan_in = static_cast<double>(t.size(1) * t.size(2));
  const double gain = name.find("feature_extractor.") != std::string::npos ? 2.0 : 1.0;
  t.normal_(0.0, std::sqrt(gain / fan_in), gen);
  return true;
}

void AddWhisperStem(const std::string& prefix, int64_t d, int64_t mel, const AddWeightFn& add) {
  add(prefix + ".conv1.weight", {d, mel, 3});
  add(prefix + ".conv1.bias", {d});
  add(prefix + ".conv2.weight", {d, d, 3});
  add(prefix + ".conv2.bias", {d});
}

at::Tensor WhisperStem(const WeightMap& w, const std::string& prefix, const at::Tensor& features) {
  const Activation gelu = Activation::kGeluErf;
  at::Tensor x = nn::Activate(UnfoldConv1d(features, GetWeight(w, prefix + ".conv1.weight"),
                                           GetWeight(w, prefix + ".conv1.bias"), 1, 1),
                              gelu);
  x = nn::Activate(UnfoldConv1d(x, GetWeight(w, prefix + ".conv2.weight"),
                                GetWeight(w, prefix + ".conv2.bias"), 2, 1),
                   gelu);
  return x.permute({0, 2, 1});
}

Wav2Vec2Trunk::Wav2Vec2Trunk(ModelSpec spec, Wav2Vec2Recipe r, std::string prefix)
    : Model(std::move(spec)), r_(std::move(r)), pre_(std::move(prefix)) {
  int64_t in = 1;
  for (size_t i = 0; i < r_.conv_dim.size(); ++i) {
    const std::string lp = pre_ + "feature_extractor.conv_layers." + std::to_string(i) + ".";
    Add(lp + "conv.weight", {r_.conv_dim[i], in, r_.conv_kernel[i]});
    if (r_.conv_bias) Add(lp + "conv.bias", {r_.conv_dim[i]});
    if (!r_.group_norm || i == 0) AddLn(lp + "layer_norm", r_.conv_dim[i]);
    in = r_.conv_dim[i];
  }
  if (r_.squeeze > 0) {
    AddSewWeights(in);
    return;
  }
  const int64_t h = r_.hidden;
  if (r_.Bert()) in = r_.feature_input_dim;
  if (r_.feat_proj_layer_norm) AddLn(pre_ + "feature_projection.layer_norm", in);
  AddLinear(pre_ + "feature_projection.projection", h, in);
  if (r_.conformer) {
    if (!r_.Bert()) AddLn(pre_ + "encoder.layer_norm", h);
    AddConformerLayers();
    if (r_.Bert()) AddBertAdapter();
    return;
  }
  if (r_.pos_conv_layers > 0) {
    for (int64_t i = 0; i < r_.pos_conv_layers; ++i) {
      const std::string pc = pre_ + "encoder.pos_conv_embed.layers." + std::to_string(i) + ".conv.";
      Add(pc + "weight", {h, h / r_.pos_groups, r_.pos_kernel});
      Add(pc + "bias", {h});
    }
  } else {
    const std::string pc = pre_ + "encoder.pos_conv_embed.conv.";
    Add(pc + "bias", {h});
    Add(pc + "parametrizations.weight.original0", {1, 1, r_.pos_kernel});
    Add(pc + "parametrizations.weight.original1", {h, h / r_.pos_groups, r_.pos_kernel});
  }
  AddLn(pre_ + "encoder.layer_norm", h);
  AddLayers();
}

void Wav2Vec2Trunk::AddLayers() {
  const int64_t h = r_.hidden;
  for (int64_t i = 0; i < r_.layers; ++i) {
    const std::string lp = pre_ + "encoder.layers." + std::to_string(i) + ".";
    for (const char* n : {"k_proj", "v_proj", "q_proj", "out_proj"}) {
      AddLinear(lp + "attention." + n, h, h);
    }
    if (r_.rel_buckets > 0) {  // WavLMAttention's own parameters, in registration order
      Add(lp + "attention.gru_rel_pos_const", {1, r_.heads, 1, 1});
      AddLinear(lp + "attention.gru_rel_pos_linear", 8, h / r_.heads);
      if (i == 0) Add(lp + "attention.rel_attn_embed.weight", {r_.rel_buckets, r_.heads});
    }
    AddLn(lp + "layer_norm", h);
    AddLinear(lp + "feed_forward.intermediate_dense", r_.intermediate, h);
    AddLinear(lp + "feed_forward.output_dense", h, r_.intermediate);
    AddLn(lp + "final_layer_norm", h);
  }
}

// SEWModel's registration order: layer_norm, feature_projection, then SEWEncoder's pos_conv_embed,
// layer_norm, layers and upsample.
void Wav2Vec2Trunk::AddSewWeights(int64_t conv_out) {
  const int64_t h = r_.hidden;
  AddLn(pre_ + "layer_norm", conv_out);
  if (r_.sew_projection) AddLinear(pre_ + "feature_projection", h, conv_out);
  const std::string pc = pre_ + "encoder.pos_conv_embed.conv.";
  Add(pc + "bias", {h});
  Add(pc + "parametrizations.weight.original0", {1, 1, r_.pos_kernel});
  Add(pc + "parametrizations.weight.original1", {h, h / r_.pos_groups, r_.pos_kernel});
  if (r_.sew_d) {
    AddSewDEncoder();
  } else {
    AddLn(pre_ + "encoder.layer_norm", h);
    AddLayers();
  }
  AddLinear(pre_ + "encoder.upsample.projection", h * r_.squeeze, h);
}

void Wav2Vec2Trunk::Add(const std::string& name, std::vector<int64_t> shape) {
  shapes_.emplace_back(name, std::move(shape));
}

void Wav2Vec2Trunk::AddLinear(const std::string& p, int64_t out, int64_t in) {
  Add(p + ".weight", {out, in});
  Add(p + ".bias", {out});
}

void Wav2Vec2Trunk::AddLn(const std::string& p, int64_t n) {
  Add(p + ".weight", {n});
  Add(p + ".bias", {n});
}

// The weight-norm magnitude g starts in [0.5, 1.5]; convs as InitConvWeight.
void Wav2Vec2Trunk::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  if (name.find("parametrizations.weight.original0") != std::string::npos ||
      name.find("gru_rel_pos_const") != std::string::npos) {
    t.uniform_(0.5, 1.5, gen);
    return;
  }
  if (name.find("running_var") != std::string::npos) {  // the conformer's BatchNorm1d
    t.uniform_(0.5, 1.5, gen);
    return;
  }
  if (name.find("running_mean") != std::string::npos) {
    t.normal_(0.0, 0.1, gen);
    return;
  }
  if (InitConvWeight(name, t, gen)) return;
  Model::InitWeight(name, t, gen);
}

at::Tensor Wav2Vec2Trunk::FeatureEncoder(const WeightMap& w, const at::Tensor& values) const {
  at::Tensor x = values.unsqueeze(1);
  for (size_t i = 0; i < r_.conv_dim.size(); ++i) {
    const std::string lp = pre_ + "feature_extractor.conv_layers." + std::to_string(i) + ".";
    x = UnfoldConv1d(x, GetWeight(w, lp + "conv.weight"),
                     r_.conv_bias ? GetWeight(w, lp + "conv.bias") : at::Tensor(),
                     r_.conv_stride[i], 0);
    if (r_.group_norm && i == 0) {
      x = ChannelGroupNorm(x, GetWeight(w, lp + "layer_norm.weight"),
                           GetWeight(w, lp + "layer_norm.bias"), 1e-5);
    } else if (!r_.group_norm) {
      x = Ln(w, lp + "layer_norm", x.transpose(1, 2), 1e-5).transpose(1, 2);
    }
    x = nn::Activate(x, r_.feat_act);
  }
  return x;
}

// Positional conv embedding (weight norm over dim 2, same padding, grouped), then `feat_act`.
at::Tensor Wav2Vec2Trunk::PositionalConv(const WeightMap& w, const at::Tensor& hs,
                                         int64_t stride) const {
  const std::string pc = pre_ + "encoder.pos_conv_embed.conv.";
  const at::Tensor& g = GetWeight(w, pc + "parametrizations.weight.original0");
  const at::Tensor& v = GetWeight(w, pc + "parametrizations.weight.original1");
  at::Tensor weight = g * v / v.pow(2).sum(at::IntArrayRef{0, 1}, /*keepdim=*/true).sqrt();
  at::Tensor pos = UnfoldConv1d(hs.transpose(1, 2), weight, GetWeight(w, pc + "bias"), stride,
                                r_.pos_kernel / 2, r_.pos_groups);
  if (r_.pos_kernel % 2 == 0) pos = pos.narrow(2, 0, pos.size(2) - 1);
  return nn::Activate(pos, r_.feat_act).transpose(1, 2);
}

// data2vec-audio's stacked positional convs on [B, T, H] (same padding, groups, the even
// kernel's extra frame dropped, LayerNorm without parameters over channels, feat_act).
at::Tensor Wav2Vec2Trunk::StackedPositionalConv(const WeightMap& w, const at::Tensor& hs) const {
  at::Tensor x = hs.transpose(1, 2);
  for (int64_t i = 0; i < r_.pos_conv_layers; ++i) {
    const std::string pc = pre_ + "encoder.pos_conv_embed.layers." + std::to_string(i) + ".conv.";
    x = UnfoldConv1d(x, GetWeight(w, pc + "weight"), GetWeight(w, pc + "bias"), 1,
                     r_.pos_kernel / 2, r_.pos_groups);
    if (r_.pos_kernel % 2 == 0) x = x.narrow(2, 0, x.size(2) - 1);
    x = at::layer_norm(x.transpose(1, 2), {r_.hidden}, {}, {}, 1e-5).transpose(1, 2);
    x = nn::Activate(x, r_.feat_act);
  }
  return x.transpose(1, 2);
}

// WavLMAttention.compute_bias: buckets of memory - context positions (num_buckets / 2 per
// direction, positive offsets in the upper half; offsets below half of them exact, the rest
// log-spaced up to max_distance, capped at the last bucket), looked up in rel_attn_embed and
// permuted to [heads, T, T]. The log branch is taken on offsets of at least 1: transformers
// computes it on every offset (log(0) = -inf) and discards it where the exact branch applies.
at::Tensor Wav2Vec2Trunk::RelativePositionBias(const WeightMap& w, int64_t frames) const {
  const at::Tensor& table = GetWeight(w, pre_ + "encoder.layers.0.attention.rel_attn_embed.weight");
  const auto opts = at::TensorOptions().dtype(at::kLong).device(table.device());
  at::Tensor pos = at::arange(frames, opts);
  at::Tensor rel = pos.unsqueeze(0) - pos.unsqueeze(1);  // [query, key]: key - query
  const int64_t half = r_.rel_buckets / 2, exact = half / 2;
  at::Tensor buckets = rel.gt(0).to(at::kLong) * half;
  at::Tensor dist = rel.abs();
  at::Tensor large =
      (at::log(dist.clamp_min(1).to(at::kFloat) / static_cast<double>(exact)) /
           std::log(static_cast<double>(r_.rel_max_distance) / static_cast<double>(exact)) *
           static_cast<double>(half - exact) +
       static_cast<double>(exact))
          .to(at::kLong)
          .clamp_max(half - 1);
  buckets = buckets + at::where(dist.lt(exact), dist, large);
  return at::embedding(table, buckets).permute({2, 0, 1});
}

// wav2vec2 self-attention; with WavLM's bias: per head and query, a gate from the layer's input
// (gru_rel_pos_linear over the head's slice, summed in pairs of four: a, b = sigmoid(...)),
// a * (b * gru_rel_pos_const - 1) + 2, scaling the shared bias, added to the scaled scores.
at::Tensor Wav2Vec2Trunk::Attention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                                    const at::Tensor& bias) const {
  if (!bias.defined()) return SelfAttention(w, p, x, r_.heads);
  const int64_t b = x.size(0), s = x.size(1), h = x.size(2), heads = r_.heads, hd = h / heads;
  at::Tensor gated = x.view({b, s, heads, hd}).permute({0, 2, 1, 3});
  at::Tensor proj = Lin(w, p + "gru_rel_pos_linear", gated).view({b, heads, s, 2, 4}).sum(-1);
  std::vector<at::Tensor> ab = at::sigmoid(proj).chunk(2, -1);
  at::Tensor gate = ab[0] * (ab[1] * GetWeight(w, p + "gru_rel_pos_const") - 1.0) + 2.0;
  at::Tensor mask = gate * bias.unsqueeze(0);  // [B, heads, S, 1] x [1, heads, S, S]
  at::Tensor q = Lin(w, p + "q_proj", x).view({b, s, heads, hd}).transpose(1, 2);
  at::Tensor k = Lin(w, p + "k_proj", x).view({b, s, heads, hd}).transpose(1, 2);
  at::Tensor v = Lin(w, p + "v_proj", x).view({b, s, heads, hd}).transpose(1, 2);
  at::Tensor scores =
      nn::Matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(hd))) + mask;
  at::Tensor ctx = nn::Matmul(at::softmax(scores, -1), v);
  return Lin(w, p + "out_proj", ctx.transpose(1, 2).reshape({b, s, h}));
}

// Post-LN (wav2vec2-base) or pre-LN (`do_stable_layer_norm`).
at::Tensor Wav2Vec2Trunk::EncoderLayer(const WeightMap& w, int64_t i, const at::Tensor& x,
                                       const at::Tensor& bias) const {
  const std::string lp = pre_ + "encoder.layers." + std::to_string(i) + ".";
  auto ffn = [&](const at::Tensor& y) {
    return Lin(w, lp + "feed_forward.output_dense",
               nn::Activate(Lin(w, lp + "feed_forward.intermediate_dense", y), r_.act));
  };
  at::Tensor hs = x;
  if (r_.stable_layer_norm) {
    at::Tensor y = Ln(w, lp + "layer_norm", hs, r_.eps);
    hs = hs + Attention(w, lp + "attention.", y, bias);
    return hs + ffn(Ln(w, lp + "final_layer_norm", hs, r_.eps));
  }
  hs = Ln(w, lp + "layer_norm", hs + Attention(w, lp + "attention.", hs, bias), r_.eps);
  return Ln(w, lp + "final_layer_norm", hs + ffn(hs), r_.eps);
}

std::pair<at::Tensor, at::Tensor> Wav2Vec2Trunk::Encode(const WeightMap& w,
                                                        const TensorMap& inputs,
                                                        std::vector<at::Tensor>* all) const {
  if (r_.Bert()) {  // Wav2Vec2BertFeatureProjection over input_features
    at::Tensor feats =
        Ln(w, pre_ + "feature_projection.layer_norm", GetInput(inputs, "input_features"), r_.eps);
    at::Tensor hs = Lin(w, pre_ + "feature_projection.projection", feats);
    return {BertAdapter(w, ConformerEncode(w, hs, all)), feats};
  }
  at::Tensor x = FeatureEncoder(w, GetInput(inputs, "input_values"));
  if (r_.squeeze > 0) return SewEncode(w, x, all);
  at::Tensor feats = x.transpose(1, 2);
  if (r_.feat_proj_layer_norm) feats = Ln(w, pre_ + "feature_projection.layer_norm", feats, r_.eps);
  at::Tensor hs = Lin(w, pre_ + "feature_projection.projection", feats);
  if (r_.conformer) return {ConformerEncode(w, hs, all), feats};
  hs = hs + (r_.pos_conv_layers > 0 ? StackedPositionalConv(w, hs) : PositionalConv(w, hs));
  if (!r_.stable_layer_norm) hs = Ln(w, pre_ + "encoder.layer_norm", hs, r_.eps);
  const at::Tensor bias = r_.rel_buckets > 0 ? RelativePositionBias(w, hs.size(1)) : at::Tensor();
  for (int64_t i = 0; i < r_.layers; ++i) {
    if (all) all->push_back(hs);
    hs = EncoderLayer(w, i, hs, bias);
  }
  if (r_.stable_layer_norm) hs = Ln(w, pre_ + "encoder.layer_norm", hs, r_.eps);
  if (all) all->push_back(hs);
  return {hs, feats};
}

// SEWModel.forward and SEWEncoder.forward without a mask: the features layer-normed (and
// projected), the positional conv of stride squeeze_factor added to AvgPool1d(squeeze) of the
// states (both cut to the shorter), encoder.layer_norm, the post-LN layers (SEWEncoderLayer is
// Wav2Vec2EncoderLayer: do_stable_layer_norm is not read), then SEWUpsampling: the projection to
// squeeze x hidden, feat_act, each frame's channels unfolded into squeeze frames, zero-padded to
// the input's frame count. The hidden states (`all`) are at the pooled rate, as transformers'.
std::pair<at::Tensor, at::Tensor> Wav2Vec2Trunk::SewEncode(const WeightMap& w,
                                                           const at::Tensor& conv_out,
                                                           std::vector<at::Tensor>* all) const {
  at::Tensor feats =
      Ln(w, pre_ + "layer_norm", conv_out.transpose(1, 2), r_.sew_d ? r_.feature_eps : r_.eps);
  at::Tensor hs = r_.sew_projection ? Lin(w, pre_ + "feature_projection", feats) : feats;
  const int64_t b = hs.size(0), frames = hs.size(1), h = hs.size(2), sq = r_.squeeze;
  at::Tensor pos = PositionalConv(w, hs, sq);
  at::Tensor pooled = hs.narrow(1, 0, frames / sq * sq).reshape({b, frames / sq, sq, h}).mean(2);
  const int64_t len = std::min(pos.size(1), pooled.size(1));
  hs = pooled.narrow(1, 0, len) + pos.narrow(1, 0, len);
  if (r_.sew_d) {
    hs = SewDEncode(w, hs, all);
  } else {
    hs = Ln(w, pre_ + "encoder.layer_norm", hs, r_.eps);
    for (int64_t i = 0; i < r_.layers; ++i) {
      if (all) all->push_back(hs);
      hs = EncoderLayer(w, i, hs, at::Tensor());
    }
    if (all) all->push_back(hs);
  }
  hs = nn::Activate(Lin(w, pre_ + "encoder.upsample.projection", hs), r_.feat_act);
  hs = hs.reshape({b, len * sq, h});
  if (hs.size(1) < frames) hs = at::constant_pad_nd(hs, {0, 0, 0, frames - hs.size(1)});
  return {hs, feats};
}

at::Tensor Wav2Vec2Trunk::InputValues(at::Generator& gen, int64_t batch_size) const {
  if (r_.Bert()) {
    return at::randn({batch_size, kW2vFrames, r_.feature_input_dim}, gen,
                     at::TensorOptions().dtype(at::kFloat));
  }
  int64_t len = kW2vFrames;
  for (size_t i = r_.conv_dim.size(); i-- > 0;) {
    len = (len - 1) * r_.conv_stride[i] + r_.conv_kernel[i];
  }
  return at::randn({batch_size, len}, gen, at::TensorOptions().dtype(at::kFloat));
}

}  // namespace ts::zoo::internal
