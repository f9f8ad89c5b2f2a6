// The audio trunk (README.md): Whisper's conv stem (run by the encoder-decoder trunk before its
// encoder stack) and wav2vec2's feature encoder, positional conv and transformer encoder, with
// the 1-d convolution both use and its init policy.
//
// Conv1d runs as windows + matmul (UnfoldConv1d): libtorch 1.13's mkldnn conv1d backward
// returned garbage weight gradients for these models (different each run).
//
// Thread-safety: pure functions; a Wav2Vec2Trunk is immutable after construction.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/model.h"

namespace ts::zoo::internal {

// conv1d as windows + matmul: x [B, C, T] -> [B, O, T'], identical to at::conv1d (zero padding,
// groups). nn::Linear carries the bf16 emulation.
// HF's nn.GroupNorm(num_groups = channels, affine) over [B, C, T], written out (mean, centred
// variance) so that a device without a group_norm kernel computes it as the CPU does.
at::Tensor ChannelGroupNorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            double eps);

at::Tensor UnfoldConv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                        int64_t stride, int64_t padding, int64_t groups = 1);

// Conv1d weights [out, in / groups, k] (a 3-d `*.weight`): N(0, sqrt(gain / fan_in)) with
// fan_in = in / groups * k (the base policy counts only k for 3-d tensors), gain 2 (He init, HF
// kaiming_normal_) in wav2vec2's `feature_extractor.`, whose convs have no norm after the first.
// False (nothing drawn) for any other weight.
bool InitConvWeight(const std::string& name, at::Tensor& t, at::Generator& gen);

// Whisper's stem under `prefix` ("model.encoder"): conv1 (k 3, stride 1) and conv2 (k 3,
// stride 2), each followed by the exact erf GELU whatever `activation_function` says
// (transformers' WhisperEncoder.forward calls nn.functional.gelu); input_features [B, mel, T] ->
// [B, T / 2, d].
using AddWeightFn = std::function<void(const std::string&, std::vector<int64_t>)>;
void AddWhisperStem(const std::string& prefix, int64_t d, int64_t mel, const AddWeightFn& add);
at::Tensor WhisperStem(const WeightMap& w, const std::string& prefix, const at::Tensor& features);

// Wav2Vec2ConformerConfig.position_embeddings_type: "rotary", "relative" (Transformer-XL's
// sinusoid with linear_pos and pos_bias_u / pos_bias_v) or null (none).
// Wav2Vec2BertConfig adds "relative_key" (Shaw-style: distance_embedding of the key - query
// distance clamped to [-left_max_position_embeddings, right_max_position_embeddings]).
enum class ConformerPos { kNone, kRotary, kRelative, kRelativeKey };

