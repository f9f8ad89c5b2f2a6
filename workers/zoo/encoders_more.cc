// Zoo: further encoder families (README.md). One generic post-LN BERT-style encoder with
// per-family options and HF state_dict names:
//   roberta / xlm-roberta / camembert  position ids = cumsum(ids != pad) * (ids != pad) + pad
//   distilbert   no token types; q_lin/k_lin/v_lin/out_lin, sa_layer_norm, ffn.lin1/lin2
//   albert       factorised embedding (E) + embedding_hidden_mapping_in; layer groups shared
//                across depth (num_hidden_groups, inner_group_num)
//   electra      embeddings_project when embedding_size != hidden_size; no pooler
//   deberta-v2   disentangled attention (c2p / p2c over log-bucketed relative positions,
//                share_att_key or pos_key_proj / pos_query_proj, rel_embeddings LayerNorm)
//   bert         the heads bert.cc does not build (token classification, QA, multiple choice)
// Heads: base model, sequence / token classification, question answering (start/end logits),
// masked LM (decoder tied to the word embeddings), multiple choice (input_ids [B, C, S]).
//
// DeBERTa-v2 simplifications (documented): no conv layer (conv_kernel_size > 0 is rejected),
// relative positions computed on the host for the run's sequence length (a constant in traces),
// the 2D XSoftmax mask is modelled as key masking plus zeroing padded query rows (identical for
// attended rows), attention_head_size must equal hidden_size / heads.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;
using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// kErnie, kMegatron, kBigBird and kBertGen are BERT-like (cls.predictions heads, arange
// positions); kXlmrXl and kRobertaPre are RoBERTa-like (lm_head, cumsum positions). kMegatron,
// kXlmrXl and kRobertaPre are pre-LN (a LayerNorm before attention and before the MLP, one after
// the last layer).
enum class Fam {
  kBert, kRoberta, kDistil, kAlbert, kElectra, kDeberta, kErnie, kMegatron, kBigBird, kBertGen,
  kXlmrXl, kRobertaPre
};
enum class Head {
  kBase, kSeqCls, kTokenCls, kQA, kMaskedLM, kMultipleChoice, kCausalLM, kNextSentence
};

bool RobertaLike(Fam f) { return f == Fam::kRoberta || f == Fam::kXlmrXl || f == Fam::kRobertaPre; }
bool BertLike(Fam f) {
  return f == Fam::kBert || f == Fam::kErnie || f == Fam::kMegatron || f == Fam::kBigBird ||
         f == Fam::kBertGen;
}
bool PreLn(Fam f) { return f == Fam::kMegatron || f == Fam::kXlmrXl || f == Fam::kRobertaPre; }

constexpr int64_t kNumChoices = 2;  // multiple-choice batches

struct EncCfg {
  Fam fam = Fam::kBert;
  int64_t vocab = 0, hidden = 0, inter = 0, layers = 0, heads = 0;
  int64_t max_pos = 512, type_vocab = 2, embedding = 0;
  Activation act = Activation::kGeluErf;
  Activation pooler_act = Activation::kGeluErf;  // deberta ContextPooler
  double eps = 1e-12, init_range = 0.02;
  std::optional<int64_t> pad;
  int64_t num_labels = 2;
  int64_t groups = 1, inner = 1;  // albert
  // deberta-v2
  bool relative = false, share_att_key = false, c2p = false, p2c = false;
  bool pos_biased_input = true, norm_rel = false;
  int64_t buckets = -1, max_rel = -1;
  int64_t AttSpan() const { return buckets > 0 ? buckets : max_rel; }
  int64_t task_types = 0;       // ernie use_task_id: task_type_vocab_size
  bool rescale_embeddings = false;  // big_bird
  bool decoder = false;         // is_decoder: causal self-attention (the CausalLM heads)
  std::string base;             // state_dict prefix of the base model under a head
};

Status Positive(const ConfigReader& r, const std::string& f, int64_t v) {
  if (v <= 0) return r.Error(f, "must be positive (got " + std::to_string(v) + ")");
  return OkStatus();
}

// Reads `name`, or its transformers attribute_map alias when only that is present.
StatusOr<int64_t> IntAlias(const ConfigReader& r, const std::string& name, const std::string& alias) {
  if (!r.Has(name) && r.Has(alias)) return r.Int(alias);
  return r.Int(name);
}

StatusOr<Activation> Act(const ConfigReader& r, const std::string& f, const std::string& def) {
  TS_ASSIGN_OR_RETURN(std::string name, r.String(f, def));
  return ParseActivation(name, r.Name(f));
}

