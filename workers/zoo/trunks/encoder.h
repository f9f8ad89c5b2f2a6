// The encoder trunk (README.md "Encoder trunk"): one BERT-style encoder driven by a Recipe that
// its family file fills from the config. Post-LN or pre-LN layers, BERT / DistilBERT / ALBERT /
// DeBERTa-v2 layer naming, arange or RoBERTa (after-pad) positions, factorised embeddings
// (ALBERT, ELECTRA, DeBERTa), ALBERT's shared layer groups, DeBERTa-v2's disentangled attention;
// the heads are TextHeads (heads/text_head.h) named from the family's EncoderHeadNames.
//
// DeBERTa-v2 simplifications (documented): no conv layer (conv_kernel_size > 0 is rejected),
// relative positions computed for the run's sequence length with tensor ops, the 2D XSoftmax
// mask modelled as key masking plus zeroing padded query rows (identical for attended rows),
// attention_head_size must equal hidden_size / heads.
//
// Thread-safety: recipes are values; a built model is immutable. Private to the zoo.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/heads/text_head.h"
#include "workers/zoo/model.h"

namespace ts::zoo::internal::encoder {

// Layer naming and attention kind.
enum class Layout {
  kBert,         // encoder.layer.i.attention.self.query, attention.output.dense, ...
  kDistilBert,   // transformer.layer.i.attention.q_lin, sa_layer_norm, ffn.lin1 / lin2
  kAlbert,       // encoder.albert_layer_groups.g.albert_layers.j.attention.query, ffn, ...
  kDeberta,      // BERT names with query_proj / key_proj / value_proj; disentangled attention
  kMpnet,        // encoder.layer.i.attention.attn.q / k / v / o, attention.LayerNorm; the shared
                 // relative bias encoder.relative_attention_bias (MPNetEncoder)
  kFnet,         // no attention: the real part of the 2D DFT over (sequence, hidden), then
                 // encoder.layer.i.fourier.output.LayerNorm, intermediate.dense, output.* (FNet)
  kXlm,          // XLM / Flaubert: embeddings, position_embeddings, lang_embeddings,
                 // layer_norm_emb, then per-kind lists attentions.i.q_lin / k_lin / v_lin /
                 // out_lin, layer_norm1.i, ffns.i.lin1 / lin2, layer_norm2.i; padded rows zeroed
  kSqueezeBert,  // encoder.layers.i.attention.query / key / value, post_attention.conv1d /
                 // layernorm, intermediate.conv1d, output.conv1d / layernorm: every projection
                 // a grouped 1x1 Conv1d, weight [out, in / groups, 1] (Recipe::conv_groups)
};

// Position ids: arange(S), or RoBERTa's cumsum(ids != pad) * (ids != pad) + pad; kNone: no
// position embeddings (RoFormer: rotary in the attention).
enum class Positions { kArange, kAfterPad, kNone };

// The embedding projection to the hidden width, when the embedding width differs.
enum class Projection {
  kNone,
  kElectra,  // embeddings_project (after the embedding LayerNorm), only when E != H
  kAlbert,   // encoder.embedding_hidden_mapping_in (after the LayerNorm), always
  kDeberta,  // embeddings.embed_proj without bias (before the LayerNorm), only when E != H
  kFnet,     // embeddings.projection H -> H with bias (after the LayerNorm), always
};

// Op order of the two encoder implementations the trunk replaced, kept so that traced op
// sequences and batches stay what they were. kBert (BertModel, BertForSequenceClassification,
// BertForMaskedLM): the embeddings summed in one expression after defaulting token types, token 0
// read only by heads that pool it, stray pad ids left in batches. kGeneric (every other class):
// embeddings added one by one, token 0's view taken before every head, stray pads replaced.
enum class Lineage { kBert, kGeneric };

struct Recipe;
enum class Head;

// What an embeddings-only stack hands the trunk's BERT layers (Stack::Embed).
struct Embedded {
  at::Tensor x;     // [N, S, H]
  at::Tensor attn;  // what the stack's SelfAttention reads in every layer (undefined: nothing)
};

// A family's own embeddings and layers under the trunk's heads and batches (MobileBERT, ESM,
// ModernBERT: layers no Layout describes), defined in its family file; or, where the family's
// layers are BERT's (BertLayers: Splinter, TAPAS, BROS, MarkupLM, LayoutLMv3), its embeddings
// only, with its self-attention where that differs. Immutable once its weights are added; Encode
// and Embed may run concurrently.
class Stack {
 public:
  // Registers one weight (its HF state_dict name and shape) and returns the name.
  using AddFn = std::function<std::string(const std::string& name, std::vector<int64_t> shape)>;
  virtual ~Stack() = default;
  // The embeddings', layers' and final norms' weights under the base prefix `p`, in
  // transformers' registration order; called once, before the head's.
  virtual void AddWeights(const std::string& p, const AddFn& add) = 0;
  // The word embedding's name (the tied LM decoder reads it).
  virtual std::string WordEmbedding() const = 0;
  // [N, S] ids with their mask and token types (either may be undefined) -> [N, S, H];
  // `blocked` is the trunk's [N, 1, S, S]-broadcastable blocked-key mask. Not called when
  // BertLayers.
  virtual at::Tensor Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                            const at::Tensor& types, const at::Tensor& blocked) const {
    (void)w;
    (void)ids;
    (void)mask;
    (void)types;
    (void)blocked;
    TORCH_CHECK(false, "an embeddings-only stack has no Encode");
    return at::Tensor();
  }
  // True: AddWeights adds the embeddings' weights only; the trunk adds BERT's post-LN layers
  // after them (Layout::kBert: encoder.layer.i.attention.self.query ... output.LayerNorm) and
  // runs them over Embed's output, each layer's self-attention SelfAttention's where the stack
  // has one.
  virtual bool BertLayers() const { return false; }
  // BertLayers: the embeddings' output from the ids, mask and token types as Encode has them and
  // the model's inputs as the batch holds them (the family's own: boxes, xpaths, ...).
  virtual Embedded Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                         const at::Tensor& types, const TensorMap& inputs) const {
    (void)w;
    (void)ids;
    (void)mask;
    (void)types;
    (void)inputs;
    return {};
  }
  // BertLayers: weights after the layers' (LayoutLMv3's encoder.rel_pos_bias tables).
  virtual void AddEncoderWeights(const std::string& p, const AddFn& add) {
    (void)p;
    (void)add;
  }
  // BertLayers: one layer's self-attention context [N, heads, S, head_dim] over x [N, S, H],
  // its query / key / value Linears under `self` ("<p>encoder.layer.<i>.attention.self."),
  // `attn` Embed's; undefined: BERT's (the trunk's).
  virtual at::Tensor SelfAttention(const WeightMap& w, const std::string& self, const at::Tensor& x,
                                   const at::Tensor& blocked, const at::Tensor& attn) const {
    (void)w;
    (void)self;
    (void)x;
    (void)blocked;
    (void)attn;
    return at::Tensor();
  }
  // Encode with the batch's LayoutLM-style boxes [N, S, 4] (undefined when absent; LiLT reads
  // them, the others ignore them).
  virtual at::Tensor EncodeBoxes(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                                 const at::Tensor& types, const at::Tensor& bbox,
                                 const at::Tensor& blocked) const {
    (void)bbox;
    return Encode(w, ids, mask, types, blocked);
  }
  // After the trunk's init policy: frozen tables, padding rows of the stack's own embeddings.
  virtual void InitWeight(const std::string& name, at::Tensor& t) const {
    (void)name;
    (void)t;
  }
  // A family block between the stack and a head's classifier (ModernBERT's prediction head and
  // its pooling): its weights (absolute names, after the stack's, before the head's) and what the
  // head reads: [N, S', H] (S' = 1 for a pooled sequence-level head). None by default.
  virtual void AddHeadWeights(bool sequence_level, bool base, const AddFn& add) {
    (void)sequence_level;
    (void)base;
    (void)add;
  }
  // `ids` are the rows' input ids and `inputs` the model's (Splinter gathers its question tokens'
  // features at argmax(ids == question_token_id) or at inputs' question_positions).
  virtual at::Tensor HeadInput(const WeightMap& w, bool sequence_level, bool base,
                               const at::Tensor& ids, const TensorMap& inputs, const at::Tensor& h,
                               const at::Tensor& mask) const {
    (void)w;
    (void)sequence_level;
    (void)base;
    (void)ids;
    (void)inputs;
    (void)mask;
    return h;
  }
  // Batch inputs beside the trunk's (Splinter's question_positions), drawn after the ids (which
  // it may edit to place tokens) and the mask, before the head's labels.
  virtual void AddInputs(Head kind, at::Generator& gen, at::Tensor& ids, const at::Tensor& mask,
                         TensorMap& inputs) const {
    (void)kind;
    (void)gen;
    (void)ids;
    (void)mask;
    (void)inputs;
  }
  // The family's own head of kind `kind` over HeadInput's output (Splinter's span selection,
  // XLNet's unshifted LM loss), built from the trunk's spec; null: the trunk's.
  virtual std::unique_ptr<TextHead> FamilyHead(Head kind, const TextHeadSpec& spec) const {
    (void)kind;
    (void)spec;
    return nullptr;
  }
};
using StackFactory = std::function<std::unique_ptr<Stack>(const Recipe& r)>;

