// The decoder trunk's model class, shared by its files: decoder.cc (weights, the block loop,
// norms, MLP, batches) and decoder_attention.cc (projections, rotary, ALiBi, sinusoids,
// attention). Private to the trunk.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/heads/text_head.h"
#include "workers/zoo/trunks/decoder.h"

namespace ts::zoo::internal::decoder {

// Weight names of one gated expert.
struct Expert {
  std::string gate, up, down;
  std::string gate_b = "", up_b = "", down_b = "";  // llama mlp_bias
  // A routed expert of transformers 5's fused layout: `index` >= 0 selects its slice of
  // `gate_up` [E, 2I, H] (gate rows, then up rows) and of `down` [E, H, I].
  std::string gate_up = "";
  int64_t index = -1;
  // Moe::gpt_oss_experts: the fused biases [E, 2I] and [E, H].
  std::string gate_up_b = "";
};

// Weight names of one layer ("" where the recipe has no such weight).
struct LayerW {
  std::string n1w, n1b, n2w, n2b, p1w, p1b, p2w, p2b;
  std::string q, qb, k, kb, v, vb, qkv, qkvb, o, ob, qnw, qnb, knw, knb;
  std::string gate, gate_b, up, up_b, down, down_b;
  std::string attn_sub, ffn_sub;  // Names::attn_sub / ffn_sub weights ("" none)
  std::string xielu_p, xielu_n;   // Act::xielu: the MLP's act_fn.alpha_p / alpha_n
  // Recipe::diff_attn: lambda_q1, lambda_k1, lambda_q2, lambda_k2 and the layer's lambda_init.
  std::string lq1, lk1, lq2, lk2;
  double lambda_init = 0.0;
  std::string sinks;      // Recipe::attn_sinks
  std::string attn_gate;  // Recipe::attn_out_gate
  std::string router_b;   // Moe::router_bias
  bool moe = false;  // a sparse MoE layer: router, experts and the optional shared expert
  std::string router, shared_gate;
  std::string score_bias;  // deepseek_v3: mlp.gate.e_score_correction_bias
  // MLA (Recipe::mla): q_a (+bias), q_a_layernorm, q_b; kv_a_proj_with_mqa (+bias),
  // kv_a_layernorm, kv_b; q_proj (`q`) when there is no q_lora; o / ob as usual; q_up is q_b_proj.
  std::string qa, qa_b, qa_ln, q_up, kva, kva_b, kva_ln, kvb;
  std::vector<Expert> experts;
  Expert shared;
  std::optional<int64_t> window;
  bool rope = true, rope_local = false;
  double attn_div = 1.0;  // the scores' extra divisor (Recipe::attn_scale_by_layer: index + 1)
  // Recipe::conv_layers: the short conv's weights in place of the attention's.
  bool conv = false;
  std::string conv_w, conv_b, conv_in, conv_in_b, conv_out, conv_out_b;
};

// Per-forward tensors every layer shares.
struct LayerContext {
  at::Tensor cos, sin, cos_local, sin_local, alibi;
  at::Tensor mask;  // the batch's attention_mask (undefined: none)
  int64_t b = 0, s = 0;
};

class DecoderModel : public Model {
 public:
  DecoderModel(ModelSpec spec, Recipe c, TextHeadKind head);

  WeightShapeList WeightShapes() const override { return shapes_; }
  std::vector<std::string> OutputNames() const override { return head_->OutputNames(); }
  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override;
  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override;
  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override;
  // InitWeight for a model that holds this one (a vision-language model's language model).
  void InitOwnWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
    InitWeight(name, t, gen);
  }

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;

 private:
  // ---- Weights (decoder.cc).
  std::string Add(const std::string& name, std::vector<int64_t> shape);
  void AddNorm(const std::string& prefix, int64_t width, std::string& w, std::string& b,
               Norm kind);
  void AddAttention(const std::string& a, LayerW& l);
  void AddMlp(const std::string& m, LayerW& l);
  void AddMoe(const std::string& p, LayerW& l);  // decoder_moe.cc
  void AddMla(const std::string& a, LayerW& l);  // decoder_mla.cc
  void AddShortConv(const std::string& p, LayerW& l);  // decoder_conv.cc
  at::Tensor ShortConv(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                       const at::Tensor& mask) const;
  at::Tensor MlaAttn(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                     const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& blocked,
                     int64_t b, int64_t s) const;
  // deepseek routing: the [tokens, experts] combine weights from the router's logits.
  at::Tensor DeepseekCombine(const WeightMap& w, const LayerW& l,
                             const at::Tensor& logits) const;
  void AddLayer(const std::string& p, size_t index);
  TextHeadSpec HeadSpec(TextHeadKind head) const;