StatusOr<EncCfg> ParseEnc(const json& config, Fam fam) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  EncCfg c;
  c.fam = fam;
  TS_ASSIGN_OR_RETURN(c.vocab, r.Int("vocab_size"));
  TS_RETURN_IF_ERROR(Positive(r, "vocab_size", c.vocab));
  const bool distil = fam == Fam::kDistil;
  const std::string hf = distil ? "dim" : "hidden_size", lf = distil ? "n_layers" : "num_hidden_layers",
                    nf = distil ? "n_heads" : "num_attention_heads",
                    ff = distil ? "hidden_dim" : "intermediate_size";
  if (distil) {
    TS_ASSIGN_OR_RETURN(c.hidden, IntAlias(r, hf, "hidden_size"));
    TS_ASSIGN_OR_RETURN(c.layers, IntAlias(r, lf, "num_hidden_layers"));
    TS_ASSIGN_OR_RETURN(c.heads, IntAlias(r, nf, "num_attention_heads"));
    TS_ASSIGN_OR_RETURN(c.inter, r.Int(ff, 3072));  // DistilBertConfig default
  } else {
    TS_ASSIGN_OR_RETURN(c.hidden, r.Int(hf));
    TS_ASSIGN_OR_RETURN(c.layers, r.Int(lf));
    TS_ASSIGN_OR_RETURN(c.heads, r.Int(nf));
    TS_ASSIGN_OR_RETURN(c.inter, r.Int(ff));
  }
  TS_RETURN_IF_ERROR(Positive(r, hf, c.hidden));
  TS_RETURN_IF_ERROR(Positive(r, lf, c.layers));
  TS_RETURN_IF_ERROR(Positive(r, nf, c.heads));
  TS_RETURN_IF_ERROR(Positive(r, ff, c.inter));
  if (c.hidden % c.heads != 0) {
    return r.Error(nf, "must divide " + hf + " (" + std::to_string(c.hidden) + " % " +
                           std::to_string(c.heads) + " != 0)");
  }
  TS_ASSIGN_OR_RETURN(c.max_pos, r.Int("max_position_embeddings", 512));
  TS_RETURN_IF_ERROR(Positive(r, "max_position_embeddings", c.max_pos));
  const int64_t type_def = fam == Fam::kDistil ? 0 : fam == Fam::kDeberta ? 0 : 2;
  if (fam == Fam::kBertGen) {
    c.type_vocab = 0;  // BertGenerationEmbeddings has no token types
  } else if (!distil) {
    TS_ASSIGN_OR_RETURN(c.type_vocab, r.Int("type_vocab_size", type_def));
    if (c.type_vocab < 0 || (c.type_vocab == 0 && fam != Fam::kDeberta)) {
      return r.Error("type_vocab_size", "must be positive (got " + std::to_string(c.type_vocab) + ")");
    }
  } else {
    c.type_vocab = 0;
  }
  const char* act_field = distil ? "activation" : "hidden_act";
  TS_ASSIGN_OR_RETURN(c.act, Act(r, act_field,
                                 fam == Fam::kAlbert || fam == Fam::kBigBird ? "gelu_new" : "gelu"));
  if (!distil) {
    TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", fam == Fam::kDeberta ? 1e-7 : 1e-12));
    if (!(c.eps > 0.0) || !std::isfinite(c.eps)) return r.Error("layer_norm_eps", "must be positive");
  }
  TS_ASSIGN_OR_RETURN(c.init_range, r.Double("initializer_range", 0.02));
  const int64_t pad_def = RobertaLike(fam) ? 1 : 0;
  if (r.Has("pad_token_id")) {
    TS_ASSIGN_OR_RETURN(int64_t p, r.Int("pad_token_id"));
    c.pad = p;
  } else if (!r.IsNull("pad_token_id")) {
    c.pad = pad_def;
  }
  if (c.pad && (*c.pad < 0 || *c.pad >= c.vocab)) c.pad.reset();
  if (RobertaLike(fam) && !c.pad) return r.Error("pad_token_id", "required (position ids)");
  if (BertLike(fam) || RobertaLike(fam) || fam == Fam::kElectra) {
    TS_ASSIGN_OR_RETURN(std::string pt, r.String("position_embedding_type", "absolute"));
    if (pt != "absolute") return r.Error("position_embedding_type", "unsupported '" + pt + "'");
  }
  if (fam == Fam::kErnie) {
    TS_ASSIGN_OR_RETURN(bool task_id, r.Bool("use_task_id", false));
    if (task_id) {
      TS_ASSIGN_OR_RETURN(c.task_types, r.Int("task_type_vocab_size", 3));
      TS_RETURN_IF_ERROR(Positive(r, "task_type_vocab_size", c.task_types));
    }
  }
  if (fam == Fam::kBigBird) {
    // HF BigBirdModel falls back to full attention when the sequence is no longer than
    // (5 + 2 * num_random_blocks) * block_size tokens: always so at the run's length.
    TS_ASSIGN_OR_RETURN(std::string at, r.String("attention_type", "block_sparse"));
    if (at != "block_sparse" && at != "original_full") {
      return r.Error("attention_type", "unknown '" + at + "'");
    }
    TS_ASSIGN_OR_RETURN(int64_t block, r.Int("block_size", 64));
    TS_ASSIGN_OR_RETURN(int64_t random, r.Int("num_random_blocks", 3));
    if (at == "block_sparse" && (5 + 2 * random) * block < TinyProfile::kSeqLen) {
      return r.Error("block_size", "block-sparse attention at the run's length is unsupported");
    }
    TS_ASSIGN_OR_RETURN(c.rescale_embeddings, r.Bool("rescale_embeddings", false));
    TS_ASSIGN_OR_RETURN(bool bias, r.Bool("use_bias", true));
    if (!bias) return r.Error("use_bias", "false is not supported by the zoo");
  }
  TS_ASSIGN_OR_RETURN(c.decoder, r.Bool("is_decoder", false));
  if (distil) {
    TS_ASSIGN_OR_RETURN(bool sin, r.Bool("sinusoidal_pos_embds", false));
    if (sin) return r.Error("sinusoidal_pos_embds", "unsupported (true)");
  }
  c.embedding = c.hidden;
  if (fam == Fam::kAlbert || fam == Fam::kElectra || fam == Fam::kDeberta) {
    TS_ASSIGN_OR_RETURN(c.embedding,
                        r.Int("embedding_size", fam == Fam::kDeberta ? c.hidden : 128));
    TS_RETURN_IF_ERROR(Positive(r, "embedding_size", c.embedding));
  }
  if (fam == Fam::kAlbert) {
    TS_ASSIGN_OR_RETURN(c.groups, r.Int("num_hidden_groups", 1));
    TS_RETURN_IF_ERROR(Positive(r, "num_hidden_groups", c.groups));
    if (c.groups > c.layers) {
      return r.Error("num_hidden_groups", "must not exceed num_hidden_layers (" +
                                              std::to_string(c.groups) + " > " +
                                              std::to_string(c.layers) + ")");
    }
    TS_ASSIGN_OR_RETURN(c.inner, r.Int("inner_group_num", 1));
    TS_RETURN_IF_ERROR(Positive(r, "inner_group_num", c.inner));
  }
  if (fam == Fam::kDeberta) {
    TS_ASSIGN_OR_RETURN(c.relative, r.Bool("relative_attention", false));
    TS_ASSIGN_OR_RETURN(c.share_att_key, r.Bool("share_att_key", false));
    TS_ASSIGN_OR_RETURN(c.pos_biased_input, r.Bool("position_biased_input", true));
    TS_ASSIGN_OR_RETURN(c.buckets, r.Int("position_buckets", -1));
    TS_ASSIGN_OR_RETURN(c.max_rel, r.Int("max_relative_positions", -1));
    if (c.max_rel < 1) c.max_rel = c.max_pos;
    if (c.buckets > 0 && c.buckets < 2) return r.Error("position_buckets", "must be >= 2 or <= 0");
    if (c.buckets > 0 && c.max_rel <= c.buckets / 2 + 1) {
      return r.Error("max_relative_positions", "must exceed position_buckets / 2 + 1");
    }
    TS_ASSIGN_OR_RETURN(std::string norm_rel, r.String("norm_rel_ebd", "none"));
    c.norm_rel = norm_rel.find("layer_norm") != std::string::npos;
    if (r.Has("pos_att_type")) {
      const json& p = config.at("pos_att_type");
      std::vector<std::string> kinds;
      if (p.is_string()) {
        std::string s = p.get<std::string>();
        size_t start = 0;
        while (start <= s.size()) {
          size_t bar = s.find('|', start);
          if (bar == std::string::npos) bar = s.size();
          if (bar > start) kinds.push_back(s.substr(start, bar - start));
          start = bar + 1;
        }
      } else if (p.is_array()) {
        for (const auto& k : p) {
          if (!k.is_string()) return r.Error("pos_att_type", "expected strings");
          kinds.push_back(k.get<std::string>());
        }
      } else {
        return r.Error("pos_att_type", std::string("expected string or array, got ") +
                                           JsonTypeName(p));
      }
      for (const std::string& k : kinds) {
        if (k == "c2p") {
          c.c2p = true;
        } else if (k == "p2c") {
          c.p2c = true;
        } else {
          return r.Error("pos_att_type", "unknown '" + k + "'");
        }
      }
    }
    if (!c.relative) c.c2p = c.p2c = false;
    TS_ASSIGN_OR_RETURN(int64_t conv, r.Int("conv_kernel_size", 0));
    if (conv > 0) return r.Error("conv_kernel_size", "unsupported (> 0)");
    TS_ASSIGN_OR_RETURN(int64_t pool_h, r.Int("pooler_hidden_size", c.hidden));
    if (pool_h != c.hidden) return r.Error("pooler_hidden_size", "must equal hidden_size");
    TS_ASSIGN_OR_RETURN(c.pooler_act, Act(r, "pooler_hidden_act", "gelu"));
    if (r.Has("attention_head_size")) {
      TS_ASSIGN_OR_RETURN(int64_t ahs, r.Int("attention_head_size"));
      if (ahs != c.hidden / c.heads) {
        return r.Error("attention_head_size", "must equal hidden_size / num_attention_heads");
      }
    }
  }
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// Sequence length a config runs at (roberta positions start at pad + 1).
int64_t MaxSeq(const EncCfg& c) {
  if (RobertaLike(c.fam)) return std::max<int64_t>(1, c.max_pos - *c.pad - 1);
  return c.max_pos;
}