// Everything the trunk needs: sizes and options from the config, naming from the family.
struct Recipe {
  // Sizes.
  int64_t vocab = 0, hidden = 0, inter = 0, layers = 0, heads = 0;
  int64_t max_pos = 512, type_vocab = 2, embedding = 0;
  int64_t lm_width = 0;           // rembert output_embedding_size: the LM transform's width
  int64_t sep = -1;               // sep_token_id, where a head reads it (BigBird's QA)
  int64_t task_types = 0;         // ernie use_task_id: task_type_vocab_size (task 0 embedded)
  int64_t groups = 1, inner = 1;  // albert num_hidden_groups, inner_group_num
  Activation act = Activation::kGeluErf;
  Activation pooler_act = Activation::kGeluErf;  // deberta ContextPooler
  double eps = 1e-12, init_range = 0.02;
  std::optional<int64_t> pad = std::nullopt;
  int64_t num_labels = 2;
  // DeBERTa-v2 relative attention.
  bool relative = false, share_att_key = false, c2p = false, p2c = false;
  // The scores' scale is 1 / sqrt(head_dim * att_scale_factor): 1 + one for each of "c2p" and
  // "p2c" listed in pos_att_type, even when relative_attention is off and neither term is added
  // (transformers' DisentangledSelfAttention.forward, scale_factor).
  int64_t att_scale_factor = 1;
  bool pos_biased_input = true, norm_rel = false;
  int64_t buckets = -1, max_rel = -1;
  int64_t mpnet_buckets = 32;  // mpnet relative_attention_num_buckets: the bias table's rows
  int64_t AttSpan() const { return buckets > 0 ? buckets : max_rel; }
  bool rescale_embeddings = false;  // big_bird: word embeddings * sqrt(hidden)
  // RoFormer: q and k (and v with rotary_value) rotated over interleaved pairs by the frozen
  // sinusoid table encoder.embed_positions.weight [max_pos, head_dim] at arange(S).
  bool rotary = false, rotary_value = false;
  bool decoder = false;  // is_decoder (read; the CausalLM heads run causally)
  // FNet: the model takes no attention_mask (batches carry none and no padding).
  bool no_mask = false;
  // XLM: lang_embeddings rows (n_langs when above 1 with use_lang_emb; 0: none); Flaubert's
  // pre_norm (layer_norm1 / 2 before the attention / FFN instead of after the residual).
  int64_t langs = 0;
  bool xlm_pre_norm = false;
  bool causal = false;  // XLM `causal`: causal self-attention under every head
  // XLM's sequence summary (sequence classification and multiple choice): the last position
  // instead of token 0 (summary_type "last"), or why the config's summary is unsupported (the
  // classes that use it refuse the config; "" = supported).
  bool summary_last = false;
  std::string summary_error = "";
  // DeBERTa (v1): one in_proj [3H, H] split per head into q | k | v, q_bias and v_bias, and
  // pos_proj (no bias) / pos_q_proj for c2p / p2c; why its masked-LM head is unsupported ("" =
  // supported: legacy cls.predictions), refused by the LM classes only.
  bool deberta_v1 = false;
  std::string lm_error = "";
  // LayoutLM: max_2d_position_embeddings (> 0: the bbox input and its x / y / h / w tables).
  int64_t max_2d = 0;
  // DPR projection_dim (> 0: DPREncoder's encode_proj projects token 0 to it).
  int64_t projection_dim = 0;
  // X-MOD: the language adapter after every layer's FFN (XmodOutput.lang_adapter), run for one
  // language, `adapter_lang` (the ModuleDict key of config.default_language); `adapter` > 0 is
  // its bottleneck width. Before the adapter: adapter_layer_norm (`adapter_norm`), else the
  // layer's output LayerNorm when `adapter_reuse_norm`; the residual is taken after that norm
  // when `ln_before_adapter`, before it otherwise.
  int64_t adapter = 0;
  std::string adapter_lang = "";
  bool adapter_norm = false, adapter_reuse_norm = true, ln_before_adapter = true;
  // RoCBert: the shape and pronunciation tables (`shape_vocab` > 0; built always, used when
  // enabled) and their input_shape_ids / input_pronunciation_ids in the batches. `roc_concat`:
  // [word | shape | pronunciation] through map_inputs_layer, then token types and positions,
  // then the LayerNorm; else the normalised BERT sum averaged with the enabled tables' lookups.
  int64_t shape_vocab = 0, shape_dim = 0, pron_vocab = 0, pron_dim = 0;
  bool shape_on = true, pron_on = true, roc_concat = true;
  // SqueezeBERT's Conv1d groups: q, k, v, post_attention, intermediate, output.
  struct ConvGroups {
    int64_t q = 1, k = 1, v = 1, o = 1, fi = 1, fo = 1;
  } conv_groups = {};
  // ConvBERT (`conv_kernel` > 0): the self-attention runs num_attention_heads / head_ratio (2)
  // heads of hidden / num_attention_heads beside the span-based dynamic convolution over the same
  // width (key_conv_attn_layer, conv_kernel_layer, conv_out_layer), the two concatenated per head.
  int64_t conv_kernel = 0;
  // A family stack (`stack` set): the trunk's embeddings, layers and final norm give way to it.
  StackFactory stack = nullptr;
  // A token id the batches never hold (ESM's mask_token_id, whose token dropout rescales the
  // embeddings by the share of such tokens in a row; -1: none).
  int64_t avoid_id = -1;
  // The LM decoder's weight its own (`lm_bias`.weight, as HeadNames::lm_untied) and its bias
  // present, by config (EuroBERT: tie_word_embeddings, mlp_bias).
  bool lm_untied = false, lm_bias = true;
  // Batches without padding, their attention_mask all ones (Splinter: its span logits at padded
  // positions are pushed to finfo.min, which would swamp every output comparison).
  bool unpadded_batches = false;

