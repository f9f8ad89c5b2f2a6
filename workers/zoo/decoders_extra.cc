// Zoo: more decoder-only families over one recipe-driven decoder (README.md):
//   llama-like   helium, ministral, arcee (ReLU^2 MLP), seed_oss, smollm3 (NoPE layers), glm and
//                glm4 (fused gate_up, partial interleaved rotary, glm4 sandwich norms), ernie4_5
//                (interleaved rotary), granite (embedding/attention/residual/logit multipliers),
//                olmo (non-parametric LayerNorm, clip_qkv), nemotron (LayerNorm1P, ReLU^2, partial
//                rotary), exaone4 (post-norm, q/k norms, NoPE full layers), gemma3_text (sandwich
//                Gemma norms, q/k norms, local/global rotary bases, 5:1 sliding pattern),
//                cohere / cohere2 (parallel block, interleaved rotary, logit_scale; cohere2 NoPE
//                full layers)
//   others       persimmon (per-head fused qkv, q/k LayerNorm, ReLU^2), gptj and codegen
//                (parallel block, partial interleaved rotary; codegen's mp_num=4 qkv layout),
//                falcon (fused MQA/GQA qkv, parallel attention, rotary or ALiBi), bloom (ALiBi from
//                the mask's cumsum, embedding LayerNorm), mpt (ALiBi, no biases, clip_qkv), opt
//                (learned positions from the mask's cumsum with offset 2, ReLU), gpt_neo (learned
//                positions, unscaled attention, alternating global/local windows), xglm (scaled
//                embeddings, sinusoidal positions with offset 2), biogpt (scaled embeddings,
//                learned positions with offset 2)
// Heads: CausalLM, SequenceClassification (last attended token), TokenClassification,
// QuestionAnswering and the base Model, where transformers has them.
//
// Each family parses its config.json into a Recipe (sizes, kinds, per-layer pattern and the
// HF state_dict names); one Model class runs every recipe.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "workers/zoo/decoders_extra_internal.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::dextra {

using P = TinyProfile;

// ---- Tiny scaling (README.md policy), shared by every family.

int64_t TinyLayers(const Recipe& c) {
  return TinyDepth(c.layers, VariesByLayer(c.window) || VariesByLayer(c.rope_on) ||
                                 VariesByLayer(c.rope_local_on));
}

std::vector<bool> TinyPattern(const std::vector<bool>& real, const Recipe& real_recipe) {
  std::vector<bool> t(static_cast<size_t>(TinyLayers(real_recipe)), real.empty() ? false : real[0]);
  for (bool b : real)
    if (t.size() > 1 && b != real[0]) t[1] = b;
  return t;
}

StatusOr<json> Scale(const Family& fam, const json& real_in) {
  const json real = Normalize(fam, real_in);
  TS_ASSIGN_OR_RETURN(Recipe c, fam.parse(real));
  const Fields& f = fam.f;
  json t = real;
  const TinyAttention a = TinyAttentionShape(c.heads, c.kv);
  const int64_t heads = a.heads, kv = a.kv_heads, head_dim = a.head_dim, hidden = a.hidden;
  t[f.hidden] = hidden;
  t[f.heads] = heads;
  if (!f.kv.empty() && (real.contains(f.kv) || kv != heads)) t[f.kv] = kv;
  if (!f.head_dim.empty()) t[f.head_dim] = head_dim;
  if (!f.inter.empty() && real.contains(f.inter) && !real[f.inter].is_null()) {
    t[f.inter] = ScaleRatio(c.inter, c.hidden, hidden, 8);
  }
  const int64_t layers = TinyLayers(c);
  t[f.layers] = layers;
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t[f.vocab] = vocab;
  for (const char* fld : {"pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"})
    MapTokenId(t, fld, vocab);
  const bool dynamic = c.pos == Pos::kRotary && c.rope.kind == RopeKind::kDynamic;
  const int64_t max_pos = dynamic ? P::kDynamicPositions : P::kMaxPositions;
  if (!f.max_pos.empty()) t[f.max_pos] = max_pos;
  if (fam.model_type == "gptj" || fam.model_type == "codegen") t["n_ctx"] = max_pos;
  if (t.contains("rope_scaling") && t["rope_scaling"].is_object()) {
    json& rs = t["rope_scaling"];
    if (rs.contains("original_max_position_embeddings")) {
      if (dynamic) {
        rs["original_max_position_embeddings"] = max_pos;
      } else {
        const int64_t orig =
            ScaleRatio(c.rope.original_max_position_embeddings, c.max_pos, max_pos, 1);
        rs["original_max_position_embeddings"] = std::clamp<int64_t>(orig, P::kSeqLen / 2, max_pos);
      }
    }
  }
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, P::kSeqLen);
  if (fam.scale_extra) fam.scale_extra(real, c, t);
  TS_RETURN_IF_ERROR(fam.parse(t).status());  // the tiny config must build
  return t;
}

