// The decoder trunk: weights from the recipe, the block loop, norms and MLPs, batches
// (decoder.h). Attention and positions are in decoder_attention.cc.
#include "workers/zoo/trunks/decoder.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/decoder_model.h"

namespace ts::zoo::internal::decoder {

DecoderModel::DecoderModel(ModelSpec spec, Recipe c, TextHeadKind head)
    : Model(std::move(spec)), c_(std::move(c)) {
  const Names& n = c_.n;
  const std::string base = head == TextHeadKind::kBase ? n.model_base : n.head_base;
  embed_ = Add(base + n.embed + ".weight", {c_.vocab, c_.hidden});
  if (c_.pos == Pos::kLearned)
    pos_ = Add(base + n.pos + ".weight", {c_.max_pos + c_.pos_offset, c_.hidden});
  if (!n.emb_ln.empty()) AddNorm(base + n.emb_ln, c_.hidden, emb_lnw_, emb_lnb_, Norm::kLayerNorm);
  for (int64_t i = 0; i < c_.layers; ++i) {
    AddLayer(base + n.layers + std::to_string(i) + ".", static_cast<size_t>(i));
  }
  if (!n.final_norm.empty()) AddNorm(base + n.final_norm, c_.hidden, final_w_, final_b_, c_.norm);
  TextHeadSpec hs = HeadSpec(head);
  if (head != TextHeadKind::kBase)
    head_weight_ = hs.tied_weight.empty() ? hs.name + ".weight" : hs.tied_weight;
  head_ = MakeTextHead(std::move(hs));
  for (auto& weight : head_->Weights()) shapes_.push_back(std::move(weight));
  seq_len_ = RunSeqLen(this->spec().tiny_config);
  if (!c_.classic) seq_len_ = std::min(seq_len_, c_.max_pos);
}

TextHeadSpec DecoderModel::HeadSpec(TextHeadKind head) const {
  TextHeadSpec h;
  h.kind = head;
  h.hidden = c_.hidden;
  h.vocab = c_.vocab;
  h.num_labels = c_.num_labels;
  switch (head) {
    case TextHeadKind::kCausalLM:
      h.name = c_.n.lm_head;
      h.bias = c_.lm_head_bias;
      if (c_.tie) h.tied_weight = embed_;
      h.logit_mult = c_.logit_mult;
      h.final_softcap = c_.final_softcap;
      break;
    case TextHeadKind::kSequenceClassification:
      h.name = c_.n.seq_cls;
      h.bias = c_.seq_cls_bias;
      h.cast_mask_first = !c_.classic;
      break;
    case TextHeadKind::kTokenClassification:
      h.name = c_.n.token_cls;
      h.bias = c_.token_cls_bias;
      break;
    case TextHeadKind::kQuestionAnswering:
      h.name = "qa_outputs";
      h.bias = true;
      break;
    case TextHeadKind::kBase:
    case TextHeadKind::kMaskedLM:  // encoder heads
    case TextHeadKind::kMultipleChoice:
      break;
  }
  return h;
}

std::string DecoderModel::Add(const std::string& name, std::vector<int64_t> shape) {
  shapes_.emplace_back(name, std::move(shape));
  return name;
}

void DecoderModel::AddNorm(const std::string& prefix, int64_t width, std::string& w,
                           std::string& b, Norm kind) {
  if (kind == Norm::kNonParam || kind == Norm::kRmsNoWeight) return;
  w = Add(prefix + ".weight", {width});
  if (!c_.classic) {  // classic norms are initialised by name (Model::InitWeight)
    (kind == Norm::kGemmaRms || kind == Norm::kLayerNorm1P ? zeros_ : ones_).push_back(w);
  }
  if (kind == Norm::kLayerNorm || kind == Norm::kLayerNorm1P) b = Add(prefix + ".bias", {width});
}

void DecoderModel::AddAttention(const std::string& a, LayerW& l) {
  if (c_.mla.kv_lora > 0) return AddMla(a, l);
  const int64_t h = c_.hidden, hd = c_.head_dim;
  const int64_t q_out = c_.heads * hd, kv_out = c_.kv * hd;
  const Names& n = c_.n;
  auto lin = [&](const std::string& name, int64_t out, int64_t in, bool bias, std::string& w,
                 std::string& b) {
    w = Add(a + name + ".weight", c_.conv1d ? std::vector<int64_t>{in, out}
                                             : std::vector<int64_t>{out, in});
    if (bias) b = Add(a + name + ".bias", {out});
  };
  switch (c_.qkv) {
    case Qkv::kSeparate:
      lin(n.q, q_out, h, c_.q_bias, l.q, l.qb);
      lin(n.k, kv_out, h, c_.k_bias, l.k, l.kb);
      lin(n.v, kv_out, h, c_.v_bias, l.v, l.vb);
      break;
    case Qkv::kFused:
    case Qkv::kGrouped:
      lin(n.qkv, q_out + 2 * kv_out, h, c_.q_bias, l.qkv, l.qkvb);
      break;
    case Qkv::kPerHead:
    case Qkv::kCodeGen:
    case Qkv::kPerHeadNarrow:
      lin(n.qkv, 3 * q_out, h, c_.q_bias, l.qkv, l.qkvb);
      break;
  }
  switch (c_.qk_norm) {
    case QkNorm::kNone:
      break;
    case QkNorm::kPerHeadRms:
    case QkNorm::kPerHeadGemma:
      l.qnw = Add(a + n.qn + ".weight", {hd});
      l.knw = Add(a + n.kn + ".weight", {hd});
      break;
    case QkNorm::kPerHeadLayerNorm:
      AddNorm(a + n.qn, hd, l.qnw, l.qnb, Norm::kLayerNorm);
      AddNorm(a + n.kn, hd, l.knw, l.knb, Norm::kLayerNorm);
      break;
    case QkNorm::kFullRms:
      l.qnw = Add(a + n.qn + ".weight", {q_out});
      l.knw = Add(a + n.kn + ".weight", {kv_out});
      break;
    case QkNorm::kPerHeadRmsNoWeight:
      break;
  }
  lin(n.o, h, q_out, c_.o_bias, l.o, l.ob);
  if (!n.attn_sub.empty()) {
    std::string unused_bias;
    AddNorm(a + n.attn_sub, q_out, l.attn_sub, unused_bias, Norm::kRms);
  }
  if (c_.attn_sinks) l.sinks = Add(a + "sinks", {c_.heads});
  if (c_.attn_out_gate) l.attn_gate = Add(a + n.attn_gate + ".weight", {q_out, h});
  if (c_.diff_attn) {
    l.lq1 = Add(a + "lambda_q1", {hd});
    l.lk1 = Add(a + "lambda_k1", {hd});
    l.lq2 = Add(a + "lambda_q2", {hd});
    l.lk2 = Add(a + "lambda_k2", {hd});
  }
}

void DecoderModel::AddMlp(const std::string& m, LayerW& l) {
  const int64_t h = c_.hidden, im = c_.inter;
  const Names& n = c_.n;
  auto mlin = [&](const std::string& name, int64_t out, int64_t in, std::string& w,
                  std::string& b) {
    w = Add(m + name + ".weight", c_.conv1d ? std::vector<int64_t>{in, out}
                                             : std::vector<int64_t>{out, in});
    if (c_.mlp_bias) b = Add(m + name + ".bias", {out});
  };
  switch (c_.mlp) {
    case Mlp::kGated:
      mlin(n.gate, im, h, l.gate, l.gate_b);
      mlin(n.up, im, h, l.up, l.up_b);
      mlin(n.down, h, im, l.down, l.down_b);
      if (!n.ffn_sub.empty()) {
        std::string unused_bias;
        AddNorm(m + n.ffn_sub, im, l.ffn_sub, unused_bias, Norm::kRms);
      }
      break;
    case Mlp::kFusedGateUp:
      mlin("gate_up_proj", 2 * im, h, l.up, l.up_b);
      mlin(n.down, h, im, l.down, l.down_b);
      break;
    case Mlp::kPlain:
      mlin(n.up, im, h, l.up, l.up_b);
      mlin(n.down, h, im, l.down, l.down_b);
      if (c_.act.xielu) {
        l.xielu_p = Add(m + "act_fn.alpha_p", {1});
        l.xielu_n = Add(m + "act_fn.alpha_n", {1});
      }
      break;
  }
}

void DecoderModel::AddLayer(const std::string& p, size_t index) {
  const int64_t h = c_.hidden;
  const Names& n = c_.n;
  LayerW l;
  if (!n.ln1.empty()) AddNorm(p + n.ln1, h, l.n1w, l.n1b, c_.norm);
  if (!c_.conv_layers.empty() && c_.conv_layers[index]) {
    AddShortConv(p + "conv.", l);
  } else {
    AddAttention(p + n.attn, l);
  }
  if (c_.o_bias_last_layer && static_cast<int64_t>(index) == c_.layers - 1)
    l.ob = Add(p + n.attn + "dense_bias", {h});
  const bool post = c_.block == Block::kPost || c_.block == Block::kSandwich;
  if (post && c_.sandwich_post_first) AddNorm(p + n.post1, h, l.p1w, l.p1b, c_.norm);
  if (c_.block == Block::kPre || c_.block == Block::kParallel2 || c_.block == Block::kSandwich ||
      c_.block == Block::kPostLn) {
    if (!n.ln2.empty()) AddNorm(p + n.ln2, h, l.n2w, l.n2b, c_.norm);
  }
  if (post) {
    if (!c_.sandwich_post_first) AddNorm(p + n.post1, h, l.p1w, l.p1b, c_.norm);
    AddNorm(p + n.post2, h, l.p2w, l.p2b, c_.norm);
  }
  if (c_.moe.experts > 0 && c_.moe.sparse[index]) {
    AddMoe(p, l);
  } else {
    AddMlp(p + n.mlp, l);
  }
  l.window = c_.window[index];
  l.rope = c_.pos == Pos::kRotary && c_.rope_on[index];
  l.rope_local = c_.rope_local_on[index];
  if (c_.attn_scale_by_layer) l.attn_div = static_cast<double>(index + 1);
  if (c_.diff_attn) l.lambda_init = 0.8 - 0.6 * std::exp(-0.3 * static_cast<double>(index));
  layers_.push_back(std::move(l));
}

at::Tensor DecoderModel::Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                               at::Tensor& pos) const {
  const auto lopts = at::TensorOptions().dtype(at::kLong).device(ids.device());
  at::Tensor x =
      nn::Embedding(GetWeight(w, embed_), ids, c_.embed_padding_idx ? c_.pad.value_or(-1) : -1);
  if (c_.classic) {
    pos = at::arange(ids.size(1), lopts);
    // HF: normalizer = tensor(hidden_size ** 0.5, dtype=hidden.dtype).
    if (c_.embed_scale != 1.0) x = x * c_.embed_scale;
    if (!pos_.empty()) x = x + nn::Embedding(GetWeight(w, pos_), pos);
    return x;
  }
  if (c_.embed_scale != 1.0) x = x * c_.embed_scale;
  if (!emb_lnw_.empty())
    x = nn::LayerNorm(x, GetWeight(w, emb_lnw_), GetWeight(w, emb_lnb_), c_.eps);
  pos = at::arange(ids.size(1), lopts);
  if (c_.pos == Pos::kLearned) {
    at::Tensor p = pos;
    if (c_.pos_from_mask && mask.defined()) {
      at::Tensor m = mask.to(at::kLong);
      p = at::cumsum(m, 1) * m - 1;  // OPT / BioGPT: padding positions become -1
    }
    x = x + nn::Embedding(GetWeight(w, pos_), p + c_.pos_offset);
  } else if (c_.pos == Pos::kSinusoidal) {
    x = x + Sinusoid(pos + c_.pos_offset, x.scalar_type());
  }
  return x;
}

