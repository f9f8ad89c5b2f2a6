#include "workers/zoo/trunks/encoder.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/encoder_decoder.h"  // T5Buckets
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

int64_t MaxSeq(const Recipe& r) {
  if (r.positions == Positions::kAfterPad) return std::max<int64_t>(1, r.max_pos - *r.pad - 1);
  return r.max_pos;
}

EncoderModel::EncoderModel(ModelSpec spec, Recipe r, const HeadNames& names, Head head)
    : Model(std::move(spec)),
      r_(std::move(r)),
      head_kind_(head),
      qa_sep_(head == Head::kQA && names.qa_masks_question ? r_.sep : -1) {
  const std::string p = head_kind_ == Head::kBase ? "" : r_.base;
  AddEmbeddings(p);
  const int64_t blocks = r_.layout == Layout::kAlbert ? r_.groups * r_.inner : r_.layers;
  for (int64_t i = 0; i < blocks; ++i) AddLayer(p, i);
  if (!r_.final_norm.empty()) {
    final_ln_ = Add(p + r_.final_norm + ".weight", {r_.hidden});
    final_lnb_ = Add(p + r_.final_norm + ".bias", {r_.hidden});
  }
  if (head_kind_ == Head::kPreTraining && names.pretraining_discriminator) {
    TextHeadSpec d = HeadSpec(names, Head::kTokenCls);
    d.name = "discriminator_predictions";
    d.dense_act = r_.act;
    head_ = MakeDiscriminatorHead(std::move(d));
  } else if (head_kind_ == Head::kPreTraining) {
    TextHeadSpec pair = HeadSpec(names, Head::kNextSentence);
    pair.name = names.pair_head;
    pair.num_labels = 2;
    head_ = MakePreTrainingHead(HeadSpec(names, Head::kMaskedLM), std::move(pair), names.pair);
  } else {
    head_ = MakeTextHead(HeadSpec(names, head_kind_));
  }
  for (auto& weight : head_->Weights()) shapes_.push_back(std::move(weight));
  for (int64_t li = 0; li < r_.layers; ++li) {
    if (r_.layout != Layout::kAlbert) {
      order_.push_back(li);
      continue;
    }
    // HF AlbertTransformer: group_idx = int(i / (num_hidden_layers / num_hidden_groups)).
    const int64_t g = li * r_.groups / r_.layers;
    for (int64_t j = 0; j < r_.inner; ++j) order_.push_back(g * r_.inner + j);
  }
  seq_len_ = std::min(RunSeqLen(this->spec().tiny_config), MaxSeq(r_));
}

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
      hs.name = "qa_outputs";
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
      hs.tied_weight = names.lm_untied ? "" : word_;
      hs.transform = names.lm_dense;
      hs.transform_norm = names.lm_norm;
      hs.transform_width = r_.lm_width > 0              ? r_.lm_width
                           : names.lm_embedding_width ? r_.embedding
                                                      : r_.hidden;
      hs.transform_act = names.lm_hidden_act ? r_.act : Activation::kGeluErf;
      break;
  }
  return hs;
}

at::Tensor EncoderModel::BertEmbed(const WeightMap& w, const at::Tensor& ids,
                                   at::Tensor types) const {
  at::Tensor pos =
      at::arange(ids.size(1), at::TensorOptions().dtype(at::kLong).device(ids.device()));
  if (!types.defined()) types = at::zeros_like(ids);
  at::Tensor h = nn::Embedding(GetWeight(w, word_), ids, r_.pad.value_or(-1)) +
                 nn::Embedding(GetWeight(w, pos_), pos) + nn::Embedding(GetWeight(w, type_), types);
  return nn::LayerNorm(h, GetWeight(w, emb_ln_), GetWeight(w, emb_lnb_), r_.eps);
}

at::Tensor EncoderModel::BoxEmbed(const WeightMap& w, const at::Tensor& bbox) const {
  auto col = [&](int64_t i) { return bbox.select(-1, i); };
  const at::Tensor x = GetWeight(w, box_x_), y = GetWeight(w, box_y_);
  // LayoutLMEmbeddings.forward: left, upper, right, lower, then h (y1 - y0) and w (x1 - x0).
  return nn::Embedding(x, col(0)) + nn::Embedding(y, col(1)) + nn::Embedding(x, col(2)) +
         nn::Embedding(y, col(3)) + nn::Embedding(GetWeight(w, box_h_), col(3) - col(1)) +
         nn::Embedding(GetWeight(w, box_w_), col(2) - col(0));
}

