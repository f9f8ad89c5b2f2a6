// t5 (README.md): T5LayerNorm (RMS, no bias), unscaled q k^T, relative position bias buckets
// (bidirectional in the encoder, causal in the decoder) owned by block 0 of each stack and shared
// by all its blocks; DenseReluDense (relu) or gated (feed_forward_proj "gated-gelu": wi_0 / wi_1,
// gelu_new); tied lm_head scales the decoder output by d_model**-0.5. Classes:
// ForConditionalGeneration, Model, EncoderModel, ForTokenClassification.
#include "workers/zoo/families/t5.h"

#include <algorithm>
#include <cmath>

#include "workers/zoo/config.h"
#include "workers/zoo/families/config_fields.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

Status Positive(const ConfigReader& r, const std::string& f, int64_t v) {
  if (v <= 0) return r.Error(f, "must be positive (got " + std::to_string(v) + ")");
  return OkStatus();
}

// `name`, or its transformers attribute_map alias when only that is present.
StatusOr<int64_t> IntAlias(const ConfigReader& r, const std::string& name,
                           const std::string& alias) {
  if (!r.Has(name) && r.Has(alias)) return r.Int(alias);
  return r.Int(name);
}

Status ParseT5Sizes(const ConfigReader& r, T5Cfg& c) {
  TS_ASSIGN_OR_RETURN(c.vocab, r.Int("vocab_size"));
  TS_RETURN_IF_ERROR(Positive(r, "vocab_size", c.vocab));
  TS_ASSIGN_OR_RETURN(c.d_model, IntAlias(r, "d_model", "hidden_size"));
  TS_RETURN_IF_ERROR(Positive(r, "d_model", c.d_model));
  TS_ASSIGN_OR_RETURN(c.heads, IntAlias(r, "num_heads", "num_attention_heads"));
  TS_RETURN_IF_ERROR(Positive(r, "num_heads", c.heads));
  TS_ASSIGN_OR_RETURN(c.layers, IntAlias(r, "num_layers", "num_hidden_layers"));
  TS_RETURN_IF_ERROR(Positive(r, "num_layers", c.layers));
  TS_ASSIGN_OR_RETURN(c.dec_layers, r.Int("num_decoder_layers", c.layers));
  TS_RETURN_IF_ERROR(Positive(r, "num_decoder_layers", c.dec_layers));
  TS_ASSIGN_OR_RETURN(c.d_ff, r.Int("d_ff", 2048));  // T5Config default
  TS_RETURN_IF_ERROR(Positive(r, "d_ff", c.d_ff));
  TS_ASSIGN_OR_RETURN(c.d_kv, r.Int("d_kv", 64));
  TS_RETURN_IF_ERROR(Positive(r, "d_kv", c.d_kv));
  TS_ASSIGN_OR_RETURN(c.buckets, r.Int("relative_attention_num_buckets", 32));
  if (c.buckets < 2) {
    return r.Error("relative_attention_num_buckets",
                   "must be >= 2 (got " + std::to_string(c.buckets) + ")");
  }
  TS_ASSIGN_OR_RETURN(c.max_distance, r.Int("relative_attention_max_distance", 128));
  if (c.max_distance <= c.buckets / 4) {
    return r.Error("relative_attention_max_distance",
                   "must exceed relative_attention_num_buckets / 4 (got " +
                       std::to_string(c.max_distance) + ")");
  }
  return OkStatus();
}

}  // namespace