at::Tensor DecoderModel::Block(const WeightMap& w, const LayerW& l, const at::Tensor& in,
                               const LayerContext& ctx, const at::Tensor& blocked) const {
  const at::Tensor& lc = l.rope_local ? ctx.cos_local : ctx.cos;
  const at::Tensor& ls = l.rope_local ? ctx.sin_local : ctx.sin;
  auto attn = [&](const at::Tensor& t) {
    if (l.conv) return ShortConv(w, l, t, ctx.mask);
    return Attn(w, l, t, lc, ls, ctx.alibi, blocked, ctx.b, ctx.s);
  };
  at::Tensor x = in;
  switch (c_.block) {
    case Block::kPre: {
      at::Tensor a = attn(NormOpt(w, x, l.n1w, l.n1b));
      x = x + a * c_.residual_mult;
      return x + Mlp(w, l, NormOpt(w, x, l.n2w, l.n2b)) * c_.residual_mult;
    }
    case Block::kParallel1: {
      at::Tensor t = NormOpt(w, x, l.n1w, l.n1b);
      return x + attn(t) + Mlp(w, l, t);
    }
    case Block::kParallel2:
      return x + attn(NormOpt(w, x, l.n1w, l.n1b)) + Mlp(w, l, NormOpt(w, x, l.n2w, l.n2b));
    case Block::kPost:
      x = x + NormOpt(w, attn(x), l.p1w, l.p1b);
      return x + NormOpt(w, Mlp(w, l, x), l.p2w, l.p2b);
    case Block::kSandwich:
      x = x + NormOpt(w, attn(NormOpt(w, x, l.n1w, l.n1b)), l.p1w, l.p1b);
      return x + NormOpt(w, Mlp(w, l, NormOpt(w, x, l.n2w, l.n2b)), l.p2w, l.p2b);
    case Block::kPostLn:
      x = NormOpt(w, x + attn(x), l.n1w, l.n1b);
      return NormOpt(w, x + Mlp(w, l, x), l.n2w, l.n2b);
  }
  return x;
}