at::Tensor EncoderModel::Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                               at::Tensor types, const ExtraInputs& extra) const {
  const at::Tensor& bbox = extra.bbox;
  if (r_.lineage == Lineage::kBert) return BertEmbed(w, ids, std::move(types));
  const int64_t pad = r_.pad.value_or(-1);
  const bool after_pad = r_.positions == Positions::kAfterPad;
  at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, pad);
  const at::ScalarType dt = x.scalar_type();
  if (r_.rescale_embeddings) x = x * std::sqrt(static_cast<double>(r_.hidden));
  if (!map_.empty()) x = RocJoin(w, x, extra);
  if (!pos_.empty()) {
    at::Tensor pos;
    if (after_pad) {
      at::Tensor keep = ids.ne(pad).to(at::kLong);
      pos = at::cumsum(keep, 1) * keep + pad;
    } else {
      pos = at::arange(ids.size(1), at::TensorOptions().dtype(at::kLong).device(ids.device()));
    }
    x = x + nn::Embedding(GetWeight(w, pos_), pos, after_pad ? pad : -1);
  }
  if (!box_x_.empty()) {  // no bbox: transformers' zeros
    x = x + BoxEmbed(w, bbox.defined() ? bbox : at::zeros({ids.size(0), ids.size(1), 4},
                                                          ids.options()));
  }
  if (!type_.empty()) {
    if (!types.defined()) types = at::zeros_like(ids);
    x = x + nn::Embedding(GetWeight(w, type_), types);
  }
  if (!task_.empty()) x = x + nn::Embedding(GetWeight(w, task_), at::zeros_like(ids));  // task 0
  if (r_.layout == Layout::kDeberta) {
    if (!proj_.empty()) x = nn::Linear(x, GetWeight(w, proj_));
    x = nn::LayerNorm(x, GetWeight(w, emb_ln_), GetWeight(w, emb_lnb_), r_.eps);
    if (mask.defined()) x = x * mask.unsqueeze(-1).to(dt);
    return x;
  }
  if (!emb_ln_.empty()) x = nn::LayerNorm(x, GetWeight(w, emb_ln_), GetWeight(w, emb_lnb_), r_.eps);
  if (r_.shape_vocab > 0 && map_.empty()) x = RocJoin(w, x, extra);
  if (!proj_.empty()) x = nn::Linear(x, GetWeight(w, proj_), GetWeight(w, projb_));
  // XLMModel.forward: tensor *= mask.unsqueeze(-1) after the embeddings and after every layer.
  if (r_.layout == Layout::kXlm && mask.defined()) x = x * mask.unsqueeze(-1).to(dt);
  return x;
}

