// The encoder-decoder trunk (encoder_decoder.h). The op order of every path is the one each
// family had before the trunk existed: the traced op sequence and the float rounding depend on it.
#include "workers/zoo/trunks/encoder_decoder.h"

#include <cmath>
#include <limits>
#include <optional>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/audio.h"

namespace ts::zoo::internal {

at::Tensor T5Buckets(int64_t sq, int64_t sk, bool bidirectional, int64_t num_buckets,
                     int64_t max_distance, const at::Device& dev) {
  auto lo = at::TensorOptions().dtype(at::kLong).device(dev);
  at::Tensor rp = at::arange(sk, lo).unsqueeze(0) - at::arange(sq, lo).unsqueeze(1);
  int64_t nb = num_buckets;
  at::Tensor bucket = at::zeros_like(rp);
  if (bidirectional) {
    nb /= 2;
    bucket = rp.gt(0).to(at::kLong) * nb;
    rp = rp.abs();
  } else {
    rp = -at::clamp_max(rp, 0);
  }
  const int64_t max_exact = nb / 2;
  at::Tensor lf = rp.clamp_min(1).to(at::kFloat) / static_cast<double>(max_exact);
  const double denom = std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact));
  at::Tensor large =
      (at::log(lf) / denom * static_cast<double>(nb - max_exact)).to(at::kLong) + max_exact;
  large = at::clamp_max(large, nb - 1);
  return bucket + at::where(rp.lt(max_exact), rp, large);
}

EncoderDecoderModel::EncoderDecoderModel(ModelSpec spec, EncDecRecipe recipe, Stacks stacks)
    : Model(std::move(spec)), r_(std::move(recipe)) {
  if (!r_.shared.empty()) Add(r_.shared, {r_.vocab, r_.d_model});
  if (stacks != Stacks::kDecoder) {
    if (r_.front == EncDecRecipe::Front::kWhisperConv) {
      AddWhisperStem(
          r_.encoder.prefix, r_.d_model, r_.mel,
          [this](const std::string& n, std::vector<int64_t> s) { Add(n, std::move(s)); });
    }
    AddStack(r_.encoder);
  }
  if (stacks != Stacks::kEncoder) AddStack(r_.decoder);
  seq_len_ = RunSeqLen(this->spec().tiny_config);
}

std::string EncoderDecoderModel::Add(const std::string& name, std::vector<int64_t> shape) {
  shapes_.emplace_back(name, std::move(shape));
  return name;
}

void EncoderDecoderModel::AddLinear(const std::string& p, int64_t out, int64_t in, bool bias) {
  Add(p + ".weight", {out, in});
  if (bias) Add(p + ".bias", {out});
}

void EncoderDecoderModel::AddNorm(const std::string& p) {
  Add(p + ".weight", {r_.d_model});
  if (r_.norm == EncDecRecipe::Norm::kLayerNorm) Add(p + ".bias", {r_.d_model});
}

void EncoderDecoderModel::InitWeight(const std::string& name, at::Tensor& t,
                                     at::Generator& gen) const {
  static const std::string kPositions = "embed_positions.weight";
  if (r_.positions == EncDecRecipe::Positions::kSinusoidalTable &&
      name.size() > kPositions.size() &&
      name.compare(name.size() - kPositions.size(), kPositions.size(), kPositions) == 0) {
    t.copy_(nn::SinusoidHalvesTable(t.size(0), t.size(1)));
    return;
  }
  if (InitConvWeight(name, t, gen)) return;
  Model::InitWeight(name, t, gen);
}