at::Tensor DecoderModel::ClassicBlock(const WeightMap& w, const LayerW& l, const at::Tensor& in,
                                      const LayerContext& ctx, const at::Tensor& blocked) const {
  auto attn = [&](const at::Tensor& t) {
    return ClassicAttn(w, l, t, ctx.cos, ctx.sin, blocked, ctx.b, ctx.s);
  };
  at::Tensor h = in;
  if (c_.block == Block::kPostLn) {  // OpenAIGPT Block: n = ln_1(x + a); h = ln_2(n + m)
    at::Tensor n = NormOpt(w, h + attn(h), l.n1w, l.n1b);
    return NormOpt(w, n + Mlp(w, l, n), l.n2w, l.n2b);
  }
  if (c_.block == Block::kParallel1) {
    at::Tensor x = NormOpt(w, h, l.n1w, l.n1b);
    return h + attn(x) + Mlp(w, l, x);
  }
  if (c_.block == Block::kParallel2) {
    at::Tensor a = attn(NormOpt(w, h, l.n1w, l.n1b));
    return h + a + Mlp(w, l, NormOpt(w, h, l.n2w, l.n2b));
  }
  at::Tensor a = attn(NormOpt(w, h, l.n1w, l.n1b));
  a = NormOpt(w, a, l.p1w, l.p1b);
  h = h + a;
  at::Tensor m = Mlp(w, l, NormOpt(w, h, l.n2w, l.n2b));
  m = NormOpt(w, m, l.p2w, l.p2b);
  return h + m;
}