at::Tensor EncoderModel::Layer(const WeightMap& w, const LayerW& l, const at::Tensor& x,
                               const at::Tensor& blocked, const RelativeTables& rt) const {
  if (r_.layout == Layout::kFnet) {
    // FNetLayer: LayerNorm(x + fourier(x)), then the post-LN FFN.
    at::Tensor y = nn::LayerNorm(x + FourierReal(x), GetWeight(w, l.ln1), GetWeight(w, l.ln1b),
                                 r_.eps);
    at::Tensor f = nn::Activate(nn::Linear(y, GetWeight(w, l.fi), GetWeight(w, l.fib)), r_.act);
    return nn::LayerNorm(nn::Linear(f, GetWeight(w, l.fo), GetWeight(w, l.fob)) + y,
                         GetWeight(w, l.ln2), GetWeight(w, l.ln2b), r_.eps);
  }
  if (r_.conv_kernel > 0) return ConvBertLayer(w, l, x, blocked);
  const int64_t n = x.size(0), s = x.size(1);
  const int64_t nh = r_.heads, hd = r_.hidden / nh;
  auto heads = [&](const at::Tensor& t) { return t.view({n, s, nh, hd}).transpose(1, 2); };
  const at::Tensor a_in =
      l.pre1.empty() ? x : nn::LayerNorm(x, GetWeight(w, l.pre1), GetWeight(w, l.pre1b), r_.eps);
  at::Tensor q, k, v;
  if (r_.deberta_v1) {
    // transpose_for_scores(in_proj(x)).chunk(3, -1): head h's rows are its q, k, v in turn.
    const std::vector<at::Tensor> qkv =
        nn::Linear(a_in, GetWeight(w, l.q)).view({n, s, nh, 3 * hd}).transpose(1, 2).chunk(3, -1);
    q = qkv[0] + GetWeight(w, l.qb).view({1, nh, 1, hd});
    k = qkv[1];
    v = qkv[2] + GetWeight(w, l.vb).view({1, nh, 1, hd});
  } else if (r_.layout == Layout::kSqueezeBert) {
    const Recipe::ConvGroups& g = r_.conv_groups;
    q = heads(Project(w, a_in, l.q, l.qb, g.q));
    k = heads(Project(w, a_in, l.k, l.kb, g.k));
    v = heads(Project(w, a_in, l.v, l.vb, g.v));
  } else {
    q = heads(nn::Linear(a_in, GetWeight(w, l.q), GetWeight(w, l.qb)));
    k = heads(nn::Linear(a_in, GetWeight(w, l.k), GetWeight(w, l.kb)));
    v = heads(nn::Linear(a_in, GetWeight(w, l.v), GetWeight(w, l.vb)));
  }
  if (r_.rotary) {
    q = Rotate(w, q);
    k = Rotate(w, k);
    if (r_.rotary_value) v = Rotate(w, v);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  at::Tensor ctx;
  if (r_.layout == Layout::kDeberta) {
    ctx = DisentangledAttention(w, l, q, k, v, blocked, rt);
  } else if (rt.bias.defined()) {
    // MPNetSelfAttention: q k^T / sqrt(d) + position_bias, then the mask, softmax, @ v.
    at::Tensor scores = nn::Matmul(q, k.transpose(-1, -2)) * scale + rt.bias;
    if (blocked.defined()) {
      const double lowest = scores.scalar_type() == at::kDouble
                                ? std::numeric_limits<double>::lowest()
                                : std::numeric_limits<float>::lowest();
      scores = scores.masked_fill(blocked, lowest);
    }
    ctx = nn::Matmul(at::softmax(scores, -1), v);
  } else {
    ctx = nn::Attention(q, k, v, blocked, scale);
  }
  ctx = ctx.transpose(1, 2).reshape({n, s, r_.hidden});
  if (!l.pre1.empty()) {
    // Pre-LN: x + attn(LN(x)), then x + mlp(LN(x)).
    at::Tensor y = x + nn::Linear(ctx, GetWeight(w, l.o), GetWeight(w, l.ob));
    at::Tensor f_in = nn::LayerNorm(y, GetWeight(w, l.pre2), GetWeight(w, l.pre2b), r_.eps);
    at::Tensor f = nn::Activate(nn::Linear(f_in, GetWeight(w, l.fi), GetWeight(w, l.fib)), r_.act);
    at::Tensor z = y + nn::Linear(f, GetWeight(w, l.fo), GetWeight(w, l.fob));
    return r_.adapter > 0 ? LangAdapter(w, l, z, l.pre2, l.pre2b) : z;
  }
  if (r_.layout == Layout::kSqueezeBert) return SqueezeLayer(w, l, x, ctx);
  at::Tensor y = nn::LayerNorm(nn::Linear(ctx, GetWeight(w, l.o), GetWeight(w, l.ob)) + x,
                               GetWeight(w, l.ln1), GetWeight(w, l.ln1b), r_.eps);
  at::Tensor f = nn::Activate(nn::Linear(y, GetWeight(w, l.fi), GetWeight(w, l.fib)), r_.act);
  at::Tensor z = nn::Linear(f, GetWeight(w, l.fo), GetWeight(w, l.fob)) + y;
  if (r_.adapter > 0) z = LangAdapter(w, l, z, l.ln2, l.ln2b);
  return nn::LayerNorm(z, GetWeight(w, l.ln2), GetWeight(w, l.ln2b), r_.eps);
}

// Re(F_S X F_H) with F_m[j, k] = exp(-2 pi i jk / m): C_S X C_H - S_S X S_H, the cosine and sine
// matrices built with tensor ops on the input's device (jk reduced mod m before the angle).
at::Tensor EncoderModel::FourierReal(const at::Tensor& x) const {
  const at::ScalarType dt = x.scalar_type();
  const at::ScalarType angle_dt = dt == at::kDouble ? at::kDouble : at::kFloat;
  auto dft = [&](int64_t m) {
    const at::Tensor idx = at::arange(m, x.options().dtype(at::kLong));
    const at::Tensor jk = at::remainder(idx.unsqueeze(1) * idx.unsqueeze(0), m);
    const at::Tensor angle = jk.to(angle_dt) * (2.0 * M_PI / static_cast<double>(m));
    return std::make_pair(at::cos(angle).to(dt), at::sin(angle).to(dt));
  };
  const auto [cs, ss] = dft(x.size(1));
  const auto [ch, sh] = dft(x.size(2));
  return nn::Matmul(nn::Matmul(cs, x), ch) - nn::Matmul(nn::Matmul(ss, x), sh);
}

// sin, cos = table[:S].chunk(2); each repeated over its interleaved pair;
// x * cos + stack([-x[..., 1::2], x[..., ::2]], -1).reshape_as(x) * sin.
at::Tensor EncoderModel::Rotate(const WeightMap& w, const at::Tensor& t) const {
  const int64_t s = t.size(2), hd = t.size(3);
  const at::Tensor table = GetWeight(w, rotary_).narrow(0, 0, s).to(t.scalar_type());
  const at::Tensor sin = table.narrow(1, 0, hd / 2).repeat_interleave(2, 1);
  const at::Tensor cos = table.narrow(1, hd / 2, hd / 2).repeat_interleave(2, 1);
  const at::Tensor even = t.slice(-1, 0, hd, 2), odd = t.slice(-1, 1, hd, 2);
  return t * cos + at::stack({-odd, even}, -1).reshape_as(t) * sin;
}

at::Tensor EncoderModel::Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                                at::Tensor types, const ExtraInputs& extra) const {
  const int64_t n = ids.size(0), s = ids.size(1);
  const at::Device dev = ids.device();
  at::Tensor x = Embed(w, ids, mask, std::move(types), extra);
  // The CausalLM heads run the encoder as a decoder (is_decoder): causal self-attention.
  at::Tensor blocked = nn::BlockedKeys(mask, s, head_kind_ == Head::kCausalLM || r_.causal,
                                       std::nullopt, dev);
  RelativeTables rt;
  if (r_.layout == Layout::kDeberta) rt = MakeRelativeTables(w, mask, n, s, x.scalar_type(), dev);
  if (r_.layout == Layout::kMpnet) {
    // MPNetEncoder.compute_position_bias: relative_position_bucket(key - query) with its
    // defaults num_buckets 32, max_distance 128 (the config's count sizes only the table).
    const at::Tensor idx = T5Buckets(s, s, /*bidirectional=*/true, 32, 128, dev);
    rt.bias = nn::Embedding(GetWeight(w, mpnet_rel_), idx).permute({2, 0, 1}).unsqueeze(0);
  }
  const bool zero_pads = r_.layout == Layout::kXlm && mask.defined();
  const at::Tensor keep = zero_pads ? mask.unsqueeze(-1).to(x.scalar_type()) : at::Tensor();
  for (int64_t bi : order_) {
    x = Layer(w, layers_[static_cast<size_t>(bi)], x, blocked, rt);
    if (zero_pads) x = x * keep;
  }
  if (!final_ln_.empty())
    x = nn::LayerNorm(x, GetWeight(w, final_ln_), GetWeight(w, final_lnb_), r_.eps);
  return x;
}