EncoderDecoderModel::LayerNames EncoderDecoderModel::Names(const EncDecStack& s, int64_t i) const {
  if (r_.naming == EncDecRecipe::Naming::kT5) {
    const std::string bp = s.prefix + ".block." + std::to_string(i) + ".layer.";
    const std::string ffp = s.cross ? bp + "2." : bp + "1.";
    return {{bp + "0.SelfAttention", bp + "0.layer_norm"},
            {bp + "1.EncDecAttention", bp + "1.layer_norm"},
            {ffp + r_.t5_ffn, ffp + "layer_norm"}};
  }
  const std::string lp = s.prefix + ".layers." + std::to_string(i);
  return {{lp + ".self_attn", lp + ".self_attn_layer_norm"},
          {lp + ".encoder_attn", lp + ".encoder_attn_layer_norm"},
          {lp, lp + ".final_layer_norm"}};
}

void EncoderDecoderModel::AddAttention(const std::string& p, int64_t inner) {
  const int64_t d = r_.d_model;
  if (r_.naming == EncDecRecipe::Naming::kT5) {
    Add(p + ".q.weight", {inner, d});
    Add(p + ".k.weight", {inner, d});
    Add(p + ".v.weight", {inner, d});
    Add(p + ".o.weight", {d, inner});
    return;
  }
  AddLinear(p + ".k_proj", d, d, r_.bias && r_.k_bias);
  AddLinear(p + ".v_proj", d, d, r_.bias);
  AddLinear(p + ".q_proj", d, d, r_.bias);
  AddLinear(p + ".out_proj", d, d, r_.bias);
}

void EncoderDecoderModel::AddStack(const EncDecStack& s) {
  const int64_t d = r_.d_model;
  const int64_t hd = r_.head_dim > 0 ? r_.head_dim : d / s.heads;
  const bool t5 = r_.naming == EncDecRecipe::Naming::kT5;
  if (s.own_embedding) Add(s.prefix + ".embed_tokens.weight", {r_.vocab, d});
  if (s.positions > 0) Add(s.prefix + ".embed_positions.weight", {s.positions, d});
  if (r_.embedding_norm) AddNorm(s.prefix + ".layernorm_embedding");
  for (int64_t i = 0; i < s.layers; ++i) {
    const LayerNames n = Names(s, i);
    AddAttention(n.self.module, s.heads * hd);
    if ((i == 0 || r_.rel_per_layer) && r_.rel_buckets > 0) {
      Add(n.self.module + ".relative_attention_bias.weight", {r_.rel_buckets, s.heads});
    }
    AddNorm(n.self.norm);
    if (s.cross) {
      AddAttention(n.cross.module, s.heads * hd);
      AddNorm(n.cross.norm);
    }
    if (t5 && s.Sparse(i)) {
      AddLinear(n.ffn.module + ".router.classifier", r_.num_experts, d, r_.router_bias);
      for (int64_t e = 0; e < r_.num_experts; ++e) {
        const std::string ep = n.ffn.module + ".experts.expert_" + std::to_string(e);
        Add(ep + ".wi.weight", {s.ffn, d});
        Add(ep + ".wo.weight", {d, s.ffn});
      }
    } else if (t5 && r_.gated_ffn) {
      Add(n.ffn.module + ".wi_0.weight", {s.ffn, d});
      Add(n.ffn.module + ".wi_1.weight", {s.ffn, d});
    } else if (t5) {
      Add(n.ffn.module + ".wi.weight", {s.ffn, d});
    }
    if (t5 && !s.Sparse(i)) {
      Add(n.ffn.module + ".wo.weight", {d, s.ffn});
    } else if (!t5) {
      AddLinear(n.ffn.module + ".fc1", s.ffn, d, r_.bias);
      AddLinear(n.ffn.module + ".fc2", d, s.ffn, r_.bias);
    }
    AddNorm(n.ffn.norm);
  }
  if (r_.final_norm) AddNorm(s.prefix + (t5 ? ".final_layer_norm" : ".layer_norm"));
}

at::Tensor EncoderDecoderModel::Norm(const WeightMap& w, const std::string& p,
                                     const at::Tensor& x) const {
  if (r_.norm == EncDecRecipe::Norm::kRms)
    return nn::RmsNorm(x, GetWeight(w, p + ".weight"), r_.eps);
  return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), r_.eps);
}