std::vector<at::Tensor> DecoderModel::Forward(const WeightMap& w, const TensorMap& inputs) const {
  const at::Tensor& ids = GetInput(inputs, "input_ids");
  at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
  LayerContext ctx;
  ctx.b = ids.size(0);
  ctx.s = ids.size(1);
  const at::Device dev = ids.device();
  at::Tensor pos;
  at::Tensor x = Embed(w, ids, mask, pos);
  if (c_.image_token) {
    const at::Tensor image = GetOptionalInput(inputs, "image_embeds");
    if (image.defined()) {
      x = x.masked_scatter(ids.eq(*c_.image_token).unsqueeze(-1).expand_as(x),
                           image.to(x.scalar_type()));
    }
  }
  if (c_.embed_norm) x = NormOpt(w, x, final_w_, final_b_);
  const at::ScalarType dt = x.scalar_type();
  if (c_.pos == Pos::kRotary && c_.longrope.on) {
    std::tie(ctx.cos, ctx.sin) = LongRopeTables(pos, ctx.s, dt);
  } else if (c_.pos == Pos::kRotary) {
    std::tie(ctx.cos, ctx.sin) = Tables(c_.rope, pos, dt);
    for (const LayerW& l : layers_)
      if (l.rope_local && !ctx.cos_local.defined())
        std::tie(ctx.cos_local, ctx.sin_local) = Tables(c_.rope_local, pos, dt);
  }
  ctx.alibi = AlibiBias(mask, ctx.b, ctx.s, dev, dt);
  ctx.mask = mask;
  // One mask per distinct window, shared across layers.
  at::Tensor blocked_full, blocked_window;
  for (const LayerW& l : layers_) {
    at::Tensor& blocked = l.window ? blocked_window : blocked_full;
    if (!blocked.defined()) blocked = nn::BlockedKeys(mask, ctx.s, /*causal=*/true, l.window, dev);
    x = c_.classic ? ClassicBlock(w, l, x, ctx, blocked) : Block(w, l, x, ctx, blocked);
  }
  x = NormOpt(w, x, final_w_, final_b_);
  return head_->Forward(w, x, mask);
}