StatusOr<T5Cfg> ParseT5Base(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  T5Cfg c;
  TS_RETURN_IF_ERROR(ParseT5Sizes(r, c));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_epsilon", 1e-6));
  if (!(c.eps > 0.0) || !std::isfinite(c.eps)) {
    return r.Error("layer_norm_epsilon", "must be positive");
  }
  TS_RETURN_IF_ERROR(ReadSeq2SeqTokens(r, /*pad_def=*/0, /*eos_def=*/1, /*start_is_eos=*/false, c));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

namespace {

StatusOr<T5Cfg> ParseT5(const json& config) {
  TS_ASSIGN_OR_RETURN(T5Cfg c, ParseT5Base(config));
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(std::string ff, r.String("feed_forward_proj", "relu"));
  std::string act = ff;
  if (ff.rfind("gated-", 0) == 0) {
    c.gated = true;
    act = ff.substr(6);
  } else if (ff.find('-') != std::string::npos) {
    return r.Error("feed_forward_proj", "unknown '" + ff + "'");
  }
  // T5Config keeps "gated-gelu" as gelu_new for backward compatibility; any other act_fn,
  // plain "gelu" included, is ACT2FN[act] (exact erf GELU for "gelu").
  if (ff == "gated-gelu") act = "gelu_new";
  auto parsed = ParseActivation(act, r.Name("feed_forward_proj"));
  if (!parsed.ok()) return r.Error("feed_forward_proj", "unknown '" + ff + "'");
  c.act = *parsed;
  return c;
}

}  // namespace

// umt5 keeps two layers per stack at tiny size, so that block 1's own relative bias is in play.
StatusOr<json> ScaleT5(const json& config, const std::string& family) {
  using P = TinyProfile;
  TS_ASSIGN_OR_RETURN(T5Cfg c, ParseT5Base(config));
  json t = config;
  for (const char* a : {"hidden_size", "num_attention_heads", "num_hidden_layers"}) t.erase(a);
  const int64_t heads = std::min(c.heads, P::kHeads);
  const int64_t d_kv = P::kHidden / heads;
  t["num_heads"] = heads;
  t["d_kv"] = d_kv;
  t["d_model"] = heads * d_kv;
  t["d_ff"] = ScaleRatio(c.d_ff, c.d_model, heads * d_kv, 8);
  const bool per_layer_bias = family == "umt5";
  t["num_layers"] = per_layer_bias ? std::min<int64_t>(c.layers, 2) : TinyDepth(c.layers, false);
  t["num_decoder_layers"] =
      per_layer_bias ? std::min<int64_t>(c.dec_layers, 2) : TinyDepth(c.dec_layers, false);
  // 32 buckets / distance 128 -> 8 / 32: log-spaced buckets still bite within 32 tokens.
  const int64_t b = std::max<int64_t>(4, c.buckets / 4);
  t["relative_attention_num_buckets"] = b;
  t["relative_attention_max_distance"] =
      std::max<int64_t>(b, ScaleRatio(c.max_distance, c.buckets, b, 2));
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"})
    MapTokenId(t, f, vocab);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, P::kSeqLen);
  return t;
}

EncDecRecipe T5Recipe(const T5Cfg& c, Seq2SeqHead head, const std::string& family) {
  EncDecRecipe r;
  r.naming = EncDecRecipe::Naming::kT5;
  r.norm = EncDecRecipe::Norm::kRms;
  r.eps = c.eps;
  r.d_model = c.d_model;
  r.head_dim = c.d_kv;
  r.act = c.act;
  r.gated_ffn = c.gated;
  r.bias = false;
  r.rel_buckets = c.buckets;
  r.rel_max_distance = c.max_distance;
  r.rel_per_layer = family == "umt5";
  r.encoder_norms_kv_apart = true;
  // T5ForTokenClassification wraps a T5EncoderModel as `transformer`,
  // T5ForSequenceClassification a T5Model; T5ForQuestionAnswering holds the stacks itself.
  const bool wrapped = head == Seq2SeqHead::kTokenClassification ||
                       head == Seq2SeqHead::kSequenceClassification;
  const std::string pre = wrapped ? "transformer." : "";
  r.shared = pre + "shared.weight";
  r.encoder = EncDecStack::Of(pre + "encoder", c.layers, c.heads, c.d_ff);
  r.decoder = EncDecStack::Of(pre + "decoder", c.dec_layers, c.heads, c.d_ff);
  r.decoder.decoder = true;
  r.decoder.cross = true;
  r.batch = EncDecRecipe::Batch::kT5;
  r.vocab = c.vocab;
  r.num_labels = c.num_labels;
  r.pad = c.pad;
  r.eos = c.eos;
  r.start = c.start;
  r.tie = c.tie;
  r.lm_scale_tied = true;
  return r;
}

