// The encoder trunk's model class, shared by its files: encoder.cc (weights, embeddings, the
// layer loop, heads, batches) and encoder_attention.cc (DeBERTa-v2's disentangled attention).
// Private to the trunk.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/heads/text_head.h"
#include "workers/zoo/trunks/encoder.h"

namespace ts::zoo::internal::encoder {

// Weight names of one stored layer ("" where the recipe has no such weight).
struct LayerW {
  std::string q, qb, k, kb, v, vb, o, ob, ln1, ln1b, fi, fib, fo, fob, ln2, ln2b;
  std::string pk, pkb, pq, pqb;                   // deberta without share_att_key
  std::string pre1, pre1b, pre2, pre2b;           // pre-LN: before attention, before the MLP
  std::string ad1, ad1b, ad2, ad2b, adln, adlnb;  // X-MOD's adapter and adapter_layer_norm
  std::string dw, pw, sb, ck, ckb, co, cob;  // ConvBERT: depthwise, pointwise, bias, kernel, out
  std::string self;  // an embeddings-only stack's: "<p>encoder.layer.<i>.attention.self."
};

// HF module names of one layer per layout: q, k, v, attention output, its LayerNorm, MLP in and
// out, the output LayerNorm (relative to `prefix`, the layer's module path with its dot).
struct LayerNaming {
  std::string q, k, v, o, ln1, fi, fo, ln2;
  std::string prefix;
};

// DeBERTa-v2's relative tables for one forward: rel embeddings [2 span, H], the c2p / p2c
// gather indices [N, heads, S, S] and the padded-query mask [N, 1, S, 1].
struct RelativeTables {
  at::Tensor rel, c2p_idx, p2c_idx, qmask;
  at::Tensor bias;   // MPNet's position bias [1, heads, S, S], added to the scaled scores
  at::Tensor stack;  // an embeddings-only stack's Embedded::attn
};

// Inputs beside the ids, mask and token types: LayoutLM's bbox, RoCBert's shape and
// pronunciation ids (undefined where the model takes none).
struct ExtraInputs {
  at::Tensor bbox, shape_ids, pron_ids;
};

class EncoderModel : public Model {
 public:
  EncoderModel(ModelSpec spec, Recipe r, const HeadNames& names, Head head);

  std::vector<std::pair<std::string, std::vector<int64_t>>> WeightShapes() const override {
    return shapes_;
  }
  std::vector<std::string> OutputNames() const override { return head_->OutputNames(); }
  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override;
  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override;
  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override;

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;

 private:
  std::string Add(const std::string& name, std::vector<int64_t> shape);
  void AddEmbeddings(const std::string& p);
  // Layer i's weights under the base prefix p: the attention, then the norms and the MLP in
  // transformers' registration order.
  void AddLayer(const std::string& p, int64_t i);
  LayerNaming NamingOf(const std::string& p, int64_t i) const;
  void AddAttention(const LayerNaming& n, LayerW& l);
  // SqueezeBertModule after its attention: post_attention, intermediate, output
  // (encoder_variants.cc).
  at::Tensor SqueezeLayer(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                          const at::Tensor& ctx) const;
  // groups > 0: a 1x1 Conv1d's weight [out, in / groups, 1] (SqueezeBERT).
  void AddLinear(const std::string& name, int64_t out, int64_t in, std::string& w, std::string& b,
                 int64_t groups = 0);
  // A layer projection: nn::Linear, or SqueezeBERT's grouped 1x1 convolution over [N, S, C].
  at::Tensor Project(const WeightMap& w, const at::Tensor& x, const std::string& wn,
                     const std::string& bn, int64_t groups) const;
  TextHeadSpec HeadSpec(const HeadNames& names, Head kind) const;