at::Tensor DecoderModel::Loss(const WeightMap& w, const Batch& batch) const {
  return head_->Loss(Forward(w, batch.inputs), batch.labels);
}

Batch DecoderModel::MakeBatch(uint64_t seed, int64_t batch_size) const {
  if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto lopts = at::TensorOptions().dtype(at::kLong);
  at::Tensor ids = at::randint(0, c_.vocab, {batch_size, seq_len_}, gen, lopts);
  at::Tensor mask = MakeAttentionMask(batch_size, seq_len_);
  if (c_.pad) ids = ids.masked_fill(mask.eq(0), *c_.pad);
  Batch batch;
  batch.inputs["input_ids"] = ids;
  batch.inputs["attention_mask"] = mask;
  head_->AddLabels(gen, ids, mask, batch.labels);
  return batch;
}

void DecoderModel::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  if (c_.conv1d && t.dim() == 2 && name != embed_ && name != pos_ && name != head_weight_) {
    // GPT-2 Conv1D weights are stored [in, out]: fan_in is the first dimension.
    const double range = c_.init_range;
    const double std = std::max(range, 1.0 / std::sqrt(static_cast<double>(t.size(0))));
    t.normal_(0.0, std, gen);
    return;
  }
  if (std::find(ones_.begin(), ones_.end(), name) != ones_.end()) {
    t.fill_(1.0);
    return;
  }
  if (std::find(zeros_.begin(), zeros_.end(), name) != zeros_.end()) {
    t.zero_();  // (1 + w) norms (Gemma, LayerNorm1P): HF initialises w to 0
    return;
  }
  Model::InitWeight(name, t, gen);
  if (name == embed_ && c_.pad && c_.embed_padding_idx) t[*c_.pad].zero_();
}

at::Tensor DecoderModel::NormOpt(const WeightMap& w, const at::Tensor& x, const std::string& wn,
                                 const std::string& bn) const {
  return NormAs(c_.norm, w, x, wn, bn, x.size(-1));
}

