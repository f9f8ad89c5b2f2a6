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

int64_t MaxSeq(const Recipe& r) {
  if (r.positions == Positions::kAfterPad) return std::max<int64_t>(1, r.max_pos - *r.pad - 1);
  return r.max_pos;
}

namespace {

// Heads that classify one vector per row (a family stack pools for them).
bool SequenceLevel(Head head) {
  return head == Head::kSeqCls || head == Head::kMultipleChoice || head == Head::kNextSentence;
}

}  // namespace

EncoderModel::EncoderModel(ModelSpec spec, Recipe r, const HeadNames& names, Head head)
    : Model(std::move(spec)),
      r_(std::move(r)),
      head_kind_(head),
      qa_sep_(head == Head::kQA && names.qa_masks_question ? r_.sep : -1) {
  const std::string p = head_kind_ == Head::kBase ? "" : r_.base;
  const Stack::AddFn add = [this](const std::string& n, std::vector<int64_t> s) {
    return Add(n, std::move(s));
  };
  if (r_.stack) {
    stack_ = r_.stack(r_);
    stack_->AddWeights(p, add);
    word_ = stack_->WordEmbedding();
  } else {
    AddEmbeddings(p);
  }
  // A stack's own layers, or BERT's under its embeddings (Stack::BertLayers).
  int64_t blocks = r_.layout == Layout::kAlbert ? r_.groups * r_.inner : r_.layers;
  if (stack_ && !stack_->BertLayers()) blocks = 0;
  for (int64_t i = 0; i < blocks; ++i) AddLayer(p, i);
  if (stack_) {
    stack_->AddEncoderWeights(p, add);
    stack_->AddHeadWeights(SequenceLevel(head_kind_), head_kind_ == Head::kBase, add);
  }
  if (!stack_ && !r_.final_norm.empty()) {
    final_ln_ = Add(p + r_.final_norm + ".weight", {r_.hidden});
    final_lnb_ = Add(p + r_.final_norm + ".bias", {r_.hidden});
  }
  if (stack_) head_ = stack_->FamilyHead(head_kind_, HeadSpec(names, head_kind_));
  if (head_) {
    // The family's own head (Stack::FamilyHead).
  } else if (head_kind_ == Head::kPreTraining && names.pretraining_discriminator) {
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
  const at::Tensor a_in =
      l.pre1.empty() ? x : nn::LayerNorm(x, GetWeight(w, l.pre1), GetWeight(w, l.pre1b), r_.eps);
  at::Tensor ctx =
      stack_ ? stack_->SelfAttention(w, l.self, a_in, blocked, rt.stack) : at::Tensor();
  if (!ctx.defined()) ctx = SelfAttention(w, l, a_in, blocked, rt);
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

at::Tensor EncoderModel::SelfAttention(const WeightMap& w, const LayerW& l, const at::Tensor& a_in,
                                       const at::Tensor& blocked, const RelativeTables& rt) const {
  const int64_t n = a_in.size(0), s = a_in.size(1);
  const int64_t nh = r_.heads, hd = r_.hidden / nh;
  auto heads = [&](const at::Tensor& t) { return t.view({n, s, nh, hd}).transpose(1, 2); };
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
  if (r_.layout == Layout::kDeberta) return DisentangledAttention(w, l, q, k, v, blocked, rt);
  if (!rt.bias.defined()) return nn::Attention(q, k, v, blocked, scale);
  // MPNetSelfAttention: q k^T / sqrt(d) + position_bias, then the mask, softmax, @ v.
  at::Tensor scores = nn::Matmul(q, k.transpose(-1, -2)) * scale + rt.bias;
  scores = nn::MaskBlocked(scores, blocked);
  return nn::Matmul(at::softmax(scores, -1), v);
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
                                at::Tensor types, const ExtraInputs& extra,
                                const TensorMap& inputs) const {
  const int64_t n = ids.size(0), s = ids.size(1);
  const at::Device dev = ids.device();
  // The CausalLM heads run the encoder as a decoder (is_decoder): causal self-attention.
  const bool causal = head_kind_ == Head::kCausalLM || r_.causal;
  at::Tensor x, blocked;
  RelativeTables rt;
  if (stack_ && !stack_->BertLayers()) {
    return stack_->EncodeBoxes(w, ids, mask, types, extra.bbox,
                               nn::BlockedKeys(mask, s, causal, std::nullopt, dev));
  }
  if (stack_) {  // the stack's embeddings, then the layers below (its mask first, as Encode's)
    blocked = nn::BlockedKeys(mask, s, causal, std::nullopt, dev);
    Embedded e = stack_->Embed(w, ids, mask, types, inputs);
    x = std::move(e.x);
    rt.stack = std::move(e.attn);
  } else {
    x = Embed(w, ids, mask, std::move(types), extra);
    blocked = nn::BlockedKeys(mask, s, causal, std::nullopt, dev);
  }
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
  at::Tensor h = Encode(w, ids, mask, types, extra, inputs);
  if (stack_) {
    h = stack_->HeadInput(w, SequenceLevel(head_kind_), head_kind_ == Head::kBase, ids, inputs, h,
                          mask);
  }
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
  if (r_.avoid_id >= 0) ids = ids.masked_fill(ids.eq(r_.avoid_id), (r_.avoid_id + 1) % r_.vocab);
  if (r_.pad && r_.lineage == Lineage::kGeneric)  // no stray pads
    ids = ids.masked_fill(ids.eq(*r_.pad), (*r_.pad + 1) % r_.vocab);
  // FNet takes no mask: every position is a token.
  at::Tensor mask =
      r_.no_mask || r_.unpadded_batches ? at::ones({rows, s}, lopts) : MakeAttentionMask(rows, s);
  if (qa_sep_ >= 0) {  // one question of kQuestionSep tokens, closed by the row's only sep
    ids = ids.masked_fill(ids.eq(qa_sep_), (qa_sep_ + 1) % r_.vocab);
    ids.select(1, kQuestionSep).fill_(qa_sep_);
  }
  if (r_.pad) ids = ids.masked_fill(mask.eq(0), *r_.pad);
  TensorMap stack_inputs;
  if (stack_) stack_->AddInputs(head_kind_, gen, ids, mask, stack_inputs);
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
  for (auto& [name, t] : stack_inputs) batch.inputs[name] = std::move(t);
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
  if (stack_) stack_->InitWeight(name, t);
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