StatusOr<json> ScaleEnc(const json& config, Fam fam) {
  using P = TinyProfile;
  TS_ASSIGN_OR_RETURN(EncCfg c, ParseEnc(config, fam));
  json t = config;
  const int64_t heads = std::min(c.heads, P::kHeads);
  const int64_t hidden = heads * (P::kHidden / P::kHeads);
  const int64_t inter = ScaleRatio(c.inter, c.hidden, hidden, 8);
  // ALBERT reuses one shared layer across its depth: two passes keep that reuse (and the
  // gradient accumulation into the shared weights) in the tiny model.
  const int64_t layers = TinyDepth(c.layers, fam == Fam::kAlbert);
  if (fam == Fam::kDistil) {
    for (const char* a : {"hidden_size", "num_attention_heads", "num_hidden_layers"}) t.erase(a);
    t["dim"] = hidden;
    t["n_heads"] = heads;
    t["n_layers"] = layers;
    t["hidden_dim"] = inter;
  } else {
    t["hidden_size"] = hidden;
    t["num_attention_heads"] = heads;
    t["num_hidden_layers"] = layers;
    t["intermediate_size"] = inter;
  }
  if (fam == Fam::kAlbert || fam == Fam::kElectra || (fam == Fam::kDeberta && t.contains("embedding_size"))) {
    t["embedding_size"] = c.embedding == c.hidden ? hidden : ScaleRatio(c.embedding, c.hidden, hidden, 8);
  }
  if (fam == Fam::kAlbert) {
    t["num_hidden_groups"] = std::min(c.groups, layers);
    t["inner_group_num"] = std::min<int64_t>(c.inner, 2);
  }
  if (fam == Fam::kDeberta) {
    t.erase("attention_head_size");
    t["pooler_hidden_size"] = hidden;
    const int64_t max_pos = std::min(c.max_pos, P::kMaxPositions);
    if (c.buckets > 0) {
      // 256 of 512 positions -> 32 of 64: positions beyond 16 are log-bucketed within 32 tokens.
      int64_t b = ScaleRatio(c.buckets, c.max_pos, max_pos, 4) / 2 * 2;
      t["position_buckets"] = std::clamp<int64_t>(b, 4, max_pos);
    }
    if (t.contains("max_relative_positions") && t["max_relative_positions"].is_number_integer() &&
        t["max_relative_positions"].get<int64_t>() > 0) {
      t["max_relative_positions"] = max_pos;
    }
  }
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id"})
    MapTokenId(t, f, vocab);
  t["max_position_embeddings"] = std::min(c.max_pos, P::kMaxPositions);
  ScaleLabels(t, c.num_labels);
  // Sequence length from the tiny config itself (pad may have moved).
  TS_ASSIGN_OR_RETURN(EncCfg tc, ParseEnc(t, fam));
  SetTinyRunProfile(t, std::min(P::kSeqLen, MaxSeq(tc)));
  return t;
}

struct LayerNames {
  std::string q, qb, k, kb, v, vb, o, ob, ln1, ln1b, fi, fib, fo, fob, ln2, ln2b;
  std::string pk, pkb, pq, pqb;  // deberta without share_att_key
  std::string pre1, pre1b, pre2, pre2b;  // pre-LN families: before attention, before the MLP
};