// Token lookup (with `table`) or embedded inputs, then the scale, positions and embedding norm.
at::Tensor EncoderDecoderModel::Embed(const WeightMap& w, const EncDecStack& s,
                                      const at::Tensor& table, const at::Tensor& ids) const {
  using P = EncDecRecipe::Positions;
  const bool norm_tokens = r_.decoder_norm_tokens && s.decoder;
  at::Tensor x = ids;
  if (table.defined()) {
    x = nn::Embedding(table, ids);
    if (r_.scale_embedding && !norm_tokens) x = x * std::sqrt(static_cast<double>(r_.d_model));
  }
  if (norm_tokens) x = Norm(w, s.prefix + ".layernorm_embedding", x);
  const auto lopts = at::TensorOptions().dtype(at::kLong).device(ids.device());
  if (r_.positions == P::kLookupOffset2 || r_.positions == P::kLookup ||
      r_.positions == P::kSinusoidalTable) {
    at::Tensor posw = GetWeight(w, s.prefix + ".embed_positions.weight");
    at::Tensor positions = at::arange(ids.size(1), lopts);
    if (r_.positions == P::kLookupOffset2) positions = positions + 2;
    x = x + nn::Embedding(posw, positions);
  } else if (r_.positions == P::kSlice) {
    x = x + GetWeight(w, s.prefix + ".embed_positions.weight").narrow(0, 0, x.size(1));
  } else if (r_.positions == P::kFairseq) {
    x = x + FairseqPositions(ids, x.scalar_type());
  }
  if (r_.embedding_norm && !norm_tokens) x = Norm(w, s.prefix + ".layernorm_embedding", x);
  return x;
}

// M2M100SinusoidalPositionalEmbedding: positions pad + cumsum(ids != pad) on the non-pad tokens,
// pad on the pad tokens (row `pad` of the table is zero); the table row p is
// [sin(p f_j) | cos(p f_j)], f_j = exp(-j ln(10000) / (d/2 - 1)), a zero column for odd d.
at::Tensor EncoderDecoderModel::FairseqPositions(const at::Tensor& ids, at::ScalarType dt) const {
  const int64_t half = r_.d_model / 2;
  const double step = std::log(10000.0) / static_cast<double>(half - 1);
  at::Tensor keep = ids.ne(r_.pad).to(at::kLong);
  at::Tensor pos = at::cumsum(keep, 1) * keep + r_.pad;
  at::Tensor freq = at::exp(at::arange(half, pos.options()).to(at::kFloat) * -step);
  at::Tensor arg = pos.to(at::kFloat).unsqueeze(-1) * freq;
  at::Tensor emb = at::cat({at::sin(arg), at::cos(arg)}, -1);
  if (r_.d_model % 2 == 1) emb = at::constant_pad_nd(emb, {0, 1});
  return (emb * keep.to(at::kFloat).unsqueeze(-1)).to(dt);
}