  // ---- Forward (decoder.cc).
  // Token embeddings (scaled, normed) plus learned or sinusoidal positions; `pos` receives the
  // positions 0..S-1 the rotary tables use.
  at::Tensor Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                   at::Tensor& pos) const;
  at::Tensor Block(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                   const LayerContext& ctx, const at::Tensor& blocked) const;
  // The classic lineage's block: sequential (with optional pre and post norms) or parallel.
  at::Tensor ClassicBlock(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                          const LayerContext& ctx, const at::Tensor& blocked) const;
  // Linear, or GPT-2 Conv1D (x @ W + b with W [in, out]).
  at::Tensor Proj(const WeightMap& w, const at::Tensor& x, const std::string& wn,
                  const std::string& bn) const;
  at::Tensor NormOpt(const WeightMap& w, const at::Tensor& x, const std::string& wn,
                     const std::string& bn) const;
  at::Tensor NormAs(Norm kind, const WeightMap& w, const at::Tensor& x, const std::string& wn,
                    const std::string& bn, int64_t width) const;
  at::Tensor Activate(const at::Tensor& x) const;
  // Act::xielu over `x` with layer `l`'s alpha_p / alpha_n.
  at::Tensor Xielu(const WeightMap& w, const LayerW& l, const at::Tensor& x) const;
  at::Tensor Mlp(const WeightMap& w, const LayerW& l, const at::Tensor& x) const;

  // ---- MoE and longrope (decoder_moe.cc).
  at::Tensor Gated(const WeightMap& w, const at::Tensor& x, const Expert& e) const;
  at::Tensor MoeMlp(const WeightMap& w, const LayerW& l, const at::Tensor& x) const;
  std::pair<at::Tensor, at::Tensor> LongRopeTables(const at::Tensor& pos, int64_t s,
                                                   at::ScalarType dt) const;

  // ---- Attention and positions (decoder_attention.cc).
  std::pair<at::Tensor, at::Tensor> Tables(const RopeConfig& rope, const at::Tensor& pos,
                                           at::ScalarType dt) const;
  at::Tensor Rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const;
  at::Tensor Sinusoid(const at::Tensor& pos, at::ScalarType dt) const;
  at::Tensor AlibiBias(const at::Tensor& mask, int64_t b, int64_t s, const at::Device& dev,
                       at::ScalarType dt) const;
  // q, k, v from the layer's projection layout, as the layout leaves them.
  void ProjectQkv(const WeightMap& w, const LayerW& l, const at::Tensor& x, int64_t b, int64_t s,
                  at::Tensor& q, at::Tensor& k, at::Tensor& v) const;
  // q, k, v [B, S, heads, hd]: projected, clipped and q/k-normed.
  void Project(const WeightMap& w, const LayerW& l, const at::Tensor& x, int64_t b, int64_t s,
               at::Tensor& q, at::Tensor& k, at::Tensor& v) const;
  at::Tensor ClassicRotate(const at::Tensor& x, const at::Tensor& cos,
                           const at::Tensor& sin) const;
  at::Tensor ClassicAttn(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                         const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& blocked,
                         int64_t b, int64_t s) const;
  // Recipe::diff_attn: the attention output [B, S, H * hd] from the probabilities [B, H, S, S]
  // and the values [B, kv, S, hd].
  at::Tensor DiffAttn(const WeightMap& w, const LayerW& l, const at::Tensor& probs,
                      const at::Tensor& v, int64_t b, int64_t s) const;
  at::Tensor Attn(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                  const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& alibi,
                  const at::Tensor& blocked, int64_t b, int64_t s) const;

  Recipe c_;
  std::unique_ptr<TextHead> head_;
  WeightShapeList shapes_;
  std::vector<std::string> ones_, zeros_;
  std::vector<LayerW> layers_;
  std::string embed_, pos_, emb_lnw_, emb_lnb_, final_w_, final_b_;
  std::string head_weight_;  // the head's projection weight (classic Conv1D init skips it)
  int64_t seq_len_ = 32;
};

}  // namespace ts::zoo::internal::decoder
