// The encoder trunk's weight layout (encoder_model.h): the embeddings', layers' and heads' HF
// state_dict names and shapes, as each Layout names them, and the text head a Head takes. Its
// computation is in encoder.cc.
#include "workers/zoo/trunks/encoder.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/encoder_model.h"

namespace ts::zoo::internal::encoder {
namespace {

TextHeadKind KindOf(Head head) {
  switch (head) {
    case Head::kBase:
    case Head::kDprEncoder:
      return TextHeadKind::kBase;
    case Head::kSeqCls:
    case Head::kNextSentence:
      return TextHeadKind::kSequenceClassification;
    case Head::kTokenCls:
      return TextHeadKind::kTokenClassification;
    case Head::kQA:
      return TextHeadKind::kQuestionAnswering;
    case Head::kMaskedLM:
    case Head::kPreTraining:  // its masked-LM part (the pair classifier is built beside it)
      return TextHeadKind::kMaskedLM;
    case Head::kMultipleChoice:
      return TextHeadKind::kMultipleChoice;
    case Head::kCausalLM:
      break;
  }
  return TextHeadKind::kCausalLM;
}

std::optional<Activation> DenseActivation(DenseAct act, const Recipe& r) {
  switch (act) {
    case DenseAct::kTanh:
      return std::nullopt;
    case DenseAct::kGelu:
      return Activation::kGeluErf;
    case DenseAct::kRelu:
      return Activation::kRelu;
    case DenseAct::kHiddenAct:
      return r.act;
    case DenseAct::kPoolerAct:
      break;
  }
  return r.pooler_act;
}

}  // namespace

std::string EncoderModel::Add(const std::string& name, std::vector<int64_t> shape) {
  shapes_.emplace_back(name, std::move(shape));
  return name;
}

void EncoderModel::AddEmbeddings(const std::string& p) {
  const int64_t h = r_.hidden, e = r_.embedding;
  const bool deb = r_.layout == Layout::kDeberta;
  if (r_.layout == Layout::kXlm) {  // XLMModel.__init__'s registration order
    pos_ = Add(p + "position_embeddings.weight", {r_.max_pos, e});
    if (r_.langs > 0) lang_ = Add(p + "lang_embeddings.weight", {r_.langs, e});
    word_ = Add(p + "embeddings.weight", {r_.vocab, e});
    emb_ln_ = Add(p + "layer_norm_emb.weight", {e});
    emb_lnb_ = Add(p + "layer_norm_emb.bias", {e});
    return;
  }
  word_ = Add(p + "embeddings.word_embeddings.weight", {r_.vocab, e});
  if (r_.shape_vocab > 0) AddRocTables(p);
  if ((!deb || r_.pos_biased_input) && r_.positions != Positions::kNone)
    pos_ = Add(p + "embeddings.position_embeddings.weight", {r_.max_pos, e});
  if (r_.max_2d > 0) {  // LayoutLMEmbeddings
    box_x_ = Add(p + "embeddings.x_position_embeddings.weight", {r_.max_2d, e});
    box_y_ = Add(p + "embeddings.y_position_embeddings.weight", {r_.max_2d, e});
    box_h_ = Add(p + "embeddings.h_position_embeddings.weight", {r_.max_2d, e});
    box_w_ = Add(p + "embeddings.w_position_embeddings.weight", {r_.max_2d, e});
  }
  if (r_.type_vocab > 0)
    type_ = Add(p + "embeddings.token_type_embeddings.weight", {r_.type_vocab, e});
  if (r_.task_types > 0)
    task_ = Add(p + "embeddings.task_type_embeddings.weight", {r_.task_types, e});
  if (r_.shape_vocab > 0 && r_.roc_concat) AddRocMap(p);
  const bool project =
      e != h || r_.projection == Projection::kAlbert || r_.projection == Projection::kFnet;
  if (project && r_.projection == Projection::kDeberta)
    proj_ = Add(p + "embeddings.embed_proj.weight", {h, e});
  if (r_.embedding_norm) {
    const int64_t width = project && r_.projection == Projection::kDeberta ? h : e;
    emb_ln_ = Add(p + "embeddings.LayerNorm.weight", {width});
    emb_lnb_ = Add(p + "embeddings.LayerNorm.bias", {width});
  }
  std::string name;
  if (project && r_.projection == Projection::kElectra) name = "embeddings_project";
  if (r_.projection == Projection::kAlbert) name = "encoder.embedding_hidden_mapping_in";
  if (r_.projection == Projection::kFnet) name = "embeddings.projection";
  if (!name.empty()) {
    proj_ = Add(p + name + ".weight", {h, e});
    projb_ = Add(p + name + ".bias", {h});
  }
  if (r_.rotary) rotary_ = Add(p + "encoder.embed_positions.weight", {r_.max_pos, h / r_.heads});
  if (r_.layout == Layout::kMpnet) {
    mpnet_rel_ = Add(p + "encoder.relative_attention_bias.weight", {r_.mpnet_buckets, r_.heads});
  }
  if (deb && r_.relative) {
    rel_ = Add(p + "encoder.rel_embeddings.weight", {r_.AttSpan() * 2, h});
    if (r_.norm_rel) {
      rel_ln_ = Add(p + "encoder.LayerNorm.weight", {h});
      rel_lnb_ = Add(p + "encoder.LayerNorm.bias", {h});
    }
  }
}

LayerNaming EncoderModel::NamingOf(const std::string& p, int64_t i) const {
  LayerNaming n = {"attention.self.query",
                   "attention.self.key",
                   "attention.self.value",
                   "attention.output.dense",
                   "attention.output.LayerNorm",
                   "intermediate.dense",
                   "output.dense",
                   "output.LayerNorm",
                   p + "encoder.layer." + std::to_string(i) + "."};
  switch (r_.layout) {
    case Layout::kDistilBert:
      n = {"attention.q_lin",
           "attention.k_lin",
           "attention.v_lin",
           "attention.out_lin",
           "sa_layer_norm",
           "ffn.lin1",
           "ffn.lin2",
           "output_layer_norm",
           p + "transformer.layer." + std::to_string(i) + "."};
      break;
    case Layout::kAlbert:
      n = {"attention.query",
           "attention.key",
           "attention.value",
           "attention.dense",
           "attention.LayerNorm",
           "ffn",
           "ffn_output",
           "full_layer_layer_norm",
           p + "encoder.albert_layer_groups." + std::to_string(i / r_.inner) + ".albert_layers." +
               std::to_string(i % r_.inner) + "."};
      break;
    case Layout::kDeberta:
      n.q = "attention.self.query_proj";
      n.k = "attention.self.key_proj";
      n.v = "attention.self.value_proj";
      break;
    case Layout::kMpnet:
      n = {"attention.attn.q", "attention.attn.k",    "attention.attn.v",
           "attention.attn.o", "attention.LayerNorm", "intermediate.dense",
           "output.dense",     "output.LayerNorm",    n.prefix};
      break;
    case Layout::kFnet:  // FNetLayer: fourier (no weights but its output LayerNorm), the FFN
      n = {"",
           "",
           "",
           "",
           "fourier.output.LayerNorm",
           "intermediate.dense",
           "output.dense",
           "output.LayerNorm",
           n.prefix};
      break;
    case Layout::kXlm: {  // one ModuleList per kind, indexed by layer
      const std::string li = "." + std::to_string(i);
      n = {"attentions" + li + ".q_lin",
           "attentions" + li + ".k_lin",
           "attentions" + li + ".v_lin",
           "attentions" + li + ".out_lin",
           "layer_norm1" + li,
           "ffns" + li + ".lin1",
           "ffns" + li + ".lin2",
           "layer_norm2" + li,
           p};
      break;
    }
    case Layout::kSqueezeBert:  // SqueezeBertModule
      n = {"attention.query",
           "attention.key",
           "attention.value",
           "post_attention.conv1d",
           "post_attention.layernorm",
           "intermediate.conv1d",
           "output.conv1d",
           "output.layernorm",
           p + "encoder.layers." + std::to_string(i) + "."};
      break;
    case Layout::kBert:
      break;
  }
  return n;
}

void EncoderModel::AddLinear(const std::string& name, int64_t out, int64_t in, std::string& w,
                             std::string& b, int64_t groups) {
  w = groups > 0 ? Add(name + ".weight", {out, in / groups, 1}) : Add(name + ".weight", {out, in});
  b = Add(name + ".bias", {out});
}

void EncoderModel::AddAttention(const LayerNaming& n, LayerW& l) {
  const int64_t h = r_.hidden;
  const std::string& lp = n.prefix;
  if (r_.deberta_v1) {
    // DisentangledSelfAttention (modeling_deberta.py): its own parameters first, then in_proj.
    l.qb = Add(lp + "attention.self.q_bias", {h});
    l.vb = Add(lp + "attention.self.v_bias", {h});
    l.q = Add(lp + "attention.self.in_proj.weight", {3 * h, h});
    if (r_.relative && r_.c2p) l.pk = Add(lp + "attention.self.pos_proj.weight", {h, h});
    if (r_.relative && r_.p2c) AddLinear(lp + "attention.self.pos_q_proj", h, h, l.pq, l.pqb);
    AddLinear(lp + n.o, h, h, l.o, l.ob);
    return;
  }
  if (r_.layout == Layout::kFnet) return;
  if (r_.conv_kernel > 0) {
    AddConvAttention(lp, l);
    AddLinear(lp + n.o, h, h, l.o, l.ob);
    return;
  }
  const bool sq = r_.layout == Layout::kSqueezeBert;
  const Recipe::ConvGroups& g = r_.conv_groups;
  AddLinear(lp + n.q, h, h, l.q, l.qb, sq ? g.q : 0);
  AddLinear(lp + n.k, h, h, l.k, l.kb, sq ? g.k : 0);
  AddLinear(lp + n.v, h, h, l.v, l.vb, sq ? g.v : 0);
  if (r_.layout == Layout::kDeberta && r_.relative && !r_.share_att_key) {
    if (r_.c2p) AddLinear(lp + "attention.self.pos_key_proj", h, h, l.pk, l.pkb);
    if (r_.p2c) AddLinear(lp + "attention.self.pos_query_proj", h, h, l.pq, l.pqb);
  }
  AddLinear(lp + n.o, h, h, l.o, l.ob, sq ? g.o : 0);
}

void EncoderModel::AddLayer(const std::string& p, int64_t i) {
  const int64_t h = r_.hidden, im = r_.inter;
  const LayerNaming n = NamingOf(p, i);
  const std::string& lp = n.prefix;
  LayerW l;
  if (stack_) l.self = lp + "attention.self.";
  auto norm = [&](const std::string& name, std::string& w, std::string& b) {
    w = Add(lp + name + ".weight", {h});
    b = Add(lp + name + ".bias", {h});
  };
  AddAttention(n, l);
  if (r_.xlm_pre_norm) {  // Flaubert pre_norm: layer_norm1 / 2 feed the attention / FFN
    norm(n.ln1, l.pre1, l.pre1b);
  } else if (r_.PreLn()) {
    norm(r_.pre_attn_norm, l.pre1, l.pre1b);
    norm(r_.pre_mlp_norm, l.pre2, l.pre2b);
  } else {
    norm(n.ln1, l.ln1, l.ln1b);
  }
  const bool sq = r_.layout == Layout::kSqueezeBert;
  AddLinear(lp + n.fi, im, h, l.fi, l.fib, sq ? r_.conv_groups.fi : 0);
  AddLinear(lp + n.fo, h, im, l.fo, l.fob, sq ? r_.conv_groups.fo : 0);
  if (r_.xlm_pre_norm) {
    norm(n.ln2, l.pre2, l.pre2b);
  } else if (!r_.PreLn()) {
    norm(n.ln2, l.ln2, l.ln2b);
  }
  if (r_.adapter > 0) AddAdapter(lp, l);
  layers_.push_back(std::move(l));
}

TextHeadSpec EncoderModel::HeadSpec(const HeadNames& names, Head kind) const {
  TextHeadSpec hs;
  hs.kind = KindOf(kind);
  hs.hidden = r_.hidden;
  hs.vocab = r_.vocab;
  hs.num_labels = r_.num_labels;
  hs.norm_eps = r_.eps;
  hs.bias = true;
  const std::string pooler =
      names.pooler.empty() ? "" : (head_kind_ == Head::kBase ? "" : r_.base) + names.pooler;
  auto classify = [&](bool pooled, const std::string& dense, DenseAct act) {
    hs.first_token = true;
    if (pooled) hs.pooler = pooler;
    if (!pooled && !dense.empty()) {
      hs.dense = dense;
      hs.dense_act = DenseActivation(act, r_);
    }
  };
  switch (kind) {
    case Head::kBase:
      hs.pooler = pooler;
      break;
    case Head::kDprEncoder:
      hs.first_token = true;
      hs.pooled_only = true;
      if (r_.projection_dim > 0) {
        hs.dense = names.encode_proj;
        hs.dense_width = r_.projection_dim;
        hs.dense_linear = true;
      }
      break;
    case Head::kSeqCls:
      classify(names.seq_pooled, names.seq_dense, names.seq_act);
      hs.last_token = r_.summary_last;
      hs.name = names.seq_out;
      break;
    case Head::kMultipleChoice:
      classify(names.choice_pooled, names.choice_dense, names.choice_act);
      hs.last_token = names.choice_last || r_.summary_last;
      if (names.choice_to_labels) {
        hs.dense_width = r_.num_labels;
        hs.dense_linear = true;
      }
      hs.name = names.choice_out;
      break;
    case Head::kNextSentence:
      classify(true, "", DenseAct::kTanh);
      hs.name = "cls.seq_relationship";
      hs.num_labels = 2;
      break;
    case Head::kTokenCls:
      hs.name = "classifier";
      break;
    case Head::kQA:
      hs.name = names.qa_out;
      if (!names.qa_block.empty()) {
        hs.qa_block = names.qa_block;
        hs.name = names.qa_block + ".qa_outputs";
        hs.qa_inter = r_.inter;
        hs.qa_act = r_.act;
      }
      if (names.qa_masks_question) hs.qa_min_start = kQuestionSep + 1;
      break;
    case Head::kMaskedLM:
    case Head::kCausalLM:
    case Head::kPreTraining:
      hs.name = names.lm_bias;
      hs.tied_weight = names.lm_untied || r_.lm_untied ? "" : word_;
      hs.bias = r_.lm_bias;
      hs.transform = names.lm_dense;
      hs.transform_norm = names.lm_norm;
      hs.transform_width = r_.lm_width > 0              ? r_.lm_width
                           : names.lm_embedding_width ? r_.embedding
                                                      : r_.hidden;
      hs.transform_act = names.lm_hidden_act ? r_.act : Activation::kGeluErf;
      if (!names.lm_extra.empty()) {
        hs.lm_extra = names.lm_extra;
        hs.lm_extra_rows = r_.hidden - r_.embedding;
      }
      break;
  }
  return hs;
}

}  // namespace ts::zoo::internal::encoder