// wav2vec2 as its config describes it (families/wav2vec2.cc parses it).
struct Wav2Vec2Recipe {
  int64_t hidden = 0, layers = 0, heads = 0, intermediate = 0, vocab = 32;
  std::vector<int64_t> conv_dim, conv_stride, conv_kernel;
  bool group_norm = true, conv_bias = false, stable_layer_norm = false;
  Activation feat_act = Activation::kGeluErf, act = Activation::kGeluErf;
  int64_t pos_kernel = 128, pos_groups = 16, pad = 0, proj_size = 256, num_labels = 2;
  double eps = 1e-5;
  bool ctc_sum = true, zero_infinity = false;
  // Wav2Vec2ForSequenceClassification: a softmax(`layer_weights`)-weighted sum of the encoder's
  // num_hidden_layers + 1 hidden states instead of the last one.
  bool weighted_layer_sum = false;
  // The family (families/wav2vec2.cc): the heads' base-model prefix (wav2vec2.,
  // hubert., unispeech_sat.); HubertFeatureProjection's layer norm only with
  // feat_proj_layer_norm; the base model's extract_features output (Wav2Vec2BaseModelOutput;
  // HubertModel returns BaseModelOutput without it).
  std::string base = "wav2vec2.";
  bool feat_proj_layer_norm = true;
  bool extract_features_output = true;
  // data2vec-audio's positional embedding: `pos_conv_layers` stacked convs of kernel
  // `pos_kernel` (Data2VecAudioPositionalConvLayer: conv, the even kernel's last frame dropped,
  // a parameter-free LayerNorm, feat_act); 0: wav2vec2's one weight-normed conv.
  int64_t pos_conv_layers = 0;
  // WavLM's gated relative position bias (WavLMAttention): buckets > 0 turns it on.
  int64_t rel_buckets = 0, rel_max_distance = 800;
  // The x-vector head (Wav2Vec2ForXVector): TDNN widths, kernels, dilations, embedding width.
  std::vector<int64_t> tdnn_dim, tdnn_kernel, tdnn_dilation;
  int64_t xvector_dim = 512;
  // SEW (modular_sew.py): squeeze_factor > 0 turns on SEWModel's layout (`layer_norm` over the
  // features, a bare `feature_projection` Linear only when conv_dim[-1] != hidden_size) and
  // SEWEncoder's squeeze: the strided positional conv beside an average pool of squeeze frames,
  // post-LN layers at the pooled rate, `encoder.upsample.projection` back to the input's frames.
  int64_t squeeze = 0;
  bool sew_projection = true;
  // wav2vec2-conformer (modular_wav2vec2_conformer.py): conformer blocks in place of the encoder
  // layers (trunks/audio_conformer.cc), no positional conv (transformers builds it and never
  // calls it) and no layer norm before the blocks, `encoder.layer_norm` after them.
  bool conformer = false;
  ConformerPos conformer_pos = ConformerPos::kRelative;
  int64_t depthwise_kernel = 31;
  double rotary_base = 10000.0;
  // wav2vec2-bert (modular_wav2vec2_bert.py): feature_input_dim > 0 replaces the conv feature
  // encoder by input_features [B, frames, feature_projection_input_dim] (the feature projection's
  // layer_norm and projection over it); its conformer blocks' LayerNorms read layer_norm_eps, the
  // convolution module pads the depthwise conv causally and norms it with depthwise_layer_norm
  // (no BatchNorm), and the encoder has no final layer_norm.
  int64_t feature_input_dim = 0;
  int64_t left_max = 64, right_max = 8;
  bool Bert() const { return feature_input_dim > 0; }
  // Wav2Vec2BertModel's add_adapter (trunks/audio_bert_adapter.cc): `adapter.proj` /
  // `proj_layer_norm` to output_hidden_size when it differs, then adapter layers of strided
  // GLU convs around an unpositioned self-attention and an FFN of adapter_act; with
  // use_intermediate_ffn_before_adapter, `intermediate_ffn` (ReLU, half-step) before it.
  bool adapter = false, intermediate_ffn = false;
  int64_t out_hidden = 0, adapter_kernel = 3, adapter_stride = 2, adapter_layers = 1;
  Activation adapter_act = Activation::kRelu;
  // The base model's output: frames and width (the adapter's stride and output_hidden_size).
  int64_t OutFrames(int64_t frames) const {
    for (int64_t i = 0; adapter && i < adapter_layers; ++i) {
      frames = (frames + 2 * (adapter_stride / 2) - adapter_kernel) / adapter_stride + 1;
    }
    return frames;
  }
  int64_t OutWidth() const { return adapter ? out_hidden : hidden; }
  // SEW-D (modular_sew_d.py; with `squeeze`): SEW's squeeze and upsampling around DeBERTa-v2's
  // encoder (trunks/audio_sew_d.cc): `encoder.encoder.layer.N` with disentangled attention over
  // `encoder.encoder.rel_embeddings` (LayerNorm-ed with norm_rel_ebd), no encoder.layer_norm; the
  // feature layer_norm at feature_layer_norm_eps.
  bool sew_d = false;
  bool relative = true, share_att_key = true, c2p = true, p2c = true, norm_rel = true;
  int64_t buckets = 256, max_rel = 512;
  double feature_eps = 1e-5;
  int64_t AttSpan() const { return buckets > 0 ? buckets : max_rel; }
  int64_t AttScaleFactor() const { return 1 + (c2p ? 1 : 0) + (p2c ? 1 : 0); }
};

// Output frames of the tiny wav2vec2 run (its input length is derived from it).
inline constexpr int64_t kW2vFrames = 16;