std::vector<at::Tensor> EncoderModel::Forward(const WeightMap& w, const TensorMap& inputs) const {
  at::Tensor ids = GetInput(inputs, "input_ids");
  at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
  at::Tensor types = GetOptionalInput(inputs, "token_type_ids");
  ExtraInputs extra{GetOptionalInput(inputs, "bbox"), GetOptionalInput(inputs, "input_shape_ids"),
                    GetOptionalInput(inputs, "input_pronunciation_ids")};
  int64_t choices = 0;
  if (head_kind_ == Head::kMultipleChoice) {  // [B, C, S] -> [B * C, S]
    choices = ids.size(1);
    const int64_t s = ids.size(2);
    ids = ids.reshape({-1, s});
    for (at::Tensor* t : {&mask, &types, &extra.shape_ids, &extra.pron_ids})
      if (t->defined()) *t = t->reshape({-1, s});
  }
  at::Tensor h = Encode(w, ids, mask, types, extra);
  // The generic lineage viewed token 0 before every head; heads that pool it take the view.
  const TextHeadSpec& hs = head_->spec();
  if (r_.lineage == Lineage::kGeneric && !hs.first_token && hs.pooler.empty()) h.select(1, 0);
  std::vector<at::Tensor> out = head_->Forward(w, h, mask);
  if (choices > 0) out[0] = out[0].reshape({-1, choices});
  if (qa_sep_ >= 0) {  // BigBirdForQuestionAnswering.prepare_question_mask, token 0 kept
    at::Tensor len = ids.eq(qa_sep_).to(at::kInt).argmax(-1, /*keepdim=*/true) + 1;
    at::Tensor pos = at::arange(ids.size(1), ids.options()).unsqueeze(0);
    at::Tensor question = at::logical_and(pos.lt(len), pos.ne(0));
    for (at::Tensor& o : out) o = o - question.to(o.scalar_type()) * 1e6;
  }
  return out;
}