at::Tensor DecoderModel::NormAs(Norm kind, const WeightMap& w, const at::Tensor& x,
                                const std::string& wn, const std::string& bn,
                                int64_t width) const {
  if (kind == Norm::kNonParam) return at::layer_norm(x, {width}, {}, {}, c_.eps);
  if (kind == Norm::kRmsNoWeight) return x * at::rsqrt(x.pow(2).mean(-1, true) + c_.eps);
  if (wn.empty()) return x;
  switch (kind) {
    case Norm::kRms:
      return nn::RmsNorm(x, GetWeight(w, wn), c_.eps);
    case Norm::kGemmaRms: {
      at::Tensor var = x.pow(2).mean(-1, /*keepdim=*/true);
      return (x * at::rsqrt(var + c_.eps)) * (1.0 + GetWeight(w, wn));
    }
    case Norm::kLayerNorm:
    case Norm::kLayerNormNoBias:
      return nn::LayerNorm(x, GetWeight(w, wn), GetOptionalWeight(w, bn), c_.eps);
    case Norm::kLayerNorm1P:
      return nn::LayerNorm(x, GetWeight(w, wn) + 1.0, GetOptionalWeight(w, bn), c_.eps);
    case Norm::kNonParam:
    case Norm::kRmsNoWeight:
      break;
  }
  return x;
}

at::Tensor DecoderModel::Activate(const at::Tensor& x) const {
  at::Tensor y = nn::Activate(x, c_.act.a);
  return c_.act.relu2 ? y * y : y;
}

at::Tensor DecoderModel::Xielu(const WeightMap& w, const LayerW& l, const at::Tensor& x) const {
  constexpr double kBeta = 0.5, kEps = -1e-6;  // XIELUActivation's defaults (buffers)
  at::Tensor ap = at::softplus(GetWeight(w, l.xielu_p));
  at::Tensor an = at::softplus(GetWeight(w, l.xielu_n)) + kBeta;
  at::Tensor pos = ap * x * x + x * kBeta;
  at::Tensor neg = (at::expm1(at::clamp_max(x, kEps)) - x) * an + x * kBeta;
  return at::where(x > 0, pos, neg);
}

at::Tensor DecoderModel::Proj(const WeightMap& w, const at::Tensor& x, const std::string& wn,
                              const std::string& bn) const {
  const at::Tensor& weight = GetWeight(w, wn);
  return nn::Linear(x, c_.conv1d ? weight.t() : weight, GetOptionalWeight(w, bn));
}

at::Tensor DecoderModel::Mlp(const WeightMap& w, const LayerW& l, const at::Tensor& x) const {
  auto lin = [&](const at::Tensor& in, const std::string& wn, const std::string& bn) {
    return nn::Linear(in, GetWeight(w, wn), GetOptionalWeight(w, bn));
  };
  if (l.moe) return MoeMlp(w, l, x);
  if (c_.classic) {
    if (c_.mlp == Mlp::kGated)
      return Gated(w, x, Expert{l.gate, l.up, l.down, l.gate_b, l.up_b, l.down_b});
    if (c_.mlp == Mlp::kPlain)
      return Proj(w, nn::Activate(Proj(w, x, l.up, l.up_b), c_.act.a), l.down, l.down_b);
  }
  switch (c_.mlp) {
    case Mlp::kGated:
      if (!l.ffn_sub.empty()) {
        at::Tensor h = Activate(lin(x, l.gate, l.gate_b)) * lin(x, l.up, l.up_b);
        return lin(NormAs(Norm::kRms, w, h, l.ffn_sub, "", c_.inter), l.down, l.down_b);
      }
      return lin(Activate(lin(x, l.gate, l.gate_b)) * lin(x, l.up, l.up_b), l.down, l.down_b);
    case Mlp::kFusedGateUp: {
      at::Tensor gu = lin(x, l.up, l.up_b);
      const int64_t im = c_.inter;
      return lin(gu.narrow(-1, im, im) * Activate(gu.narrow(-1, 0, im)), l.down, l.down_b);
    }
    case Mlp::kPlain:
      if (!l.xielu_p.empty()) return lin(Xielu(w, l, lin(x, l.up, l.up_b)), l.down, l.down_b);
      return lin(Activate(lin(x, l.up, l.up_b)), l.down, l.down_b);
  }
  return x;
}

StatusOr<std::unique_ptr<Model>> BuildDecoderModel(ModelSpec spec, Recipe recipe,
                                                   TextHeadKind head) {
  return std::unique_ptr<Model>(
      std::make_unique<DecoderModel>(std::move(spec), std::move(recipe), head));
}

}  // namespace ts::zoo::internal::decoder