// BART / Whisper: softmax(q k^T / sqrt(d)); T5: softmax(q k^T + bias) (no scaling).
at::Tensor EncoderDecoderModel::Attend(const WeightMap& w, const std::string& p,
                                       const at::Tensor& x, const at::Tensor& kv, int64_t heads,
                                       const at::Tensor& bias, const at::Tensor& blocked) const {
  const int64_t b = x.size(0), sq = x.size(1), sk = kv.size(1);
  const int64_t hd = r_.head_dim > 0 ? r_.head_dim : r_.d_model / heads;
  const bool t5 = r_.naming == EncDecRecipe::Naming::kT5;
  auto lin = [&](const at::Tensor& y, const char* t5_name, const char* name, bool has_bias) {
    const std::string n = p + "." + (t5 ? t5_name : name);
    return nn::Linear(y, GetWeight(w, n + ".weight"),
                      has_bias && r_.bias ? GetWeight(w, n + ".bias") : at::Tensor());
  };
  at::Tensor q = lin(x, "q", "q_proj", true).view({b, sq, heads, hd}).transpose(1, 2);
  at::Tensor k = lin(kv, "k", "k_proj", r_.k_bias).view({b, sk, heads, hd}).transpose(1, 2);
  at::Tensor v = lin(kv, "v", "v_proj", true).view({b, sk, heads, hd}).transpose(1, 2);
  at::Tensor ctx;
  if (r_.rel_buckets == 0) {
    ctx = nn::Attention(q, k, v, blocked, 1.0 / std::sqrt(static_cast<double>(hd)));
  } else {
    at::Tensor scores = nn::Matmul(q, k.transpose(-1, -2));
    if (bias.defined()) scores = scores + bias;
    scores = nn::MaskBlocked(scores, blocked);
    ctx = nn::Matmul(at::softmax(scores, -1), v);
  }
  return lin(ctx.transpose(1, 2).reshape({b, sq, heads * hd}), "o", "out_proj", true);
}

at::Tensor EncoderDecoderModel::Ffn(const WeightMap& w, const std::string& p,
                                    const at::Tensor& x) const {
  if (r_.naming == EncDecRecipe::Naming::kBart) {
    auto lin = [&](const std::string& n, const at::Tensor& y) {
      return nn::Linear(y, GetWeight(w, n + ".weight"),
                        r_.bias ? GetWeight(w, n + ".bias") : at::Tensor());
    };
    return lin(p + ".fc2", nn::Activate(lin(p + ".fc1", x), r_.act));
  }
  at::Tensor hdn;
  if (r_.gated_ffn) {
    hdn = nn::Activate(nn::Linear(x, GetWeight(w, p + ".wi_0.weight")), r_.act) *
          nn::Linear(x, GetWeight(w, p + ".wi_1.weight"));
  } else {
    hdn = nn::Activate(nn::Linear(x, GetWeight(w, p + ".wi.weight")), r_.act);
  }
  return nn::Linear(hdn, GetWeight(w, p + ".wo.weight"));
}

// Pre-LN: x + f(norm(x)); post-LN (bart): norm(x + f(x)).
template <typename F>
at::Tensor EncoderDecoderModel::Residual(const WeightMap& w, const std::string& norm,
                                         const at::Tensor& x, F f) const {
  if (r_.pre_ln) return x + f(Norm(w, norm, x));
  return Norm(w, norm, x + f(x));
}

at::Tensor EncoderDecoderModel::Layer(const WeightMap& w, const EncDecStack& s, int64_t i,
                                      const at::Tensor& x, const at::Tensor& bias,
                                      const at::Tensor& blocked, const at::Tensor& enc,
                                      const at::Tensor& enc_blocked) const {
  const LayerNames n = Names(s, i);
  at::Tensor y;
  if (r_.encoder_norms_kv_apart && !s.decoder) {
    y = x + Attend(w, n.self.module, Norm(w, n.self.norm, x), Norm(w, n.self.norm, x), s.heads,
                   bias, blocked);
  } else {
    y = Residual(w, n.self.norm, x, [&](const at::Tensor& z) {
      return Attend(w, n.self.module, z, z, s.heads, bias, blocked);
    });
  }
  if (s.cross) {
    y = Residual(w, n.cross.norm, y, [&](const at::Tensor& z) {
      return Attend(w, n.cross.module, z, enc, s.heads, at::Tensor(), enc_blocked);
    });
  }
  if (s.Sparse(i)) {
    return Residual(w, n.ffn.norm, y, [&](const at::Tensor& z) {
      const std::string& p = n.ffn.module;
      std::vector<at::Tensor> wi, wo;
      for (int64_t e = 0; e < r_.num_experts; ++e) {
        const std::string ep = p + ".experts.expert_" + std::to_string(e);
        wi.push_back(GetWeight(w, ep + ".wi.weight"));
        wo.push_back(GetWeight(w, ep + ".wo.weight"));
      }
      return SwitchSparseMlp(
          z, GetWeight(w, p + ".router.classifier.weight"),
          r_.router_bias ? GetWeight(w, p + ".router.classifier.bias") : at::Tensor(), wi, wo,
          r_.act);
    });
  }
  return Residual(w, n.ffn.norm, y, [&](const at::Tensor& z) { return Ffn(w, n.ffn.module, z); });
}