at::Tensor EncoderModel::Loss(const WeightMap& w, const Batch& batch) const {
  return head_->Loss(Forward(w, batch.inputs), batch.labels);
}

Batch EncoderModel::MakeBatch(uint64_t seed, int64_t batch_size) const {
  if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto lopts = at::TensorOptions().dtype(at::kLong);
  const int64_t s = seq_len_;
  const bool choice = head_kind_ == Head::kMultipleChoice;
  const int64_t rows = choice ? batch_size * kNumChoices : batch_size;
  at::Tensor ids = at::randint(0, r_.vocab, {rows, s}, gen, lopts);
  if (r_.pad && r_.lineage == Lineage::kGeneric)  // no stray pads
    ids = ids.masked_fill(ids.eq(*r_.pad), (*r_.pad + 1) % r_.vocab);
  // FNet takes no mask: every position is a token.
  at::Tensor mask = r_.no_mask ? at::ones({rows, s}, lopts) : MakeAttentionMask(rows, s);
  if (qa_sep_ >= 0) {  // one question of kQuestionSep tokens, closed by the row's only sep
    ids = ids.masked_fill(ids.eq(qa_sep_), (qa_sep_ + 1) % r_.vocab);
    ids.select(1, kQuestionSep).fill_(qa_sep_);
  }
  if (r_.pad) ids = ids.masked_fill(mask.eq(0), *r_.pad);
  at::Tensor types = at::zeros({rows, s}, lopts);
  if (r_.type_vocab >= 2) types.narrow(1, s / 2, s - s / 2).fill_(1);
  auto shaped = [&](const at::Tensor& t) {
    return choice ? t.view({batch_size, kNumChoices, s}) : t;
  };
  Batch batch;
  batch.inputs["input_ids"] = shaped(ids);
  if (!r_.no_mask) batch.inputs["attention_mask"] = shaped(mask);
  if (r_.type_vocab > 0) batch.inputs["token_type_ids"] = shaped(types);
  if (r_.shape_vocab > 0) {
    ExtraInputs roc;
    AddRocInputs(gen, rows, s, mask, roc);
    batch.inputs["input_shape_ids"] = shaped(roc.shape_ids);
    batch.inputs["input_pronunciation_ids"] = shaped(roc.pron_ids);
  }
  if (r_.max_2d > 0) {
    // LayoutLM boxes (x0, y0, x1, y1) with x0 <= x1 and y0 <= y1 inside the 2D tables, padding
    // boxes [0, 0, 0, 0] as its tokenizers pad them.
    const int64_t half = std::max<int64_t>(1, r_.max_2d / 2);
    at::Tensor lo = at::randint(0, half, {rows, s, 2}, gen, lopts);
    at::Tensor box = at::cat({lo, lo + at::randint(0, half, {rows, s, 2}, gen, lopts)}, -1);
    batch.inputs["bbox"] = box.masked_fill(mask.eq(0).unsqueeze(-1), 0);  // no choice heads
  }
  head_->AddLabels(gen, shaped(ids), shaped(mask), batch.labels);
  return batch;
}

void EncoderModel::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  // The base policy spots norms by "norm" in the name: "roberta_prelayernorm." is no norm.
  const std::string pre = "roberta_prelayernorm.";
  Model::InitWeight(name.rfind(pre, 0) == 0 ? name.substr(pre.size()) : name, t, gen);
  if (name == rotary_) {  // RoFormerSinusoidalPositionalEmbedding.create_weight
    t.copy_(nn::SinusoidHalvesTable(t.size(0), t.size(1)));
    return;
  }
  const bool pos_pad = r_.positions == Positions::kAfterPad && name == pos_;
  // nn.Embedding(padding_idx=pad_token_id): RoCBert's shape and pronunciation tables too.
  const bool roc = name == shape_ || name == pron_;  // never "" (names are non-empty)
  if (r_.pad && (name == word_ || pos_pad || roc)) t[*r_.pad].zero_();
}

StatusOr<std::unique_ptr<Model>> BuildEncoderModel(ModelSpec spec, Recipe recipe,
                                                   const HeadNames& names, Head head) {
  if ((head == Head::kSeqCls || head == Head::kMultipleChoice) && !recipe.summary_error.empty())
    return InvalidArgumentError(recipe.summary_error);
  const bool lm = head == Head::kMaskedLM || head == Head::kPreTraining || head == Head::kCausalLM;
  if (lm && !recipe.lm_error.empty()) return InvalidArgumentError(recipe.lm_error);
  return std::unique_ptr<Model>(
      std::make_unique<EncoderModel>(std::move(spec), std::move(recipe), names, head));
}

}  // namespace ts::zoo::internal::encoder
