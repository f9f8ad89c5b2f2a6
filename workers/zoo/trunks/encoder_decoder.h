// The encoder-decoder trunk (README.md): one recipe-driven pair of transformer stacks that
// T5/mT5, BART/mBART and Whisper run on. A family parses its config into an EncDecRecipe
// (families/*.cc); a head (heads/*.cc) derives from EncoderDecoderModel, adds its own weights
// after the trunk's, and calls Encode / Decode.
//
// What the recipe varies:
//   layer naming   T5 (`block.i.layer.j.SelfAttention.q`, `DenseReluDense.wi`) or BART (also
//                  Whisper's: `layers.i.self_attn.q_proj`, `fc1`, `final_layer_norm`);
//   norm           T5LayerNorm (RMS, weight only, `eps`) or LayerNorm (weight and bias, 1e-5);
//   residual       pre-LN `x + f(norm(x))` or post-LN `norm(x + f(x))` (bart);
//   attention      scaled by 1/sqrt(head_dim), or unscaled with T5's relative position bias
//                  (buckets owned by block 0 of each stack, shared by its blocks);
//   feed-forward   fc1 / act / fc2 with biases, or T5's bias-free wi (or gated wi_0 * wi_1) / wo;
//   embeddings     a shared table or the decoder's own `embed_tokens`, an optional sqrt(d_model)
//                  scale, learned positions (BART: offset 2, looked up; Whisper: sliced) and
//                  BART's `layernorm_embedding`; Whisper's encoder starts from its conv stem.
//
// Thread-safety: immutable after construction; Forward may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/model.h"

namespace ts::zoo::internal {

using WeightList = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// One stack (encoder or decoder) of the trunk.
struct EncDecStack {
  std::string prefix;  // weight prefix without the trailing dot: "encoder", "model.decoder"
  int64_t layers = 0, heads = 0, ffn = 0;
  bool decoder = false;  // causal self-attention
  bool cross = false;    // cross-attention over the encoder output (decoder of a seq2seq model)
  bool own_embedding = false;  // `embed_tokens` inside the stack (Whisper, BART's decoder alone)
  int64_t positions = 0;       // rows of the learned position table (0: none)
  // A decoder whose padding mask comes from `decoder_attention_mask` (T5 ignores it).
  bool decoder_mask = false;
  // Switch Transformers: layer i's feed-forward is the sparse MLP when i % sparse_step == 1 or
  // sparse_step == 1 (0: every layer dense).
  int64_t sparse_step = 0;

  bool Sparse(int64_t i) const {
    return sparse_step > 0 && (sparse_step == 1 || i % sparse_step == 1);
  }

  // An encoder-like stack (no causal mask, no cross-attention); set the flags for a decoder.
  static EncDecStack Of(std::string prefix, int64_t layers, int64_t heads, int64_t ffn) {
    EncDecStack s;
    s.prefix = std::move(prefix);
    s.layers = layers;
    s.heads = heads;
    s.ffn = ffn;
    return s;
  }
};

struct EncDecRecipe {
  enum class Naming { kT5, kBart };
  enum class Norm { kRms, kLayerNorm };
  // kLookupOffset2: BART's learned table at arange(S) + 2; kLookup: a learned table at arange(S)
  // (Blenderbot, BlenderbotSmall); kSlice: Whisper's table sliced; kSinusoidalTable: Marian's /
  // Pegasus' frozen sinusoid table [max_pos, d] (sin | cos halves, p / 10000^(2i/d)) at arange(S),
  // a weight so that it is in the state_dict; kFairseq: M2M100's fairseq sinusoid (computed, not
  // a weight) at pad + cumsum(non-pad), pad tokens on the zero row.
  enum class Positions { kNone, kLookupOffset2, kLookup, kSlice, kSinusoidalTable, kFairseq };
  enum class Front { kTokens, kWhisperConv };
  enum class Batch { kT5, kBart, kMbart, kWhisper };  // which batch the heads draw

  Naming naming = Naming::kBart;
  Norm norm = Norm::kLayerNorm;
  double eps = 1e-5;
  bool pre_ln = true;
  bool final_norm = true;             // stack-level norm after the last layer
  int64_t d_model = 0, head_dim = 0;  // head_dim 0: d_model / heads
  Activation act = Activation::kGeluErf;
  bool gated_ffn = false;
  bool bias = true;    // biases on the projections and fc layers
  bool k_bias = true;  // Whisper: k_proj has none
  // T5: unscaled q k^T plus a relative position bias (buckets > 0).
  int64_t rel_buckets = 0, rel_max_distance = 0;
  // UMT5: every self-attention layer owns its relative_attention_bias (T5: block 0's, shared).
  bool rel_per_layer = false;
  // The T5 layout's feed-forward module: "DenseReluDense" (T5), "mlp" (Switch Transformers).
  std::string t5_ffn = "DenseReluDense";
  // The sparse layers' experts (EncDecStack::sparse_step) and their router's bias.
  int64_t num_experts = 0;
  bool router_bias = false;
  Positions positions = Positions::kNone;
  bool embedding_norm = false;   // BART `layernorm_embedding`
  bool scale_embedding = false;  // * sqrt(d_model)
  // BlenderbotSmall's decoder: layernorm_embedding over the unscaled token embeddings, positions
  // added after it (its encoder is BART's: LN(scaled tokens + positions)).
  bool decoder_norm_tokens = false;
  // BART builds the attention mask before embedding; T5 and Whisper after (the op order kept).
  bool mask_before_embedding = false;
  // T5's encoder normalises the self-attention input twice (query side and key/value side).
  bool encoder_norms_kv_apart = false;
  Front front = Front::kTokens;
  std::string shared;  // the shared token table ("shared.weight", ...); empty: none
  EncDecStack encoder, decoder;