// ---- The model.

namespace {

struct LayerW {
  std::string n1w, n1b, n2w, n2b, p1w, p1b, p2w, p2b;
  std::string q, qb, k, kb, v, vb, qkv, qkvb, o, ob, qnw, qnb, knw, knb;
  std::string gate, gate_b, up, up_b, down, down_b;
  std::optional<int64_t> window;
  bool rope = true, rope_local = false;
};

class RecipeModel : public Model {
 public:
  RecipeModel(ModelSpec spec, Recipe c, Head head)
      : Model(std::move(spec)), c_(std::move(c)), head_(head) {
    const int64_t h = c_.hidden, hd = c_.head_dim, im = c_.inter;
    const int64_t q_out = c_.heads * hd, kv_out = c_.kv * hd;
    const Names& n = c_.n;
    const std::string base = head_ == Head::kBase ? n.model_base : n.head_base;
    embed_ = Add(base + n.embed + ".weight", {c_.vocab, h});
    if (c_.pos == Pos::kLearned)
      pos_ = Add(base + n.pos + ".weight", {c_.max_pos + c_.pos_offset, h});
    if (!n.emb_ln.empty()) AddNorm(base + n.emb_ln, h, emb_lnw_, emb_lnb_, Norm::kLayerNorm);
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string p = base + n.layers + std::to_string(i) + ".";
      LayerW l;
      if (!n.ln1.empty()) AddNorm(p + n.ln1, h, l.n1w, l.n1b, c_.norm);
      const std::string a = p + n.attn;
      auto lin = [&](const std::string& name, int64_t out, int64_t in, bool bias, std::string& w,
                     std::string& b) {
        w = Add(a + name + ".weight", {out, in});
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
      }
      lin(n.o, h, q_out, c_.o_bias, l.o, l.ob);
      if (c_.block == Block::kPre || c_.block == Block::kParallel2 ||
          c_.block == Block::kSandwich) {
        if (!n.ln2.empty()) AddNorm(p + n.ln2, h, l.n2w, l.n2b, c_.norm);
      }
      if (c_.block == Block::kPost || c_.block == Block::kSandwich) {
        AddNorm(p + n.post1, h, l.p1w, l.p1b, c_.norm);
        AddNorm(p + n.post2, h, l.p2w, l.p2b, c_.norm);
      }
      const std::string m = p + n.mlp;
      auto mlin = [&](const std::string& name, int64_t out, int64_t in, std::string& w,
                      std::string& b) {
        w = Add(m + name + ".weight", {out, in});
        if (c_.mlp_bias) b = Add(m + name + ".bias", {out});
      };
      switch (c_.mlp) {
        case Mlp::kGated:
          mlin(n.gate, im, h, l.gate, l.gate_b);
          mlin(n.up, im, h, l.up, l.up_b);
          mlin(n.down, h, im, l.down, l.down_b);
          break;
        case Mlp::kFusedGateUp:
          mlin("gate_up_proj", 2 * im, h, l.up, l.up_b);
          mlin(n.down, h, im, l.down, l.down_b);
          break;
        case Mlp::kPlain:
          mlin(n.up, im, h, l.up, l.up_b);
          mlin(n.down, h, im, l.down, l.down_b);
          break;
      }
      const size_t u = static_cast<size_t>(i);
      l.window = c_.window[u];
      l.rope = c_.pos == Pos::kRotary && c_.rope_on[u];
      l.rope_local = c_.rope_local_on[u];
      layers_.push_back(std::move(l));
    }
    AddNorm(base + n.final_norm, h, final_w_, final_b_, c_.norm);
    switch (head_) {
      case Head::kCausalLM:
        if (c_.tie) {
          head_w_ = embed_;
        } else {
          head_w_ = Add(n.lm_head + ".weight", {c_.vocab, h});
        }
        if (c_.lm_head_bias) head_b_ = Add(n.lm_head + ".bias", {c_.vocab});
        break;
      case Head::kSeqCls:
        head_w_ = Add(n.seq_cls + ".weight", {c_.num_labels, h});
        if (c_.seq_cls_bias) head_b_ = Add(n.seq_cls + ".bias", {c_.num_labels});
        break;
      case Head::kTokenCls:
        head_w_ = Add(n.token_cls + ".weight", {c_.num_labels, h});
        if (c_.token_cls_bias) head_b_ = Add(n.token_cls + ".bias", {c_.num_labels});
        break;
      case Head::kQA:
        head_w_ = Add("qa_outputs.weight", {2, h});
        head_b_ = Add("qa_outputs.bias", {2});
        break;
      case Head::kBase:
        break;
    }
    seq_len_ = std::min(RunSeqLen(this->spec().tiny_config), c_.max_pos);
  }