  // Structure (from the family).
  Layout layout = Layout::kBert;
  Positions positions = Positions::kArange;
  Projection projection = Projection::kNone;
  bool embedding_norm = true;  // embeddings.LayerNorm (megatron-bert, xlm-roberta-xl: none)
  // Pre-LN families: the norms before attention and before the MLP (relative to the layer) and
  // the final one (relative to the base model); all empty for post-LN.
  std::string pre_attn_norm = "", pre_mlp_norm = "", final_norm = "";
  std::string base = "";  // state_dict prefix of the base model under a head ("bert.")
  Lineage lineage = Lineage::kGeneric;

  bool PreLn() const { return !pre_attn_norm.empty(); }
};

// Activation of a dense layer over token 0 in a classification head.
enum class DenseAct { kTanh, kGelu, kRelu, kHiddenAct, kPoolerAct };

// The family's HF head names (README.md "Encoder trunk").
struct HeadNames {
  // The base model's tanh pooler over token 0, relative to the base prefix ("" = none).
  std::string pooler = "";
  // Sequence classification: on the pooler (`seq_pooled`), else a dense layer and activation
  // over token 0 ("" = none), then the classifier.
  bool seq_pooled = true;
  std::string seq_dense = "";
  DenseAct seq_act = DenseAct::kTanh;
  std::string seq_out = "classifier";
  // Multiple choice, likewise (its classifier is always "classifier").
  bool choice_pooled = true;
  std::string choice_dense = "";
  DenseAct choice_act = DenseAct::kTanh;
  bool choice_last = false;  // the last position instead of token 0 (RoFormer)
  // XLMForMultipleChoice: the choice dense layer projects to num_labels without activation
  // (XLMSequenceSummary, summary_proj_to_labels), then `choice_out` [1, num_labels].
  bool choice_to_labels = false;
  std::string choice_out = "classifier";
  // Masked / causal LM: transform dense and LayerNorm ("" = no transform), the decoder's bias
  // prefix (its weight is tied to the word embeddings), the transform's width (the embedding
  // width or the hidden one) and activation (hidden_act or GELU).
  std::string lm_dense = "", lm_norm = "", lm_bias = "";
  bool lm_embedding_width = true;
  bool lm_hidden_act = true;
  // The LM decoder has a weight of its own (`lm_bias` + ".weight", [vocab, transform width]),
  // not the word embeddings (rembert).
  bool lm_untied = false;
  // MobileBERT: the decoder is [word embeddings^T ; `lm_extra`.weight] ([E + (H - E), V]): the
  // extra rows' Linear [H - E, V] beside the tied embedding (MobileBertLMPredictionHead.dense).
  std::string lm_extra = "";
  // *ForPreTraining: the sentence-pair classifier over the pooler (BERT's NSP head
  // cls.seq_relationship, ALBERT's SOP head sop_classifier.classifier), its output and label.
  std::string pair_head = "cls.seq_relationship";
  PairNames pair = {};
  // ELECTRA: *ForPreTraining is the replaced-token discriminator (discriminator_predictions).
  bool pretraining_discriminator = false;
  // DPR: the encoder's projection of token 0 (Recipe::projection_dim > 0), absolute.
  std::string encode_proj = "";
  // The question-answering Linear's name (ModernBERT: "classifier").
  std::string qa_out = "qa_outputs";
  // BigBirdForQuestionAnswering: its QA head block (TextHeadSpec::qa_block, `qa_outputs` under
  // it), and the question tokens (1 up to the first Recipe::sep of each row; token 0 kept)
  // pushed out of the start / end logits by -1e6; its batches put sep at kQuestionSep.
  std::string qa_block = "";
  bool qa_masks_question = false;
};

// The position of the question's closing sep in the batches of a question-masking QA head.
constexpr int64_t kQuestionSep = 3;

enum class Head {
  kBase,
  kSeqCls,
  kTokenCls,
  kQA,
  kMaskedLM,
  kMultipleChoice,
  kCausalLM,
  kNextSentence,
  kPreTraining,  // masked LM + the sentence-pair classifier (HeadNames::pair_head)
  // DPR's question encoder: the base model under Recipe::base, whose only output is
  // pooler_output, token 0's hidden state (no pooler), through HeadNames::encode_proj when
  // Recipe::projection_dim > 0.
  kDprEncoder,
};

// Multiple-choice batches: choices per example.
constexpr int64_t kNumChoices = 2;

// Sequence length a recipe can run at (RoBERTa positions start at pad + 1).
int64_t MaxSeq(const Recipe& r);

StatusOr<std::unique_ptr<Model>> BuildEncoderModel(ModelSpec spec, Recipe recipe,
                                                   const HeadNames& names, Head head);

}  // namespace ts::zoo::internal::encoder