namespace {

json T5SmallExample() {  // t5-small
  return json{{"model_type", "t5"},
              {"d_ff", 2048},
              {"d_kv", 64},
              {"d_model", 512},
              {"decoder_start_token_id", 0},
              {"dropout_rate", 0.1},
              {"eos_token_id", 1},
              {"feed_forward_proj", "relu"},
              {"initializer_factor", 1.0},
              {"is_encoder_decoder", true},
              {"layer_norm_epsilon", 1e-06},
              {"n_positions", 512},
              {"num_heads", 8},
              {"num_layers", 6},
              {"pad_token_id", 0},
              {"relative_attention_num_buckets", 32},
              {"vocab_size", 32128}};
}

json T5V11Example() {  // google/t5-v1_1-base
  return json{{"model_type", "t5"},
              {"d_ff", 2048},
              {"d_kv", 64},
              {"d_model", 768},
              {"decoder_start_token_id", 0},
              {"dropout_rate", 0.1},
              {"eos_token_id", 1},
              {"feed_forward_proj", "gated-gelu"},
              {"initializer_factor", 1.0},
              {"is_encoder_decoder", true},
              {"layer_norm_epsilon", 1e-06},
              {"num_heads", 12},
              {"num_layers", 12},
              {"pad_token_id", 0},
              {"relative_attention_num_buckets", 32},
              {"tie_word_embeddings", false},
              {"vocab_size", 32128}};
}

}  // namespace

std::string T5PipelineTag(Seq2SeqHead head) {
  return head == Seq2SeqHead::kConditionalGeneration    ? "text2text-generation"
         : head == Seq2SeqHead::kTokenClassification    ? "token-classification"
         : head == Seq2SeqHead::kSequenceClassification ? "text-classification"
         : head == Seq2SeqHead::kQuestionAnswering      ? "question-answering"
                                                        : "feature-extraction";
}

ArchEntry T5Entry(const std::string& arch, const std::string& family, Seq2SeqHead head,
                  json example) {
  ArchEntry e;
  e.info = {arch, family, T5PipelineTag(head)};
  example["architectures"] = {arch};
  if (head == Seq2SeqHead::kTokenClassification || head == Seq2SeqHead::kSequenceClassification ||
      head == Seq2SeqHead::kQuestionAnswering)
    example["num_labels"] = 2;
  e.example_config = std::move(example);
  e.scale = [family](const json& c) -> StatusOr<json> {
    TS_RETURN_IF_ERROR(ParseT5(c).status());  // feed_forward_proj refused before scaling
    return ScaleT5(c, family);
  };
  e.build = [head, family](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(T5Cfg c, ParseT5(spec.tiny_config));
    EncDecRecipe r = T5Recipe(c, head, family);
    switch (head) {
      case Seq2SeqHead::kConditionalGeneration:
        return MakeSeq2SeqLm(std::move(spec), std::move(r));
      case Seq2SeqHead::kTokenClassification:
      case Seq2SeqHead::kSequenceClassification:
      case Seq2SeqHead::kQuestionAnswering:
        return MakeSeq2SeqClassification(std::move(spec), std::move(r), head);
      default:
        return MakeSeq2SeqBase(std::move(spec), std::move(r), head);
    }
  };
  return e;
}

std::vector<ArchEntry> T5StyleArchs(const std::string& prefix, const std::string& family,
                                    const json& lm_example, const json& example) {
  using Head = Seq2SeqHead;
  return {
      T5Entry(prefix + "ForConditionalGeneration", family, Head::kConditionalGeneration,
              lm_example),
      T5Entry(prefix + "Model", family, Head::kModel, example),
      T5Entry(prefix + "EncoderModel", family, Head::kEncoderModel, example),
      T5Entry(prefix + "ForTokenClassification", family, Head::kTokenClassification, example),
      T5Entry(prefix + "ForSequenceClassification", family, Head::kSequenceClassification, example),
      T5Entry(prefix + "ForQuestionAnswering", family, Head::kQuestionAnswering, example)};
}

namespace {

std::vector<ArchEntry> T5Archs() {
  return T5StyleArchs("T5", "t5", T5SmallExample(), T5V11Example());
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(T5, T5Archs);

}  // namespace ts::zoo::internal