class EncoderImpl : public Model {
 public:
  EncoderImpl(ModelSpec spec, EncCfg c, Head head)
      : Model(std::move(spec)), c_(std::move(c)), head_(head) {
    const int64_t h = c_.hidden, im = c_.inter, e = c_.embedding;
    auto add = [this](const std::string& name, std::vector<int64_t> shape) {
      shapes_.emplace_back(name, std::move(shape));
      return name;
    };
    const std::string p = head_ == Head::kBase ? "" : c_.base;
    const bool deb = c_.fam == Fam::kDeberta;
    const bool pre_ln = PreLn(c_.fam);
    word_ = add(p + "embeddings.word_embeddings.weight", {c_.vocab, e});
    if (!deb || c_.pos_biased_input) pos_ = add(p + "embeddings.position_embeddings.weight", {c_.max_pos, e});
    if (c_.type_vocab > 0) type_ = add(p + "embeddings.token_type_embeddings.weight", {c_.type_vocab, e});
    if (c_.task_types > 0) task_ = add(p + "embeddings.task_type_embeddings.weight", {c_.task_types, e});
    if (deb && e != h) proj_ = add(p + "embeddings.embed_proj.weight", {h, e});
    // Megatron-BERT and XLM-RoBERTa-XL moved the embedding LayerNorm into the layers.
    if (c_.fam != Fam::kMegatron && c_.fam != Fam::kXlmrXl) {
      emb_ln_ = add(p + "embeddings.LayerNorm.weight", {e != h && deb ? h : e});
      emb_lnb_ = add(p + "embeddings.LayerNorm.bias", {e != h && deb ? h : e});
    }
    if (c_.fam == Fam::kElectra && e != h) {
      proj_ = add(p + "embeddings_project.weight", {h, e});
      projb_ = add(p + "embeddings_project.bias", {h});
    }
    if (c_.fam == Fam::kAlbert) {
      proj_ = add(p + "encoder.embedding_hidden_mapping_in.weight", {h, e});
      projb_ = add(p + "encoder.embedding_hidden_mapping_in.bias", {h});
    }
    if (deb && c_.relative) {
      rel_ = add(p + "encoder.rel_embeddings.weight", {c_.AttSpan() * 2, h});
      if (c_.norm_rel) {
        rel_ln_ = add(p + "encoder.LayerNorm.weight", {h});
        rel_lnb_ = add(p + "encoder.LayerNorm.bias", {h});
      }
    }
    const int64_t blocks = c_.fam == Fam::kAlbert ? c_.groups * c_.inner : c_.layers;
    for (int64_t i = 0; i < blocks; ++i) {
      LayerNames l;
      auto lin = [&](const std::string& pre, std::string& w, std::string& b, int64_t out, int64_t in) {
        w = add(pre + ".weight", {out, in});
        b = add(pre + ".bias", {out});
      };
      auto norm = [&](const std::string& pre, std::string& w, std::string& b) {
        w = add(pre + ".weight", {h});
        b = add(pre + ".bias", {h});
      };
      if (c_.fam == Fam::kDistil) {
        const std::string lp = p + "transformer.layer." + std::to_string(i) + ".";
        lin(lp + "attention.q_lin", l.q, l.qb, h, h);
        lin(lp + "attention.k_lin", l.k, l.kb, h, h);
        lin(lp + "attention.v_lin", l.v, l.vb, h, h);
        lin(lp + "attention.out_lin", l.o, l.ob, h, h);
        norm(lp + "sa_layer_norm", l.ln1, l.ln1b);
        lin(lp + "ffn.lin1", l.fi, l.fib, im, h);
        lin(lp + "ffn.lin2", l.fo, l.fob, h, im);
        norm(lp + "output_layer_norm", l.ln2, l.ln2b);
      } else if (c_.fam == Fam::kAlbert) {
        const std::string lp = p + "encoder.albert_layer_groups." + std::to_string(i / c_.inner) +
                               ".albert_layers." + std::to_string(i % c_.inner) + ".";
        lin(lp + "attention.query", l.q, l.qb, h, h);
        lin(lp + "attention.key", l.k, l.kb, h, h);
        lin(lp + "attention.value", l.v, l.vb, h, h);
        lin(lp + "attention.dense", l.o, l.ob, h, h);
        norm(lp + "attention.LayerNorm", l.ln1, l.ln1b);
        lin(lp + "ffn", l.fi, l.fib, im, h);
        lin(lp + "ffn_output", l.fo, l.fob, h, im);
        norm(lp + "full_layer_layer_norm", l.ln2, l.ln2b);
      } else {
        const std::string lp = p + "encoder.layer." + std::to_string(i) + ".";
        if (deb) {
          lin(lp + "attention.self.query_proj", l.q, l.qb, h, h);
          lin(lp + "attention.self.key_proj", l.k, l.kb, h, h);
          lin(lp + "attention.self.value_proj", l.v, l.vb, h, h);
          if (c_.relative && !c_.share_att_key) {
            if (c_.c2p) lin(lp + "attention.self.pos_key_proj", l.pk, l.pkb, h, h);
            if (c_.p2c) lin(lp + "attention.self.pos_query_proj", l.pq, l.pqb, h, h);
          }
        } else {
          lin(lp + "attention.self.query", l.q, l.qb, h, h);
          lin(lp + "attention.self.key", l.k, l.kb, h, h);
          lin(lp + "attention.self.value", l.v, l.vb, h, h);
        }
        lin(lp + "attention.output.dense", l.o, l.ob, h, h);
        if (c_.fam == Fam::kMegatron) {
          norm(lp + "attention.ln", l.pre1, l.pre1b);
          norm(lp + "ln", l.pre2, l.pre2b);
        } else if (c_.fam == Fam::kXlmrXl) {
          norm(lp + "attention.self_attn_layer_norm", l.pre1, l.pre1b);
          norm(lp + "LayerNorm", l.pre2, l.pre2b);
        } else if (c_.fam == Fam::kRobertaPre) {
          norm(lp + "attention.LayerNorm", l.pre1, l.pre1b);
          norm(lp + "intermediate.LayerNorm", l.pre2, l.pre2b);
        } else {
          norm(lp + "attention.output.LayerNorm", l.ln1, l.ln1b);
        }
        lin(lp + "intermediate.dense", l.fi, l.fib, im, h);
        lin(lp + "output.dense", l.fo, l.fob, h, im);
        if (!pre_ln) norm(lp + "output.LayerNorm", l.ln2, l.ln2b);
      }
      layers_.push_back(std::move(l));
    }
    if (c_.fam == Fam::kMegatron) {
      final_ln_ = add(p + "encoder.ln.weight", {h});
      final_lnb_ = add(p + "encoder.ln.bias", {h});
    } else if (c_.fam == Fam::kXlmrXl) {
      final_ln_ = add(p + "encoder.LayerNorm.weight", {h});
      final_lnb_ = add(p + "encoder.LayerNorm.bias", {h});
    } else if (c_.fam == Fam::kRobertaPre) {
      final_ln_ = add(p + "LayerNorm.weight", {h});
      final_lnb_ = add(p + "LayerNorm.bias", {h});
    }
    // Pooler (tanh over token 0) of the base model, where the head keeps it (and uses it).
    const bool pooled_seq_cls = c_.fam == Fam::kBert || c_.fam == Fam::kAlbert ||
                                c_.fam == Fam::kErnie || c_.fam == Fam::kMegatron;
    const bool keeps_pooler = head_ == Head::kBase || head_ == Head::kMultipleChoice ||
                              head_ == Head::kNextSentence ||
                              (head_ == Head::kSeqCls && pooled_seq_cls);
    const bool has_pooler = (BertLike(c_.fam) && c_.fam != Fam::kBertGen) || RobertaLike(c_.fam);
    if (keeps_pooler && has_pooler) {
      pool_ = add(p + "pooler.dense.weight", {h, h});
      poolb_ = add(p + "pooler.dense.bias", {h});
    }
    if (keeps_pooler && c_.fam == Fam::kAlbert) {
      pool_ = add(p + "pooler.weight", {h, h});
      poolb_ = add(p + "pooler.bias", {h});
    }
    const int64_t nl = c_.num_labels;
    switch (head_) {
      case Head::kBase:
        break;
      case Head::kSeqCls:
      case Head::kMultipleChoice: {
        const int64_t out = head_ == Head::kSeqCls ? nl : 1;
        if (c_.fam == Fam::kDistil) {
          dense_ = add("pre_classifier.weight", {h, h});
          denseb_ = add("pre_classifier.bias", {h});
        } else if (c_.fam == Fam::kDeberta) {
          dense_ = add("pooler.dense.weight", {h, h});
          denseb_ = add("pooler.dense.bias", {h});
        } else if (c_.fam == Fam::kElectra && head_ == Head::kMultipleChoice) {
          dense_ = add("sequence_summary.summary.weight", {h, h});
          denseb_ = add("sequence_summary.summary.bias", {h});
        } else if (head_ == Head::kSeqCls && (RobertaLike(c_.fam) || c_.fam == Fam::kElectra ||
                                              c_.fam == Fam::kBigBird)) {
          dense_ = add("classifier.dense.weight", {h, h});
          denseb_ = add("classifier.dense.bias", {h});
          out_ = add("classifier.out_proj.weight", {out, h});
          outb_ = add("classifier.out_proj.bias", {out});
          break;
        }
        out_ = add("classifier.weight", {out, h});
        outb_ = add("classifier.bias", {out});
        break;
      }
      case Head::kTokenCls:
        out_ = add("classifier.weight", {nl, h});
        outb_ = add("classifier.bias", {nl});
        break;
      case Head::kQA:
        out_ = add("qa_outputs.weight", {2, h});
        outb_ = add("qa_outputs.bias", {2});
        break;
      case Head::kNextSentence:
        out_ = add("cls.seq_relationship.weight", {2, h});
        outb_ = add("cls.seq_relationship.bias", {2});
        break;
      case Head::kCausalLM:
      case Head::kMaskedLM: {
        if (c_.fam == Fam::kBertGen) {
          // BertGenerationOnlyLMHead: a decoder tied to the word embeddings, no transform.
          outb_ = add("lm_head.bias", {c_.vocab});
          break;
        }
        std::string d, ln, bias;
        int64_t width = h;
        switch (c_.fam) {
          case Fam::kBert:
          case Fam::kErnie:
          case Fam::kMegatron:
          case Fam::kBigBird:
          case Fam::kBertGen:
          case Fam::kDeberta:
            d = "cls.predictions.transform.dense";
            ln = "cls.predictions.transform.LayerNorm";
            bias = "cls.predictions.bias";
            width = e;
            break;
          case Fam::kRoberta:
          case Fam::kXlmrXl:
          case Fam::kRobertaPre:
            d = "lm_head.dense";
            ln = "lm_head.layer_norm";
            bias = "lm_head.bias";
            break;
          case Fam::kDistil:
            d = "vocab_transform";
            ln = "vocab_layer_norm";
            bias = "vocab_projector.bias";
            break;
          case Fam::kAlbert:
            d = "predictions.dense";
            ln = "predictions.LayerNorm";
            bias = "predictions.bias";
            width = e;
            break;
          case Fam::kElectra:
            d = "generator_predictions.dense";
            ln = "generator_predictions.LayerNorm";
            bias = "generator_lm_head.bias";
            width = e;
            break;
        }
        // The decoder weight is tied to the word embeddings (width E).
        dense_ = add(d + ".weight", {width, h});
        denseb_ = add(d + ".bias", {width});
        mlm_ln_ = add(ln + ".weight", {width});
        mlm_lnb_ = add(ln + ".bias", {width});
        out_ = "";
        outb_ = add(bias, {c_.vocab});
        break;
      }
    }
    for (int64_t li = 0; li < c_.layers; ++li) {
      if (c_.fam != Fam::kAlbert) {
        order_.push_back(li);
        continue;
      }
      // HF AlbertTransformer: group_idx = int(i / (num_hidden_layers / num_hidden_groups)).
      const int64_t g = li * c_.groups / c_.layers;
      for (int64_t j = 0; j < c_.inner; ++j) order_.push_back(g * c_.inner + j);
    }
    seq_len_ = std::min(RunSeqLen(this->spec().tiny_config), MaxSeq(c_));
  }

  Shapes WeightShapes() const override { return shapes_; }
  std::vector<std::string> OutputNames() const override {
    if (head_ == Head::kBase) {
      if (!pool_.empty()) return {"last_hidden_state", "pooler_output"};
      return {"last_hidden_state"};
    }
    if (head_ == Head::kQA) return {"start_logits", "end_logits"};
    return {"logits"};
  }