  // Head and batch fields.
  Batch batch = Batch::kT5;
  int64_t vocab = 0, num_labels = 2;
  int64_t pad = 0, eos = 1, start = 0;
  bool tie = true;
  bool lm_scale_tied = false;                         // T5: tied logits from y * d_model**-0.5
  bool final_logits_bias = false;                     // BART
  // A decoder-only *ForCausalLM's loss: the shifted cross entropy (BART's), or over every
  // position against its own label (WhisperForCausalLM: CrossEntropyLoss(logits, labels)).
  bool causal_loss_shifted = true;
  int64_t mel = 80, max_source = 0, proj_size = 256;  // Whisper
};

// A Model over the trunk: holds the weight list (shared table, encoder, decoder, then what the
// head adds) and runs the stacks.
class EncoderDecoderModel : public Model {
 public:
  WeightList WeightShapes() const override { return shapes_; }

 protected:
  enum class Stacks { kEncoder, kDecoder, kBoth };
  // Adds the shared table (if any), then the stacks' weights in HF order.
  EncoderDecoderModel(ModelSpec spec, EncDecRecipe recipe, Stacks stacks);

  std::string Add(const std::string& name, std::vector<int64_t> shape);
  void AddLinear(const std::string& p, int64_t out, int64_t in, bool bias = true);
  void AddNorm(const std::string& p);
  void AddStack(const EncDecStack& s);
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;

  // The encoder output over `inputs` (input_ids + attention_mask, or input_features); sets
  // `blocked` to the keys the cross-attention must skip (undefined when none).
  at::Tensor Encode(const WeightMap& w, const TensorMap& inputs, at::Tensor* blocked) const;
  // The decoder output over decoder_input_ids, attending `enc` (undefined: no cross-attention).
  at::Tensor Decode(const WeightMap& w, const TensorMap& inputs, const at::Tensor& enc,
                    const at::Tensor& enc_blocked) const;
  // One stack over token ids (`table` defined) or over already embedded inputs `x`. Sets
  // `blocked` to its self-attention mask (padding keys, and future keys in a decoder).
  at::Tensor RunStack(const WeightMap& w, const EncDecStack& s, const at::Tensor& table,
                      const at::Tensor& x, const at::Tensor& mask, const at::Tensor& enc,
                      const at::Tensor& enc_blocked, at::Tensor* blocked) const;
  // The decoder's token table: its own embed_tokens, or the shared one.
  const at::Tensor& DecoderTable(const WeightMap& w) const;
  int64_t seq_len() const { return seq_len_; }

  EncDecRecipe r_;

 private:
  struct Sublayer {
    std::string module, norm;
  };
  struct LayerNames {
    Sublayer self, cross, ffn;
  };
  LayerNames Names(const EncDecStack& s, int64_t i) const;
  void AddAttention(const std::string& p, int64_t inner);
  at::Tensor Norm(const WeightMap& w, const std::string& p, const at::Tensor& x) const;
  at::Tensor Embed(const WeightMap& w, const EncDecStack& s, const at::Tensor& table,
                   const at::Tensor& ids) const;
  at::Tensor FairseqPositions(const at::Tensor& ids, at::ScalarType dt) const;
  at::Tensor Attend(const WeightMap& w, const std::string& p, const at::Tensor& x,
                    const at::Tensor& kv, int64_t heads, const at::Tensor& bias,
                    const at::Tensor& blocked) const;
  at::Tensor Ffn(const WeightMap& w, const std::string& p, const at::Tensor& x) const;
  at::Tensor Layer(const WeightMap& w, const EncDecStack& s, int64_t i, const at::Tensor& x,
                   const at::Tensor& bias, const at::Tensor& blocked, const at::Tensor& enc,
                   const at::Tensor& enc_blocked) const;
  template <typename F>
  at::Tensor Residual(const WeightMap& w, const std::string& norm, const at::Tensor& x, F f) const;

  WeightList shapes_;
  int64_t seq_len_ = 32;
};

// SwitchTransformersSparseMLP over x [..., d]: the router `router_w` [E, d] (+ `router_b`) in
// float32 (double for a double run; router_dtype), softmax, the top-1 expert per token, its
// probability times that expert's wo(act(wi x)) (encoder_decoder_moe.cc).
at::Tensor SwitchSparseMlp(const at::Tensor& x, const at::Tensor& router_w,
                           const at::Tensor& router_b, const std::vector<at::Tensor>& wi,
                           const std::vector<at::Tensor>& wo, Activation act);

// HF T5Attention._relative_position_bucket for relative_position = key - query: [Sq, Sk] int64,
// built with tensor ops on `dev` (traceable; no host constants).
at::Tensor T5Buckets(int64_t sq, int64_t sk, bool bidirectional, int64_t num_buckets,
                     int64_t max_distance, const at::Device& dev);

}  // namespace ts::zoo::internal