  std::vector<std::pair<std::string, std::vector<int64_t>>> WeightShapes() const override {
    return shapes_;
  }
  std::vector<std::string> OutputNames() const override {
    if (head_ == Head::kBase) return {"last_hidden_state"};
    if (head_ == Head::kQA) return {"start_logits", "end_logits"};
    return {"logits"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& ids = GetInput(inputs, "input_ids");
    at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
    const int64_t b = ids.size(0), s = ids.size(1);
    const at::Device dev = ids.device();
    const auto lopts = at::TensorOptions().dtype(at::kLong).device(dev);
    at::Tensor x =
        nn::Embedding(GetWeight(w, embed_), ids, c_.embed_padding_idx ? c_.pad.value_or(-1) : -1);
    const at::ScalarType dt = x.scalar_type();
    if (c_.embed_scale != 1.0) x = x * c_.embed_scale;
    if (!emb_lnw_.empty())
      x = nn::LayerNorm(x, GetWeight(w, emb_lnw_), GetWeight(w, emb_lnb_), c_.eps);
    at::Tensor pos = at::arange(s, lopts);
    if (c_.pos == Pos::kLearned) {
      at::Tensor p = pos;
      if (c_.pos_from_mask && mask.defined()) {
        at::Tensor m = mask.to(at::kLong);
        p = at::cumsum(m, 1) * m - 1;  // OPT / BioGPT: padding positions become -1
      }
      x = x + nn::Embedding(GetWeight(w, pos_), p + c_.pos_offset);
    } else if (c_.pos == Pos::kSinusoidal) {
      x = x + Sinusoid(pos + c_.pos_offset, dt);
    }
    at::Tensor cos, sin, cos_l, sin_l;
    if (c_.pos == Pos::kRotary) {
      std::tie(cos, sin) = Tables(c_.rope, pos, dt);
      for (const LayerW& l : layers_)
        if (l.rope_local && !cos_l.defined())
          std::tie(cos_l, sin_l) = Tables(c_.rope_local, pos, dt);
    }
    at::Tensor bias = AlibiBias(mask, b, s, dev, dt);
    at::Tensor blocked_full, blocked_window;
    for (const LayerW& l : layers_) {
      at::Tensor& blocked = l.window ? blocked_window : blocked_full;
      if (!blocked.defined()) blocked = nn::BlockedKeys(mask, s, /*causal=*/true, l.window, dev);
      const at::Tensor& lc = l.rope_local ? cos_l : cos;
      const at::Tensor& ls = l.rope_local ? sin_l : sin;
      auto attn = [&](const at::Tensor& in) { return Attn(w, l, in, lc, ls, bias, blocked, b, s); };
      switch (c_.block) {
        case Block::kPre: {
          at::Tensor a = attn(NormOpt(w, x, l.n1w, l.n1b));
          x = x + a * c_.residual_mult;
          x = x + Mlp(w, l, NormOpt(w, x, l.n2w, l.n2b)) * c_.residual_mult;
          break;
        }
        case Block::kParallel1: {
          at::Tensor in = NormOpt(w, x, l.n1w, l.n1b);
          x = x + attn(in) + Mlp(w, l, in);
          break;
        }
        case Block::kParallel2:
          x = x + attn(NormOpt(w, x, l.n1w, l.n1b)) + Mlp(w, l, NormOpt(w, x, l.n2w, l.n2b));
          break;
        case Block::kPost:
          x = x + NormOpt(w, attn(x), l.p1w, l.p1b);
          x = x + NormOpt(w, Mlp(w, l, x), l.p2w, l.p2b);
          break;
        case Block::kSandwich:
          x = x + NormOpt(w, attn(NormOpt(w, x, l.n1w, l.n1b)), l.p1w, l.p1b);
          x = x + NormOpt(w, Mlp(w, l, NormOpt(w, x, l.n2w, l.n2b)), l.p2w, l.p2b);
          break;
      }
    }
    x = NormOpt(w, x, final_w_, final_b_);
    if (head_ == Head::kBase) return {x};
    at::Tensor logits = nn::Linear(x, GetWeight(w, head_w_), GetOptionalWeight(w, head_b_));
    if (head_ == Head::kQA)
      return {logits.select(-1, 0).contiguous(), logits.select(-1, 1).contiguous()};
    if (head_ == Head::kTokenCls) return {logits};
    if (head_ == Head::kCausalLM) {
      if (c_.logit_mult != 1.0) logits = logits * c_.logit_mult;
      return {logits};
    }
    // Sequence classification: the last attended token (HF: the last non-pad token).
    at::Tensor last;
    if (mask.defined()) {
      last = (at::arange(s, lopts) * mask.to(at::kLong)).argmax(-1);
    } else {
      last = at::full({b}, s - 1, lopts);
    }
    return {logits.gather(1, last.view({b, 1, 1}).expand({b, 1, c_.num_labels})).squeeze(1)};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    if (head_ == Head::kQA) {
      const int64_t s = out[0].size(1);
      at::Tensor sp = GetInput(batch.labels, "start_positions").clamp(0, s);
      at::Tensor ep = GetInput(batch.labels, "end_positions").clamp(0, s);
      return (CrossEntropy(out[0], sp) + CrossEntropy(out[1], ep)) / 2;
    }
    const at::Tensor& logits = out[0];
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    switch (head_) {
      case Head::kBase:
        return at::mse_loss(logits, labels.to(logits.scalar_type()));
      case Head::kTokenCls:
        return CrossEntropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}));
      case Head::kSeqCls:
        if (c_.num_labels == 1)
          return at::mse_loss(logits.squeeze(-1), labels.to(logits.scalar_type()));
        return CrossEntropy(logits, labels);
      default:
        break;
    }
    const int64_t s = logits.size(1);
    return CrossEntropy(logits.narrow(1, 0, s - 1).reshape({-1, logits.size(-1)}),
                        labels.narrow(1, 1, s - 1).reshape({-1}));
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    at::Tensor ids = at::randint(0, c_.vocab, {batch_size, seq_len_}, gen, lopts);
    at::Tensor mask = MakeAttentionMask(batch_size, seq_len_);
    if (c_.pad) ids = ids.masked_fill(mask.eq(0), *c_.pad);
    Batch batch;
    batch.inputs["input_ids"] = ids;
    batch.inputs["attention_mask"] = mask;
    switch (head_) {
      case Head::kSeqCls:
        batch.labels["labels"] = c_.num_labels == 1
                                     ? at::randn({batch_size}, gen, fopts)
                                     : at::randint(0, c_.num_labels, {batch_size}, gen, lopts);
        break;
      case Head::kTokenCls:
        batch.labels["labels"] = at::randint(0, c_.num_labels, {batch_size, seq_len_}, gen, lopts)
                                     .masked_fill(mask.eq(0), -100);
        break;
      case Head::kQA: {
        at::Tensor start = at::randint(0, seq_len_ / 2, {batch_size}, gen, lopts);
        batch.labels["start_positions"] = start;
        batch.labels["end_positions"] =
            start + at::randint(0, seq_len_ / 4, {batch_size}, gen, lopts);
        break;
      }
      case Head::kBase:
        batch.labels["labels"] = at::randn({batch_size, seq_len_, c_.hidden}, gen, fopts);
        break;
      case Head::kCausalLM:
        batch.labels["labels"] = ids.masked_fill(mask.eq(0), -100);
        break;
    }
    return batch;
  }

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
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

 private:
  std::string Add(const std::string& name, std::vector<int64_t> shape) {
    shapes_.emplace_back(name, std::move(shape));
    return name;
  }

  void AddNorm(const std::string& prefix, int64_t width, std::string& w, std::string& b,
               Norm kind) {
    if (kind == Norm::kNonParam) return;
    w = Add(prefix + ".weight", {width});
    (kind == Norm::kGemmaRms || kind == Norm::kLayerNorm1P ? zeros_ : ones_).push_back(w);
    if (kind == Norm::kLayerNorm || kind == Norm::kLayerNorm1P) b = Add(prefix + ".bias", {width});
  }

  at::Tensor NormOpt(const WeightMap& w, const at::Tensor& x, const std::string& wn,
                     const std::string& bn) const {
    return NormAs(c_.norm, w, x, wn, bn, x.size(-1));
  }

  at::Tensor NormAs(Norm kind, const WeightMap& w, const at::Tensor& x, const std::string& wn,
                    const std::string& bn, int64_t width) const {
    if (kind == Norm::kNonParam) return at::layer_norm(x, {width}, {}, {}, c_.eps);
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
        break;
    }
    return x;
  }

  // cos/sin [S, rotary_dim]; interleaved families repeat each frequency twice in place
  // (GPT-J create_sinusoidal_positions / Cohere repeat_interleave / GLM repeat_interleave).
  std::pair<at::Tensor, at::Tensor> Tables(const RopeConfig& rope, const at::Tensor& pos,
                                           at::ScalarType dt) const {
    auto [cos, sin] = nn::RotaryCosSin(rope, c_.rotary_dim, pos, dt);
    if (!c_.interleaved) return {cos, sin};
    const int64_t half = c_.rotary_dim / 2;
    auto inter = [half](const at::Tensor& t) {
      at::Tensor f = t.narrow(-1, 0, half).unsqueeze(-1);
      return at::cat({f, f}, -1).flatten(-2);
    };
    return {inter(cos), inter(sin)};
  }

  at::Tensor Rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const {
    const int64_t rd = c_.rotary_dim, hd = c_.head_dim;
    at::Tensor rot = rd == hd ? x : x.narrow(-1, 0, rd);
    at::Tensor out;
    if (c_.interleaved) {
      // rotate_every_two: (-x[1::2], x[::2]) interleaved.
      at::Tensor x1 = rot.slice(-1, 0, rd, 2), x2 = rot.slice(-1, 1, rd, 2);
      at::Tensor r2 = at::stack({-x2, x1}, -1).flatten(-2);
      out = rot * cos + r2 * sin;
    } else {
      out = nn::ApplyRotary(rot, cos, sin);
    }
    if (rd == hd) return out;
    return at::cat({out, x.narrow(-1, rd, hd - rd)}, -1);
  }

  // XGLM sinusoidal table rows for int64 positions: [sin | cos] of pos * 10000^(-i/(half-1)).
  at::Tensor Sinusoid(const at::Tensor& pos, at::ScalarType dt) const {
    const int64_t half = c_.hidden / 2;
    const double step = std::log(10000.0) / static_cast<double>(half - 1);
    at::Tensor freq = at::exp(at::arange(half, pos.options()).to(dt) * -step);
    at::Tensor arg = pos.to(dt).unsqueeze(-1) * freq;
    at::Tensor emb = at::cat({at::sin(arg), at::cos(arg)}, -1);
    if (c_.hidden % 2 == 1) emb = at::constant_pad_nd(emb, {0, 1});
    if (c_.pad) emb = emb * pos.ne(*c_.pad).to(dt).unsqueeze(-1);
    return emb;
  }

  // ALiBi bias added to the scores, broadcastable to [B, H, S, S]; undefined without ALiBi.
  at::Tensor AlibiBias(const at::Tensor& mask, int64_t b, int64_t s, const at::Device& dev,
                       at::ScalarType dt) const {
    if (c_.alibi == Alibi::kNone) return at::Tensor();
    const auto fopts = at::TensorOptions().dtype(dt).device(dev);
    const int64_t nh = c_.heads;
    at::Tensor slopes;
    if (c_.alibi == Alibi::kMpt) {
      // build_mpt_alibi_tensor: 1 / 2^(i * max / n2), odd-then-even when heads is no power of 2.
      const int64_t n2 = int64_t{1}
                         << static_cast<int64_t>(std::ceil(std::log2(static_cast<double>(nh))));
      at::Tensor base =
          at::arange(1, n2 + 1, fopts) * (c_.alibi_bias_max / static_cast<double>(n2));
      slopes = at::reciprocal(at::pow(2.0, base));
      if (n2 != nh)
        slopes = at::cat({slopes.slice(0, 1, n2, 2), slopes.slice(0, 0, n2, 2)}).narrow(0, 0, nh);
      at::Tensor rel = at::arange(1 - s, 1, fopts);  // key position relative to the last
      return (slopes.view({nh, 1, 1}) * rel.view({1, 1, s})).unsqueeze(0);  // [1, H, 1, S]
    }
    // build_alibi_tensor (Bloom, Falcon): geometric slopes from the closest power of two.
    const int64_t p2 =
        int64_t{1} << static_cast<int64_t>(std::floor(std::log2(static_cast<double>(nh))));
    const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(p2)) - 3)));
    slopes = at::pow(base, at::arange(1, 1 + p2, fopts));
    if (p2 != nh) {
      const double extra =
          std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(2 * p2)) - 3)));
      const int64_t rem = std::min(p2, nh - p2);
      slopes = at::cat({slopes, at::pow(extra, at::arange(1, 1 + 2 * rem, 2, fopts))});
    }
    at::Tensor m = mask.defined() ? mask.to(dt) : at::ones({b, s}, fopts);
    at::Tensor positions = (at::cumsum(m, -1) - 1) * m;                // [B, S]
    return slopes.view({1, nh, 1, 1}) * positions.view({b, 1, 1, s});  // [B, H, 1, S]
  }

  at::Tensor Attn(const WeightMap& w, const LayerW& l, const at::Tensor& x, const at::Tensor& cos,
                  const at::Tensor& sin, const at::Tensor& alibi, const at::Tensor& blocked,
                  int64_t b, int64_t s) const {
    const int64_t nh = c_.heads, nkv = c_.kv, hd = c_.head_dim;
    at::Tensor q, k, v;  // [B, S, heads, hd]
    auto lin = [&](const std::string& wn, const std::string& bn) {
      return nn::Linear(x, GetWeight(w, wn), GetOptionalWeight(w, bn));
    };
    switch (c_.qkv) {
      case Qkv::kSeparate:
        q = lin(l.q, l.qb);
        k = lin(l.k, l.kb);
        v = lin(l.v, l.vb);
        break;
      case Qkv::kFused: {
        at::Tensor qkv = lin(l.qkv, l.qkvb);
        q = qkv.narrow(-1, 0, nh * hd);
        k = qkv.narrow(-1, nh * hd, nkv * hd);
        v = qkv.narrow(-1, (nh + nkv) * hd, nkv * hd);
        break;
      }
      case Qkv::kPerHead: {  // view(B, S, heads, 3, hd)
        at::Tensor qkv = lin(l.qkv, l.qkvb).view({b, s, nh, 3, hd});
        q = qkv.select(3, 0);
        k = qkv.select(3, 1);
        v = qkv.select(3, 2);
        break;
      }
      case Qkv::kGrouped: {  // Falcon: view(B, S, kv, heads / kv + 2, hd)
        const int64_t r = nh / nkv;
        at::Tensor qkv = lin(l.qkv, l.qkvb).view({b, s, nkv, r + 2, hd});
        q = qkv.narrow(3, 0, r).reshape({b, s, nh, hd});
        k = qkv.select(3, r);
        v = qkv.select(3, r + 1);
        break;
      }
      case Qkv::kCodeGen: {  // mp_num = 4 blocks, each [q | v | k] of heads / 4 heads
        const int64_t mp = 4, local = nh * hd / mp;
        at::Tensor qkv = lin(l.qkv, l.qkvb).view({b, s, mp, 3 * local});
        auto split = [&](int64_t i) {
          return qkv.narrow(-1, i * local, local).reshape({b, s, nh, hd});
        };
        q = split(0);
        v = split(1);
        k = split(2);
        break;
      }
    }
    if (c_.clip_qkv > 0) {
      q = q.clamp(-c_.clip_qkv, c_.clip_qkv);
      k = k.clamp(-c_.clip_qkv, c_.clip_qkv);
      v = v.clamp(-c_.clip_qkv, c_.clip_qkv);
    }
    if (c_.qk_norm == QkNorm::kFullRms) {
      q = nn::RmsNorm(q.reshape({b, s, nh * hd}), GetWeight(w, l.qnw), c_.eps);
      k = nn::RmsNorm(k.reshape({b, s, nkv * hd}), GetWeight(w, l.knw), c_.eps);
    }
    q = q.reshape({b, s, nh, hd});
    k = k.reshape({b, s, nkv, hd});
    v = v.reshape({b, s, nkv, hd});
    switch (c_.qk_norm) {
      case QkNorm::kPerHeadRms:
        q = NormAs(Norm::kRms, w, q, l.qnw, "", hd);
        k = NormAs(Norm::kRms, w, k, l.knw, "", hd);
        break;
      case QkNorm::kPerHeadGemma:
        q = NormAs(Norm::kGemmaRms, w, q, l.qnw, "", hd);
        k = NormAs(Norm::kGemmaRms, w, k, l.knw, "", hd);
        break;
      case QkNorm::kPerHeadLayerNorm:
        q = NormAs(Norm::kLayerNorm, w, q, l.qnw, l.qnb, hd);
        k = NormAs(Norm::kLayerNorm, w, k, l.knw, l.knb, hd);
        break;
      default:
        break;
    }
    q = q.transpose(1, 2);
    k = k.transpose(1, 2);
    v = v.transpose(1, 2);
    if (l.rope) {
      q = Rotate(q, cos, sin);
      k = Rotate(k, cos, sin);
    }
    const double scale =
        c_.attn_scale > 0 ? c_.attn_scale : 1.0 / std::sqrt(static_cast<double>(hd));
    at::Tensor scores = nn::Matmul(q, nn::RepeatKv(k, nh / nkv).transpose(-1, -2));
    if (c_.alibi == Alibi::kFalcon) {
      scores = (scores + alibi) * scale;
    } else {
      scores = scores * scale;
      if (alibi.defined()) scores = scores + alibi;
    }
    const double lowest = q.scalar_type() == at::kDouble ? std::numeric_limits<double>::lowest()
                                                         : std::numeric_limits<float>::lowest();
    if (blocked.defined()) scores = scores.masked_fill(blocked, lowest);
    at::Tensor a = nn::Matmul(at::softmax(scores, -1), nn::RepeatKv(v, nh / nkv));
    a = a.transpose(1, 2).reshape({b, s, nh * hd});
    return nn::Linear(a, GetWeight(w, l.o), GetOptionalWeight(w, l.ob));
  }

  at::Tensor Activate(const at::Tensor& x) const {
    at::Tensor y = nn::Activate(x, c_.act.a);
    return c_.act.relu2 ? y * y : y;
  }

  at::Tensor Mlp(const WeightMap& w, const LayerW& l, const at::Tensor& x) const {
    auto lin = [&](const at::Tensor& in, const std::string& wn, const std::string& bn) {
      return nn::Linear(in, GetWeight(w, wn), GetOptionalWeight(w, bn));
    };
    switch (c_.mlp) {
      case Mlp::kGated:
        return lin(Activate(lin(x, l.gate, l.gate_b)) * lin(x, l.up, l.up_b), l.down, l.down_b);
      case Mlp::kFusedGateUp: {
        at::Tensor gu = lin(x, l.up, l.up_b);
        const int64_t im = c_.inter;
        return lin(gu.narrow(-1, im, im) * Activate(gu.narrow(-1, 0, im)), l.down, l.down_b);
      }
      case Mlp::kPlain:
        return lin(Activate(lin(x, l.up, l.up_b)), l.down, l.down_b);
    }
    return x;
  }

  Recipe c_;
  Head head_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes_;
  std::vector<std::string> ones_, zeros_;
  std::vector<LayerW> layers_;
  std::string embed_, pos_, emb_lnw_, emb_lnb_, final_w_, final_b_, head_w_, head_b_;
  int64_t seq_len_ = 32;
};

}  // namespace

StatusOr<std::unique_ptr<Model>> BuildRecipeModel(ModelSpec spec, Recipe recipe, Head head) {
  return std::unique_ptr<Model>(
      std::make_unique<RecipeModel>(std::move(spec), std::move(recipe), head));
}

}  // namespace ts::zoo::internal::dextra