  // Encoder body: [N, S] ids -> [N, S, H] hidden states.
  at::Tensor Encode(const WeightMap& w, const at::Tensor& ids, const at::Tensor& mask,
                    at::Tensor types) const {
    const int64_t n = ids.size(0), s = ids.size(1);
    const int64_t nh = c_.heads, hd = c_.hidden / nh, hid = c_.hidden;
    const at::Device dev = ids.device();
    const int64_t pad = c_.pad.value_or(-1);
    at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, pad);
    const at::ScalarType dt = x.scalar_type();
    if (c_.rescale_embeddings) x = x * std::sqrt(static_cast<double>(c_.hidden));
    if (!pos_.empty()) {
      at::Tensor pos;
      if (RobertaLike(c_.fam)) {
        at::Tensor keep = ids.ne(pad).to(at::kLong);
        pos = at::cumsum(keep, 1) * keep + pad;
      } else {
        pos = at::arange(s, at::TensorOptions().dtype(at::kLong).device(dev));
      }
      x = x + nn::Embedding(GetWeight(w, pos_), pos, RobertaLike(c_.fam) ? pad : -1);
    }
    if (!type_.empty()) {
      if (!types.defined()) types = at::zeros_like(ids);
      x = x + nn::Embedding(GetWeight(w, type_), types);
    }
    if (!task_.empty()) x = x + nn::Embedding(GetWeight(w, task_), at::zeros_like(ids));  // task 0
    if (c_.fam == Fam::kDeberta) {
      if (!proj_.empty()) x = nn::Linear(x, GetWeight(w, proj_));
      x = nn::LayerNorm(x, GetWeight(w, emb_ln_), GetWeight(w, emb_lnb_), c_.eps);
      if (mask.defined()) x = x * mask.unsqueeze(-1).to(dt);
    } else {
      if (!emb_ln_.empty()) x = nn::LayerNorm(x, GetWeight(w, emb_ln_), GetWeight(w, emb_lnb_), c_.eps);
      if (!proj_.empty()) x = nn::Linear(x, GetWeight(w, proj_), GetWeight(w, projb_));
    }
    // The CausalLM heads run the encoder as a decoder (is_decoder): causal self-attention.
    const bool causal = head_ == Head::kCausalLM;
    at::Tensor blocked = nn::BlockedKeys(mask, s, causal, std::nullopt, dev);
    auto heads = [&](const at::Tensor& t) { return t.view({n, s, nh, hd}).transpose(1, 2); };
    // DeBERTa relative tables: rel embeddings [2 span, H] and indices [S, S].
    at::Tensor rel, c2p_idx, p2c_idx, qmask;
    const double sf = 1.0 + (c_.c2p ? 1 : 0) + (c_.p2c ? 1 : 0);
    const int64_t span = c_.AttSpan();
    if (c_.fam == Fam::kDeberta && c_.relative) {
      rel = GetWeight(w, rel_);
      if (c_.norm_rel) rel = nn::LayerNorm(rel, GetWeight(w, rel_ln_), GetWeight(w, rel_lnb_), c_.eps);
      at::Tensor rp = RelativePositions(s, dev);  // [S, S] int64, q - k (bucketed)
      c2p_idx = at::clamp(rp + span, 0, 2 * span - 1).view({1, 1, s, s}).expand({n, nh, s, s});
      p2c_idx = at::clamp(-rp + span, 0, 2 * span - 1).view({1, 1, s, s}).expand({n, nh, s, s});
    }
    if (c_.fam == Fam::kDeberta && mask.defined()) qmask = mask.to(dt).view({n, 1, s, 1});
    const double lowest = dt == at::kDouble ? std::numeric_limits<double>::lowest()
                                            : std::numeric_limits<float>::lowest();
    for (int64_t bi : order_) {
      const LayerNames& l = layers_[static_cast<size_t>(bi)];
      const at::Tensor a_in =
          l.pre1.empty() ? x : nn::LayerNorm(x, GetWeight(w, l.pre1), GetWeight(w, l.pre1b), c_.eps);
      at::Tensor q = heads(nn::Linear(a_in, GetWeight(w, l.q), GetWeight(w, l.qb)));
      at::Tensor k = heads(nn::Linear(a_in, GetWeight(w, l.k), GetWeight(w, l.kb)));
      at::Tensor v = heads(nn::Linear(a_in, GetWeight(w, l.v), GetWeight(w, l.vb)));
      at::Tensor ctx;
      if (c_.fam != Fam::kDeberta) {
        ctx = nn::Attention(q, k, v, blocked, 1.0 / std::sqrt(static_cast<double>(hd)));
      } else {
        const double scale = 1.0 / std::sqrt(static_cast<double>(hd) * sf);
        at::Tensor scores = nn::Matmul(q, k.transpose(-1, -2)) * scale;
        // [2 span, H] -> [1, nh, 2 span, hd]
        auto rel_heads = [&](const at::Tensor& t) {
          return t.view({2 * span, nh, hd}).permute({1, 0, 2}).unsqueeze(0);
        };
        if (c_.c2p) {
          at::Tensor pk = c_.share_att_key
                              ? rel_heads(nn::Linear(rel, GetWeight(w, l.k), GetWeight(w, l.kb)))
                              : rel_heads(nn::Linear(rel, GetWeight(w, l.pk), GetWeight(w, l.pkb)));
          at::Tensor att = nn::Matmul(q, pk.transpose(-1, -2));  // [n, nh, S, 2 span]
          scores = scores + at::gather(att, -1, c2p_idx) * scale;
        }
        if (c_.p2c) {
          at::Tensor pq = c_.share_att_key
                              ? rel_heads(nn::Linear(rel, GetWeight(w, l.q), GetWeight(w, l.qb)))
                              : rel_heads(nn::Linear(rel, GetWeight(w, l.pq), GetWeight(w, l.pqb)));
          at::Tensor att = nn::Matmul(k, pq.transpose(-1, -2));  // [n, nh, S(key), 2 span]
          scores = scores + at::gather(att, -1, p2c_idx).transpose(-1, -2) * scale;
        }
        if (blocked.defined()) scores = scores.masked_fill(blocked, lowest);
        at::Tensor probs = at::softmax(scores, -1);
        if (qmask.defined()) probs = probs * qmask;
        ctx = nn::Matmul(probs, v);
      }
      ctx = ctx.transpose(1, 2).reshape({n, s, hid});
      if (!l.pre1.empty()) {
        // Pre-LN: x + attn(LN(x)), then x + mlp(LN(x)).
        x = x + nn::Linear(ctx, GetWeight(w, l.o), GetWeight(w, l.ob));
        at::Tensor f_in = nn::LayerNorm(x, GetWeight(w, l.pre2), GetWeight(w, l.pre2b), c_.eps);
        at::Tensor f = nn::Activate(nn::Linear(f_in, GetWeight(w, l.fi), GetWeight(w, l.fib)), c_.act);
        x = x + nn::Linear(f, GetWeight(w, l.fo), GetWeight(w, l.fob));
        continue;
      }
      x = nn::LayerNorm(nn::Linear(ctx, GetWeight(w, l.o), GetWeight(w, l.ob)) + x,
                        GetWeight(w, l.ln1), GetWeight(w, l.ln1b), c_.eps);
      at::Tensor f = nn::Activate(nn::Linear(x, GetWeight(w, l.fi), GetWeight(w, l.fib)), c_.act);
      x = nn::LayerNorm(nn::Linear(f, GetWeight(w, l.fo), GetWeight(w, l.fob)) + x,
                        GetWeight(w, l.ln2), GetWeight(w, l.ln2b), c_.eps);
    }
    if (!final_ln_.empty()) x = nn::LayerNorm(x, GetWeight(w, final_ln_), GetWeight(w, final_lnb_), c_.eps);
    return x;
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor ids = GetInput(inputs, "input_ids");
    at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
    at::Tensor types = GetOptionalInput(inputs, "token_type_ids");
    int64_t choices = 0;
    if (head_ == Head::kMultipleChoice) {
      choices = ids.size(1);
      const int64_t s = ids.size(2);
      ids = ids.reshape({-1, s});
      if (mask.defined()) mask = mask.reshape({-1, s});
      if (types.defined()) types = types.reshape({-1, s});
    }
    at::Tensor h = Encode(w, ids, mask, types);
    at::Tensor first = h.select(1, 0);
    switch (head_) {
      case Head::kBase: {
        if (pool_.empty()) return {h};
        return {h, at::tanh(nn::Linear(first, GetWeight(w, pool_), GetWeight(w, poolb_)))};
      }
      case Head::kTokenCls:
        return {nn::Linear(h, GetWeight(w, out_), GetWeight(w, outb_))};
      case Head::kQA: {
        at::Tensor logits = nn::Linear(h, GetWeight(w, out_), GetWeight(w, outb_));
        return {logits.select(-1, 0).contiguous(), logits.select(-1, 1).contiguous()};
      }
      case Head::kNextSentence: {
        at::Tensor pooled = at::tanh(nn::Linear(first, GetWeight(w, pool_), GetWeight(w, poolb_)));
        return {nn::Linear(pooled, GetWeight(w, out_), GetWeight(w, outb_))};
      }
      case Head::kCausalLM:
      case Head::kMaskedLM: {
        if (c_.fam == Fam::kBertGen) return {nn::Linear(h, GetWeight(w, word_), GetWeight(w, outb_))};
        const Activation a = RobertaLike(c_.fam) || c_.fam == Fam::kElectra
                                 ? Activation::kGeluErf
                                 : c_.act;
        at::Tensor t = nn::Activate(nn::Linear(h, GetWeight(w, dense_), GetWeight(w, denseb_)), a);
        t = nn::LayerNorm(t, GetWeight(w, mlm_ln_), GetWeight(w, mlm_lnb_), c_.eps);
        return {nn::Linear(t, GetWeight(w, word_), GetWeight(w, outb_))};
      }
      case Head::kSeqCls:
      case Head::kMultipleChoice: {
        at::Tensor feat;
        if (!pool_.empty()) {
          feat = at::tanh(nn::Linear(first, GetWeight(w, pool_), GetWeight(w, poolb_)));
        } else {
          Activation a = Activation::kGeluErf;  // electra
          if (c_.fam == Fam::kDistil) a = Activation::kRelu;
          if (c_.fam == Fam::kDeberta) a = c_.pooler_act;
          if (c_.fam == Fam::kBigBird) a = c_.act;  // BigBirdClassificationHead: hidden_act
          at::Tensor d = nn::Linear(first, GetWeight(w, dense_), GetWeight(w, denseb_));
          feat = RobertaLike(c_.fam) ? at::tanh(d) : nn::Activate(d, a);
        }
        at::Tensor logits = nn::Linear(feat, GetWeight(w, out_), GetWeight(w, outb_));
        if (head_ == Head::kMultipleChoice) logits = logits.reshape({-1, choices});
        return {logits};
      }
    }
    return {h};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    switch (head_) {
      case Head::kBase: {
        const at::Tensor& target = GetInput(batch.labels, "labels");
        at::Tensor loss = at::mse_loss(out[0], target.to(out[0].scalar_type()));
        if (out.size() > 1) loss = loss + at::mse_loss(out[1], target.select(1, 0).to(out[1].scalar_type()));
        return loss;
      }
      case Head::kQA: {
        const at::Tensor& sp = GetInput(batch.labels, "start_positions");
        const at::Tensor& ep = GetInput(batch.labels, "end_positions");
        return (CrossEntropy(out[0], sp) + CrossEntropy(out[1], ep)) / 2;
      }
      case Head::kSeqCls: {
        const at::Tensor& labels = GetInput(batch.labels, "labels");
        if (c_.num_labels == 1) return at::mse_loss(out[0].squeeze(-1), labels.to(out[0].scalar_type()));
        return CrossEntropy(out[0], labels);
      }
      case Head::kMultipleChoice:
      case Head::kNextSentence:
        return CrossEntropy(out[0], GetInput(batch.labels, "labels"));
      case Head::kCausalLM: {
        // Shifted next-token cross entropy (padding labelled -100).
        const at::Tensor& labels = GetInput(batch.labels, "labels");
        const int64_t s = out[0].size(1);
        return CrossEntropy(out[0].narrow(1, 0, s - 1).reshape({-1, out[0].size(-1)}),
                            labels.narrow(1, 1, s - 1).reshape({-1}));
      }
      case Head::kTokenCls:
      case Head::kMaskedLM: {
        const at::Tensor& labels = GetInput(batch.labels, "labels");
        return CrossEntropy(out[0].reshape({-1, out[0].size(-1)}), labels.reshape({-1}));
      }
    }
    return out[0].sum();
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    const int64_t s = seq_len_;
    const int64_t rows = head_ == Head::kMultipleChoice ? batch_size * kNumChoices : batch_size;
    at::Tensor ids = at::randint(0, c_.vocab, {rows, s}, gen, lopts);
    if (c_.pad) ids = ids.masked_fill(ids.eq(*c_.pad), (*c_.pad + 1) % c_.vocab);  // no stray pads
    at::Tensor mask = MakeAttentionMask(rows, s);
    if (c_.pad) ids = ids.masked_fill(mask.eq(0), *c_.pad);
    at::Tensor types = at::zeros({rows, s}, lopts);
    if (c_.type_vocab >= 2) types.narrow(1, s / 2, s - s / 2).fill_(1);
    Batch batch;
    auto shaped = [&](const at::Tensor& t) {
      return head_ == Head::kMultipleChoice ? t.view({batch_size, kNumChoices, s}) : t;
    };
    batch.inputs["input_ids"] = shaped(ids);
    batch.inputs["attention_mask"] = shaped(mask);
    if (c_.type_vocab > 0) batch.inputs["token_type_ids"] = shaped(types);
    switch (head_) {
      case Head::kBase:
        batch.labels["labels"] = at::randn({batch_size, s, c_.hidden}, gen, fopts);
        break;
      case Head::kSeqCls:
        batch.labels["labels"] = c_.num_labels == 1
                                     ? at::randn({batch_size}, gen, fopts)
                                     : at::randint(0, c_.num_labels, {batch_size}, gen, lopts);
        break;
      case Head::kMultipleChoice:
        batch.labels["labels"] = at::randint(0, kNumChoices, {batch_size}, gen, lopts);
        break;
      case Head::kNextSentence:
        batch.labels["labels"] = at::randint(0, 2, {batch_size}, gen, lopts);
        break;
      case Head::kCausalLM:
        batch.labels["labels"] = ids.masked_fill(mask.eq(0), -100);
        break;
      case Head::kTokenCls:
        batch.labels["labels"] =
            at::randint(0, c_.num_labels, {batch_size, s}, gen, lopts).masked_fill(mask.eq(0), -100);
        break;
      case Head::kQA: {
        at::Tensor start = at::randint(0, s / 2, {batch_size}, gen, lopts);
        batch.labels["start_positions"] = start;
        batch.labels["end_positions"] = start + at::randint(0, s / 4, {batch_size}, gen, lopts);
        break;
      }
      case Head::kMaskedLM: {
        at::Tensor pick = at::rand({batch_size, s}, gen, fopts).lt(0.15);
        pick.narrow(1, std::min<int64_t>(1, s - 1), 1).fill_(true);
        pick = at::logical_and(pick, mask.ne(0));
        batch.labels["labels"] = ids.masked_fill(pick.logical_not(), -100);
        break;
      }
    }
    return batch;
  }

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    // The base policy spots norms by "norm" in the name: "roberta_prelayernorm." is no norm.
    const std::string pre = "roberta_prelayernorm.";
    Model::InitWeight(name.rfind(pre, 0) == 0 ? name.substr(pre.size()) : name, t, gen);
    if (c_.pad && (name == word_ || (RobertaLike(c_.fam) && name == pos_))) t[*c_.pad].zero_();
  }

 private:

  // HF build_relative_position (+ make_log_bucket_position, float32 math): [S, S] int64 q - k,
  // built with tensor ops on `dev` (traceable; no host constants).
  at::Tensor RelativePositions(int64_t s, const at::Device& dev) const {
    auto lo = at::TensorOptions().dtype(at::kLong).device(dev);
    at::Tensor rel = at::arange(s, lo).unsqueeze(1) - at::arange(s, lo).unsqueeze(0);
    if (c_.buckets <= 0 || c_.max_rel <= 0) return rel;
    const int64_t mid = c_.buckets / 2;
    at::Tensor relf = rel.to(at::kFloat);
    at::Tensor sign = at::sign(relf);
    at::Tensor abs_pos = at::where(at::logical_and(rel.lt(mid), rel.gt(-mid)),
                                   at::full_like(relf, static_cast<double>(mid - 1)), relf.abs());
    const double denom = std::log(static_cast<double>(c_.max_rel - 1) / static_cast<double>(mid));
    at::Tensor log_pos =
        at::ceil(at::log(abs_pos / static_cast<double>(mid)) / denom * static_cast<double>(mid - 1)) +
        static_cast<double>(mid);
    return at::where(abs_pos.le(static_cast<double>(mid)), relf, log_pos * sign).to(at::kLong);
  }

  EncCfg c_;
  Head head_;
  Shapes shapes_;
  std::vector<LayerNames> layers_;
  std::string task_, final_ln_, final_lnb_;
  std::string word_, pos_, type_, emb_ln_, emb_lnb_, proj_, projb_, rel_, rel_ln_, rel_lnb_;
  std::string pool_, poolb_, dense_, denseb_, mlm_ln_, mlm_lnb_, out_, outb_;
  std::vector<int64_t> order_;  // stored blocks in execution order (albert repeats groups)
  int64_t seq_len_ = 32;
};

}  // namespace
}  // namespace ts::zoo::internal