// A Model over wav2vec2's encoder (weights under `prefix`: "" or "wav2vec2."); heads derive
// from it, add their weights and call Encode.
class Wav2Vec2Trunk : public Model {
 public:
  std::vector<std::pair<std::string, std::vector<int64_t>>> WeightShapes() const override {
    return shapes_;
  }

 protected:
  Wav2Vec2Trunk(ModelSpec spec, Wav2Vec2Recipe r, std::string prefix);
  void Add(const std::string& name, std::vector<int64_t> shape);
  void AddLinear(const std::string& p, int64_t out, int64_t in);
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;
  // input_values [B, L] -> {last hidden state [B, frames, hidden], extract_features}. With
  // `all`, also every hidden state transformers' encoder returns under output_hidden_states
  // (num_hidden_layers + 1: the encoder's input, then each layer's output; the stable-layer-norm
  // encoder's last entry is after its final norm).
  std::pair<at::Tensor, at::Tensor> Encode(const WeightMap& w, const TensorMap& inputs,
                                           std::vector<at::Tensor>* all = nullptr) const;
  // The input_values of a batch: randn [B, L] with L giving kW2vFrames frames (wav2vec2-bert:
  // input_features randn [B, kW2vFrames, feature_projection_input_dim]), under InputName().
  at::Tensor InputValues(at::Generator& gen, int64_t batch_size) const;
  const char* InputName() const { return r_.Bert() ? "input_features" : "input_values"; }

  Wav2Vec2Recipe r_;

 private:
  void AddLn(const std::string& p, int64_t n);
  void AddLayers();
  at::Tensor FeatureEncoder(const WeightMap& w, const at::Tensor& values) const;
  // `stride`: SEW's squeeze_factor (the conv's stride); 1 elsewhere.
  at::Tensor PositionalConv(const WeightMap& w, const at::Tensor& hs, int64_t stride = 1) const;
  // SEW: the weights after the feature encoder, and the encoding from its output.
  void AddSewWeights(int64_t conv_out);
  std::pair<at::Tensor, at::Tensor> SewEncode(const WeightMap& w, const at::Tensor& conv_out,
                                              std::vector<at::Tensor>* all) const;
  at::Tensor StackedPositionalConv(const WeightMap& w, const at::Tensor& hs) const;
  // `bias`: WavLM's relative position bias [heads, T, T] (undefined: none).
  at::Tensor EncoderLayer(const WeightMap& w, int64_t i, const at::Tensor& hs,
                          const at::Tensor& bias) const;
  // WavLM: layer 0's rel_attn_embed at the T x T relative-position buckets -> [heads, T, T].
  at::Tensor RelativePositionBias(const WeightMap& w, int64_t frames) const;
  // Self-attention under `p` with WavLM's gate over `bias` when defined.
  at::Tensor Attention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                       const at::Tensor& bias) const;

  // The conformer blocks (audio_conformer.cc): weights in Wav2Vec2ConformerEncoderLayer's
  // order, and the encoder from the projected features.
  void AddConformerLayers();
  at::Tensor ConformerEncode(const WeightMap& w, at::Tensor hs, std::vector<at::Tensor>* all) const;
  at::Tensor ConformerLayer(const WeightMap& w, const std::string& lp, const at::Tensor& x,
                            const at::Tensor& pos) const;
  at::Tensor ConformerAttention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                                const at::Tensor& pos) const;
  at::Tensor ConformerConvModule(const WeightMap& w, const std::string& p,
                                 const at::Tensor& x) const;

  // SEW-D's DeBERTa-v2 encoder (audio_sew_d.cc): its weights, and the pooled states through it.
  void AddSewDEncoder();
  at::Tensor SewDEncode(const WeightMap& w, at::Tensor hs, std::vector<at::Tensor>* all) const;
  at::Tensor SewDAttention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                           const at::Tensor& rel, const at::Tensor& rel_pos) const;

  // wav2vec2-bert's intermediate FFN and adapter (audio_bert_adapter.cc).
  void AddBertAdapter();
  at::Tensor BertAdapter(const WeightMap& w, at::Tensor hs) const;

  std::string pre_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes_;
};

}  // namespace ts::zoo::internal