  // [N, S] ids -> [N, S, H] hidden states; `inputs` the model's (an embeddings-only stack reads
  // its own there).
  at::Tensor Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                    at::Tensor types, const ExtraInputs& extra, const TensorMap& inputs) const;
  at::Tensor Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                   at::Tensor types, const ExtraInputs& extra) const;
  // LayoutLM: the bbox embeddings (left, upper, right, lower, height, width) of [N, S, 4] boxes.
  at::Tensor BoxEmbed(const WeightMap& w, const at::Tensor& bbox) const;
  at::Tensor BertEmbed(const WeightMap& w, const at::Tensor& ids, at::Tensor types) const;
  at::Tensor Layer(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                   const at::Tensor& blocked, const RelativeTables& rt) const;
  // A layer's self-attention context [N, heads, S, hd] over its (normed) input a_in.
  at::Tensor SelfAttention(const WeightMap& w, const LayerW& l, const at::Tensor& a_in,
                           const at::Tensor& blocked, const RelativeTables& rt) const;
  // FNet's mixing: fft.fftn(x, dim=(1, 2)).real, as DFT matmuls, on [N, S, H].
  at::Tensor FourierReal(const at::Tensor& x) const;
  // RoFormer's apply_rotary_position_embeddings on [N, heads, S, hd].
  at::Tensor Rotate(const WeightMap& w, const at::Tensor& t) const;
  // encoder_adapter.cc: X-MOD's adapter weights of layer `lp` (after its output LayerNorm), and
  // XmodOutput.lang_adapter on z = output.dense(...) + residual, `norm` / `normb` the layer's
  // output LayerNorm.
  void AddAdapter(const std::string& lp, LayerW& l);
  // encoder_variants.cc: RoCBert's tables (after the word embeddings) and map_inputs_layer
  // (after the token types); the word embeddings `x` joined with the shape and pronunciation
  // lookups (concat_input), or the normalised embeddings `x` averaged with them.
  void AddRocTables(const std::string& p);
  // ConvBERT's attention weights (ConvBertSelfAttention) and its layer.
  void AddConvAttention(const std::string& lp, LayerW& l);
  at::Tensor ConvBertLayer(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                           const at::Tensor& blocked) const;
  void AddRocMap(const std::string& p);
  at::Tensor RocJoin(const WeightMap& w, const at::Tensor& x, const ExtraInputs& extra) const;
  // RoCBert batches: shape and pronunciation ids, drawn past the pad row.
  void AddRocInputs(at::Generator& gen, int64_t rows, int64_t s, const at::Tensor& mask,
                    ExtraInputs& out) const;
  at::Tensor LangAdapter(const WeightMap& w, const LayerW& l, const at::Tensor& z,
                         const std::string& norm, const std::string& normb) const;

  // encoder_attention.cc.
  RelativeTables MakeRelativeTables(const WeightMap& w, const at::Tensor& mask, int64_t n,
                                    int64_t s, at::ScalarType dt, const at::Device& dev) const;
  at::Tensor RelativePositions(int64_t s, const at::Device& dev) const;
  // [N, heads, S, hd] q, k, v -> context [N, heads, S, hd].
  at::Tensor DisentangledAttention(const WeightMap& w, const LayerW& l, const at::Tensor& q,
                                   const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& blocked, const RelativeTables& rt) const;

  Recipe r_;
  std::unique_ptr<Stack> stack_;  // Recipe::stack's, when the family has one
  Head head_kind_;
  int64_t qa_sep_ = -1;  // HeadNames::qa_masks_question: the sep id of the question mask
  std::unique_ptr<TextHead> head_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes_;
  std::vector<LayerW> layers_;
  std::string word_, pos_, type_, task_, emb_ln_, emb_lnb_, proj_, projb_, rel_, rel_ln_, rel_lnb_;
  std::string final_ln_, final_lnb_;
  std::string rotary_;                         // RoFormer's sinusoid table
  std::string mpnet_rel_;                      // MPNet's relative_attention_bias
  std::string lang_;                           // XLM's lang_embeddings
  std::string box_x_, box_y_, box_h_, box_w_;  // LayoutLM's 2D position tables
  std::string shape_, pron_, map_, mapb_;      // RoCBert's tables and map_inputs_layer
  std::vector<int64_t> order_;  // stored layers in execution order (albert repeats groups)
  int64_t seq_len_ = 32;
};

}  // namespace ts::zoo::internal::encoder