namespace ts::zoo::internal {
namespace {

json WithArch(json c, const std::string& arch) {
  c["architectures"] = {arch};
  return c;
}

// Real-shaped examples, each modelled on a public checkpoint.
json RobertaExample(const char* model_type, int64_t vocab, int64_t bos, int64_t eos) {
  // roberta-base / xlm-roberta-base / camembert-base.
  return json{{"model_type", model_type}, {"attention_probs_dropout_prob", 0.1},
              {"bos_token_id", bos}, {"eos_token_id", eos}, {"pad_token_id", 1},
              {"hidden_act", "gelu"}, {"hidden_dropout_prob", 0.1}, {"hidden_size", 768},
              {"initializer_range", 0.02}, {"intermediate_size", 3072},
              {"layer_norm_eps", 1e-05}, {"max_position_embeddings", 514},
              {"num_attention_heads", 12}, {"num_hidden_layers", 12}, {"type_vocab_size", 1},
              {"vocab_size", vocab}};
}

json DistilExample() {  // distilbert-base-uncased
  return json{{"model_type", "distilbert"}, {"activation", "gelu"}, {"attention_dropout", 0.1},
              {"dim", 768}, {"dropout", 0.1}, {"hidden_dim", 3072}, {"initializer_range", 0.02},
              {"max_position_embeddings", 512}, {"n_heads", 12}, {"n_layers", 6},
              {"pad_token_id", 0}, {"qa_dropout", 0.1}, {"seq_classif_dropout", 0.2},
              {"sinusoidal_pos_embds", false}, {"tie_weights_", true}, {"vocab_size", 30522}};
}

json AlbertExample() {  // albert-base-v2
  return json{{"model_type", "albert"}, {"attention_probs_dropout_prob", 0}, {"bos_token_id", 2},
              {"classifier_dropout_prob", 0.1}, {"down_scale_factor", 1}, {"embedding_size", 128},
              {"eos_token_id", 3}, {"gap_size", 0}, {"hidden_act", "gelu_new"},
              {"hidden_dropout_prob", 0}, {"hidden_size", 768}, {"initializer_range", 0.02},
              {"inner_group_num", 1}, {"intermediate_size", 3072}, {"layer_norm_eps", 1e-12},
              {"max_position_embeddings", 512}, {"net_structure_type", 0},
              {"num_attention_heads", 12}, {"num_hidden_groups", 1}, {"num_hidden_layers", 12},
              {"num_memory_blocks", 0}, {"pad_token_id", 0}, {"type_vocab_size", 2},
              {"vocab_size", 30000}};
}

json ElectraExample(bool generator) {
  // google/electra-base-discriminator; the masked LM is google/electra-base-generator (its
  // embedding_size 768 != hidden_size 256, so the embedding projection is exercised).
  return json{{"model_type", "electra"}, {"attention_probs_dropout_prob", 0.1},
              {"embedding_size", 768}, {"hidden_act", "gelu"}, {"hidden_dropout_prob", 0.1},
              {"hidden_size", generator ? 256 : 768}, {"initializer_range", 0.02},
              {"intermediate_size", generator ? 1024 : 3072}, {"layer_norm_eps", 1e-12},
              {"max_position_embeddings", 512}, {"num_attention_heads", generator ? 4 : 12},
              {"num_hidden_layers", 12}, {"pad_token_id", 0}, {"type_vocab_size", 2},
              {"vocab_size", 30522}};
}

json DebertaExample() {  // microsoft/deberta-v3-base
  return json{{"model_type", "deberta-v2"}, {"attention_probs_dropout_prob", 0.1},
              {"hidden_act", "gelu"}, {"hidden_dropout_prob", 0.1}, {"hidden_size", 768},
              {"initializer_range", 0.02}, {"intermediate_size", 3072},
              {"max_position_embeddings", 512}, {"relative_attention", true},
              {"position_buckets", 256}, {"norm_rel_ebd", "layer_norm"}, {"share_att_key", true},
              {"pos_att_type", "p2c|c2p"}, {"layer_norm_eps", 1e-7},
              {"max_relative_positions", -1}, {"position_biased_input", false},
              {"num_attention_heads", 12}, {"num_hidden_layers", 12}, {"type_vocab_size", 0},
              {"pad_token_id", 0}, {"vocab_size", 128100}};
}

json BertExample() {  // bert-base-uncased
  return json{{"model_type", "bert"}, {"hidden_size", 768}, {"intermediate_size", 3072},
              {"num_attention_heads", 12}, {"num_hidden_layers", 12}, {"vocab_size", 30522},
              {"max_position_embeddings", 512}, {"type_vocab_size", 2}, {"hidden_act", "gelu"},
              {"layer_norm_eps", 1e-12}, {"pad_token_id", 0}};
}

json ErnieExample() {  // nghuyong/ernie-3.0-base-zh
  return json{{"model_type", "ernie"}, {"attention_probs_dropout_prob", 0.1},
              {"hidden_act", "gelu"}, {"hidden_dropout_prob", 0.1}, {"hidden_size", 768},
              {"initializer_range", 0.02}, {"intermediate_size", 3072}, {"layer_norm_eps", 1e-05},
              {"max_position_embeddings", 2048}, {"num_attention_heads", 12},
              {"num_hidden_layers", 12}, {"task_type_vocab_size", 3}, {"type_vocab_size", 4},
              {"use_task_id", true}, {"vocab_size", 40000}, {"pad_token_id", 0}};
}

json MegatronExample() {  // nvidia/megatron-bert-cased-345m
  return json{{"model_type", "megatron-bert"}, {"attention_probs_dropout_prob", 0.1},
              {"hidden_act", "gelu"}, {"hidden_dropout_prob", 0.1}, {"hidden_size", 1024},
              {"initializer_range", 0.02}, {"intermediate_size", 4096}, {"layer_norm_eps", 1e-12},
              {"max_position_embeddings", 512}, {"num_attention_heads", 16},
              {"num_hidden_layers", 24}, {"type_vocab_size", 2}, {"vocab_size", 29056},
              {"pad_token_id", 0}};
}

json BigBirdExample() {  // google/bigbird-roberta-base
  return json{{"model_type", "big_bird"}, {"attention_probs_dropout_prob", 0.1},
              {"attention_type", "block_sparse"}, {"block_size", 64}, {"bos_token_id", 1},
              {"eos_token_id", 2}, {"hidden_act", "gelu_new"}, {"hidden_dropout_prob", 0.1},
              {"hidden_size", 768}, {"initializer_range", 0.02}, {"intermediate_size", 3072},
              {"layer_norm_eps", 1e-12}, {"max_position_embeddings", 4096},
              {"num_attention_heads", 12}, {"num_hidden_layers", 12}, {"num_random_blocks", 3},
              {"pad_token_id", 0}, {"rescale_embeddings", false}, {"sep_token_id", 66},
              {"type_vocab_size", 2}, {"use_bias", true}, {"vocab_size", 50358}};
}

json BertGenExample() {  // google/bert_for_seq_generation_L-24_bbc_encoder
  return json{{"model_type", "bert-generation"}, {"attention_probs_dropout_prob", 0.1},
              {"bos_token_id", 2}, {"eos_token_id", 1}, {"hidden_act", "gelu"},
              {"hidden_dropout_prob", 0.1}, {"hidden_size", 1024}, {"initializer_range", 0.02},
              {"intermediate_size", 4096}, {"layer_norm_eps", 1e-12},
              {"max_position_embeddings", 512}, {"num_attention_heads", 16},
              {"num_hidden_layers", 24}, {"pad_token_id", 0}, {"vocab_size", 50358}};
}

json XlmrXlExample() {  // facebook/xlm-roberta-xl
  json c = RobertaExample("xlm-roberta-xl", 250880, 0, 2);
  c["hidden_size"] = 2560;
  c["intermediate_size"] = 10240;
  c["num_attention_heads"] = 32;
  c["num_hidden_layers"] = 36;
  return c;
}

ArchEntry Entry(const std::string& arch, const std::string& family, Fam fam, Head head,
                const json& example, const std::string& base) {
  const char* task = "feature-extraction";
  switch (head) {
    case Head::kBase: break;
    case Head::kSeqCls: task = "text-classification"; break;
    case Head::kTokenCls: task = "token-classification"; break;
    case Head::kQA: task = "question-answering"; break;
    case Head::kMaskedLM: task = "fill-mask"; break;
    case Head::kMultipleChoice: task = "multiple-choice"; break;
    case Head::kCausalLM: task = "text-generation"; break;
    case Head::kNextSentence: task = "next-sentence-prediction"; break;
  }
  ArchEntry e;
  e.info = {arch, family, task};
  e.example_config = WithArch(example, arch);
  // A causal-LM checkpoint of an encoder family is saved with is_decoder (HF warns otherwise).
  if (head == Head::kCausalLM) e.example_config["is_decoder"] = true;
  e.scale = [fam](const json& c) { return ScaleEnc(c, fam); };
  e.build = [fam, head, base](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(EncCfg c, ParseEnc(spec.tiny_config, fam));
    c.base = base;
    return std::unique_ptr<Model>(std::make_unique<EncoderImpl>(std::move(spec), std::move(c), head));
  };
  return e;
}

// Which optional heads a family has in transformers.
struct Extra {
  bool causal = false, nsp = false, qa = true;
};

void AddAllHeads(std::vector<ArchEntry>& out, const std::string& prefix, const std::string& family,
                 Fam fam, const json& example, const json& mlm_example, const std::string& base,
                 Extra extra = Extra()) {
  out.push_back(Entry(prefix + "Model", family, fam, Head::kBase, example, base));
  out.push_back(Entry(prefix + "ForSequenceClassification", family, fam, Head::kSeqCls, example, base));
  out.push_back(Entry(prefix + "ForTokenClassification", family, fam, Head::kTokenCls, example, base));
  if (extra.qa) out.push_back(Entry(prefix + "ForQuestionAnswering", family, fam, Head::kQA, example, base));
  out.push_back(Entry(prefix + "ForMaskedLM", family, fam, Head::kMaskedLM, mlm_example, base));
  out.push_back(Entry(prefix + "ForMultipleChoice", family, fam, Head::kMultipleChoice, example, base));
  if (extra.causal) out.push_back(Entry(prefix + "ForCausalLM", family, fam, Head::kCausalLM, mlm_example, base));
  if (extra.nsp) {
    out.push_back(Entry(prefix + "ForNextSentencePrediction", family, fam, Head::kNextSentence, example, base));
  }
}

}  // namespace

std::vector<ArchEntry> EncoderZooArchs() {
  std::vector<ArchEntry> v;
  const Extra causal{true, false, true}, causal_nsp{true, true, true};
  v.push_back(Entry("BertForTokenClassification", "bert", Fam::kBert, Head::kTokenCls, BertExample(), "bert."));
  v.push_back(Entry("BertForQuestionAnswering", "bert", Fam::kBert, Head::kQA, BertExample(), "bert."));
  v.push_back(Entry("BertForMultipleChoice", "bert", Fam::kBert, Head::kMultipleChoice, BertExample(), "bert."));
  v.push_back(Entry("BertLMHeadModel", "bert", Fam::kBert, Head::kCausalLM, BertExample(), "bert."));
  v.push_back(Entry("BertForNextSentencePrediction", "bert", Fam::kBert, Head::kNextSentence,
                    BertExample(), "bert."));
  const json rob = RobertaExample("roberta", 50265, 0, 2);
  AddAllHeads(v, "Roberta", "roberta", Fam::kRoberta, rob, rob, "roberta.", causal);
  const json xlmr = RobertaExample("xlm-roberta", 250002, 0, 2);
  AddAllHeads(v, "XLMRoberta", "xlm-roberta", Fam::kRoberta, xlmr, xlmr, "roberta.", causal);
  const json cam = RobertaExample("camembert", 32005, 5, 6);
  AddAllHeads(v, "Camembert", "camembert", Fam::kRoberta, cam, cam, "roberta.", causal);
  const json d2v = RobertaExample("data2vec-text", 50265, 0, 2);  // facebook/data2vec-text-base
  AddAllHeads(v, "Data2VecText", "data2vec-text", Fam::kRoberta, d2v, d2v, "data2vec_text.", causal);
  // andreasmadsen/efficient_mlm_m0.40 (roberta-base shapes).
  const json pre = RobertaExample("roberta-prelayernorm", 50265, 0, 2);
  AddAllHeads(v, "RobertaPreLayerNorm", "roberta-prelayernorm", Fam::kRobertaPre, pre, pre,
              "roberta_prelayernorm.", causal);
  AddAllHeads(v, "XLMRobertaXL", "xlm-roberta-xl", Fam::kXlmrXl, XlmrXlExample(), XlmrXlExample(),
              "roberta.", causal);
  AddAllHeads(v, "DistilBert", "distilbert", Fam::kDistil, DistilExample(), DistilExample(), "distilbert.");
  AddAllHeads(v, "Albert", "albert", Fam::kAlbert, AlbertExample(), AlbertExample(), "albert.");
  AddAllHeads(v, "Electra", "electra", Fam::kElectra, ElectraExample(false), ElectraExample(true),
              "electra.", causal);
  AddAllHeads(v, "DebertaV2", "deberta-v2", Fam::kDeberta, DebertaExample(), DebertaExample(), "deberta.");
  AddAllHeads(v, "Ernie", "ernie", Fam::kErnie, ErnieExample(), ErnieExample(), "ernie.", causal_nsp);
  AddAllHeads(v, "MegatronBert", "megatron-bert", Fam::kMegatron, MegatronExample(), MegatronExample(),
              "bert.", causal_nsp);
  // BigBirdForQuestionAnswering has its own QA classifier head: not built.
  AddAllHeads(v, "BigBird", "big_bird", Fam::kBigBird, BigBirdExample(), BigBirdExample(), "bert.",
              Extra{true, false, false});
  v.push_back(Entry("BertGenerationEncoder", "bert-generation", Fam::kBertGen, Head::kBase,
                    BertGenExample(), "bert."));
  v.push_back(Entry("BertGenerationDecoder", "bert-generation", Fam::kBertGen, Head::kCausalLM,
                    BertGenExample(), "bert."));
  return v;
}

}  // namespace ts::zoo::internal