at::Tensor EncoderDecoderModel::RunStack(const WeightMap& w, const EncDecStack& s,
                                         const at::Tensor& table, const at::Tensor& x,
                                         const at::Tensor& mask, const at::Tensor& enc,
                                         const at::Tensor& enc_blocked, at::Tensor* blocked) const {
  const int64_t len = x.size(1);
  const at::Device dev = x.device();
  if (r_.mask_before_embedding) *blocked = nn::BlockedKeys(mask, len, s.decoder, std::nullopt, dev);
  at::Tensor h = Embed(w, s, table, x);
  if (!r_.mask_before_embedding) {
    *blocked = nn::BlockedKeys(mask, len, s.decoder, std::nullopt, dev);
  }
  at::Tensor bias, idx;
  auto layer_bias = [&](int64_t i) {
    const at::Tensor& rel =
        GetWeight(w, Names(s, i).self.module + ".relative_attention_bias.weight");
    return nn::Embedding(rel, idx).permute({2, 0, 1}).unsqueeze(0);
  };
  if (r_.rel_buckets > 0) {
    idx = T5Buckets(len, len, !s.decoder, r_.rel_buckets, r_.rel_max_distance, dev);
    bias = layer_bias(0);
  }
  for (int64_t i = 0; i < s.layers; ++i) {
    if (r_.rel_per_layer && i > 0) bias = layer_bias(i);
    h = Layer(w, s, i, h, bias, *blocked, enc, enc_blocked);
  }
  if (r_.final_norm) {
    h = Norm(
        w,
        s.prefix + (r_.naming == EncDecRecipe::Naming::kT5 ? ".final_layer_norm" : ".layer_norm"),
        h);
  }
  return h;
}

at::Tensor EncoderDecoderModel::Encode(const WeightMap& w, const TensorMap& inputs,
                                       at::Tensor* blocked) const {
  if (r_.front == EncDecRecipe::Front::kWhisperConv) {
    at::Tensor x = WhisperStem(w, r_.encoder.prefix, GetInput(inputs, "input_features"));
    return RunStack(w, r_.encoder, at::Tensor(), x, at::Tensor(), at::Tensor(), at::Tensor(),
                    blocked);
  }
  const at::Tensor& ids = GetInput(inputs, "input_ids");
  at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
  return RunStack(w, r_.encoder, GetWeight(w, r_.shared), ids, mask, at::Tensor(), at::Tensor(),
                  blocked);
}

const at::Tensor& EncoderDecoderModel::DecoderTable(const WeightMap& w) const {
  if (r_.decoder.own_embedding) return GetWeight(w, r_.decoder.prefix + ".embed_tokens.weight");
  return GetWeight(w, r_.shared);
}

at::Tensor EncoderDecoderModel::Decode(const WeightMap& w, const TensorMap& inputs,
                                       const at::Tensor& enc, const at::Tensor& enc_blocked) const {
  const at::Tensor& ids = GetInput(inputs, "decoder_input_ids");
  at::Tensor mask =
      r_.decoder.decoder_mask ? GetOptionalInput(inputs, "decoder_attention_mask") : at::Tensor();
  at::Tensor blocked;
  return RunStack(w, r_.decoder, DecoderTable(w), ids, mask, enc, enc_blocked, &blocked);
}

}  // namespace ts::zoo::internal
