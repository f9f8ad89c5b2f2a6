// whisper (README.md): an encoder-decoder over log-mel features. The encoder starts from a conv
// stem (two convs, gelu, the second with stride 2) plus sliced learned positions; both stacks are
// pre-LN with final layer_norm; k_proj has no bias; the decoder owns its embed_tokens, to which
// proj_out is tied. Classes: ForConditionalGeneration ("model."), Model, ForAudioClassification
// (the encoder alone, then projector, mean over frames, classifier), ForCausalLM (the decoder
// alone under "model.decoder", proj_out, CrossEntropyLoss over every position unshifted).
#include <algorithm>

#include "workers/zoo/config.h"
#include "workers/zoo/families/bart.h"
#include "workers/zoo/families/config_fields.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/encoder_decoder_heads.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using P = TinyProfile;
using json = nlohmann::json;

struct WhisperConfig {
  int64_t vocab = 0, d_model = 0, enc_layers = 0, dec_layers = 0, enc_heads = 0, dec_heads = 0;
  int64_t enc_ffn = 0, dec_ffn = 0, mel = 80, max_source = 1500, max_target = 448;
  int64_t decoder_start = 50257, pad = 50256;
  Activation act = Activation::kGeluErf;
  bool scale_embedding = false;
  int64_t proj_size = 256, num_labels = 2;  // WhisperForAudioClassification
};

Status HeadsDivide(const ConfigReader& r, const std::string& heads_field, int64_t hidden,
                   int64_t heads) {
  if (hidden % heads != 0) {
    return r.Error(heads_field, "must divide hidden size (" + std::to_string(hidden) + " % " +
                                    std::to_string(heads) + " != 0)");
  }
  return OkStatus();
}

Status ParseWhisperSizes(const ConfigReader& r, WhisperConfig& c) {
  TS_ASSIGN_OR_RETURN(c.vocab, PositiveField(r, "vocab_size"));
  TS_ASSIGN_OR_RETURN(c.d_model, PositiveField(r, "d_model"));
  TS_ASSIGN_OR_RETURN(c.enc_layers, PositiveField(r, "encoder_layers"));
  TS_ASSIGN_OR_RETURN(c.dec_layers, PositiveField(r, "decoder_layers"));
  TS_ASSIGN_OR_RETURN(c.enc_heads, PositiveField(r, "encoder_attention_heads"));
  TS_ASSIGN_OR_RETURN(c.dec_heads, PositiveField(r, "decoder_attention_heads"));
  TS_RETURN_IF_ERROR(HeadsDivide(r, "encoder_attention_heads", c.d_model, c.enc_heads));
  TS_RETURN_IF_ERROR(HeadsDivide(r, "decoder_attention_heads", c.d_model, c.dec_heads));
  TS_ASSIGN_OR_RETURN(c.enc_ffn, PositiveField(r, "encoder_ffn_dim"));
  TS_ASSIGN_OR_RETURN(c.dec_ffn, PositiveField(r, "decoder_ffn_dim"));
  TS_ASSIGN_OR_RETURN(c.mel, PositiveField(r, "num_mel_bins", 80));
  TS_ASSIGN_OR_RETURN(c.max_source, PositiveField(r, "max_source_positions", 1500));
  TS_ASSIGN_OR_RETURN(c.max_target, PositiveField(r, "max_target_positions", 448));
  return OkStatus();
}

StatusOr<WhisperConfig> ParseWhisper(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  WhisperConfig c;
  TS_RETURN_IF_ERROR(ParseWhisperSizes(r, c));
  TS_ASSIGN_OR_RETURN(c.decoder_start, r.Int("decoder_start_token_id", 50257));
  if (c.decoder_start < 0 || c.decoder_start >= c.vocab) {
    return r.Error("decoder_start_token_id", "must be a token id below vocab_size");
  }
  TS_ASSIGN_OR_RETURN(c.pad, r.Int("pad_token_id", 50256));
  if (c.pad < 0 || c.pad >= c.vocab)
    return r.Error("pad_token_id", "must be a token id below vocab_size");
  TS_ASSIGN_OR_RETURN(std::string act, r.String("activation_function", "gelu"));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, "activation_function"));
  TS_ASSIGN_OR_RETURN(c.scale_embedding, r.Bool("scale_embedding", false));
  TS_ASSIGN_OR_RETURN(bool tie, r.Bool("tie_word_embeddings", true));
  if (!tie) return r.Error("tie_word_embeddings", "only tied proj_out is supported");
  TS_ASSIGN_OR_RETURN(c.proj_size, PositiveField(r, "classifier_proj_size", 256));
  TS_ASSIGN_OR_RETURN(bool weighted, r.Bool("use_weighted_layer_sum", false));
  if (weighted) return r.Error("use_weighted_layer_sum", "true is not supported by the zoo");
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleWhisper(const json& config) {
  TS_ASSIGN_OR_RETURN(WhisperConfig c, ParseWhisper(config));
  json t = config;
  const int64_t heads = std::min(c.enc_heads, P::kHeads);
  const int64_t d = heads * (P::kHidden / P::kHeads);
  t["d_model"] = d;
  t["encoder_attention_heads"] = heads;
  t["decoder_attention_heads"] = std::min(c.dec_heads, P::kHeads);
  if (d % t["decoder_attention_heads"].get<int64_t>() != 0) t["decoder_attention_heads"] = heads;
  t["encoder_ffn_dim"] = ScaleRatio(c.enc_ffn, c.d_model, d, 8);
  t["decoder_ffn_dim"] = ScaleRatio(c.dec_ffn, c.d_model, d, 8);
  t["encoder_layers"] = TinyDepth(c.enc_layers, false);
  t["decoder_layers"] = TinyDepth(c.dec_layers, false);
  t["num_hidden_layers"] = TinyDepth(c.enc_layers, false);
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"})
    MapTokenId(t, f, vocab);
  t.erase("suppress_tokens");
  t.erase("begin_suppress_tokens");
  t.erase("forced_decoder_ids");
  t["max_source_positions"] = std::min<int64_t>(c.max_source, 16);
  t["max_target_positions"] = std::min<int64_t>(c.max_target, 2 * kWhisperDecoderLen);
  t["classifier_proj_size"] = std::min<int64_t>(c.proj_size, 32);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, kWhisperDecoderLen);
  return t;
}

EncDecRecipe WhisperRecipe(const WhisperConfig& c, Seq2SeqHead head) {
  EncDecRecipe r;
  r.naming = EncDecRecipe::Naming::kBart;
  r.norm = EncDecRecipe::Norm::kLayerNorm;
  r.eps = 1e-5;
  r.d_model = c.d_model;
  r.act = c.act;
  r.k_bias = false;
  r.positions = EncDecRecipe::Positions::kSlice;
  r.scale_embedding = c.scale_embedding;
  r.front = EncDecRecipe::Front::kWhisperConv;
  const bool causal = head == Seq2SeqHead::kCausalLM;
  const std::string pre = head == Seq2SeqHead::kConditionalGeneration || causal ? "model." : "";
  r.encoder = EncDecStack::Of(pre + "encoder", c.enc_layers, c.enc_heads, c.enc_ffn);
  r.encoder.positions = c.max_source;
  r.decoder = EncDecStack::Of(pre + "decoder", c.dec_layers, c.dec_heads, c.dec_ffn);
  r.decoder.decoder = true;
  r.decoder.cross = !causal;  // WhisperForCausalLM never has encoder states
  r.decoder.own_embedding = true;
  r.decoder.positions = c.max_target;
  r.decoder.decoder_mask = true;
  r.batch = EncDecRecipe::Batch::kWhisper;
  r.vocab = c.vocab;
  r.num_labels = c.num_labels;
  r.start = c.decoder_start;
  if (causal) {
    r.pad = c.pad;
    r.causal_loss_shifted = false;
  }
  r.mel = c.mel;
  r.max_source = c.max_source;
  r.proj_size = c.proj_size;
  return r;
}

ArchEntry WhisperEntry(const std::string& arch, const char* task, Seq2SeqHead head, json example) {
  example["architectures"] = {arch};
  auto build = [head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(WhisperConfig c, ParseWhisper(spec.tiny_config));
    EncDecRecipe r = WhisperRecipe(c, head);
    if (head == Seq2SeqHead::kConditionalGeneration) {
      return MakeSeq2SeqLm(std::move(spec), std::move(r));
    }
    if (head == Seq2SeqHead::kAudioClassification) {
      return MakeWhisperAudioClassification(std::move(spec), std::move(r));
    }
    if (head == Seq2SeqHead::kCausalLM) return MakeDecoderCausalLm(std::move(spec), std::move(r));
    return MakeSeq2SeqBase(std::move(spec), std::move(r), head);
  };
  // WhisperForConditionalGeneration and WhisperForCausalLM tie proj_out (not lm_head) to the
  // decoder's embed_tokens; the decoder-only class keeps its layers' unused cross-attention.
  StateDictRules rules{.tied_output = "proj_out"};
  if (head == Seq2SeqHead::kCausalLM) rules.extra = AddUnusedCrossAttention;
  return {{arch, "whisper", task}, std::move(example), ScaleWhisper, build, std::move(rules)};
}

}  // namespace

std::vector<ArchEntry> WhisperArchs() {
  // Modelled on openai/whisper-tiny.
  const json whisper = {{"architectures", {"WhisperForConditionalGeneration"}},
                        {"model_type", "whisper"},
                        {"vocab_size", 51865},
                        {"d_model", 384},
                        {"encoder_layers", 4},
                        {"decoder_layers", 4},
                        {"encoder_attention_heads", 6},
                        {"decoder_attention_heads", 6},
                        {"encoder_ffn_dim", 1536},
                        {"decoder_ffn_dim", 1536},
                        {"num_mel_bins", 80},
                        {"max_source_positions", 1500},
                        {"max_target_positions", 448},
                        {"activation_function", "gelu"},
                        {"scale_embedding", false},
                        {"pad_token_id", 50257},
                        {"bos_token_id", 50257},
                        {"eos_token_id", 50257},
                        {"decoder_start_token_id", 50258},
                        {"tie_word_embeddings", true},
                        {"num_hidden_layers", 4},
                        {"init_std", 0.02}};
  // sanchit-gandhi/whisper-small-ft-common-language-id style: whisper encoder + classifier.
  json whisper_cls = whisper;
  whisper_cls["classifier_proj_size"] = 256;
  whisper_cls["use_weighted_layer_sum"] = false;
  whisper_cls["num_labels"] = 2;
  json whisper_causal = whisper;
  whisper_causal["is_encoder_decoder"] = false;
  using Head = Seq2SeqHead;
  return {WhisperEntry("WhisperForConditionalGeneration", "automatic-speech-recognition",
                       Head::kConditionalGeneration, whisper),
          WhisperEntry("WhisperModel", "feature-extraction", Head::kModel, whisper),
          WhisperEntry("WhisperForAudioClassification", "audio-classification",
                       Head::kAudioClassification, whisper_cls),
          // distil-whisper/distil-large-v2's decoder as a speculative-decoding assistant
          // (WhisperDecoderWrapper: `model.decoder`), on whisper-tiny's sizes.
          WhisperEntry("WhisperForCausalLM", "text-generation", Head::kCausalLM, whisper_causal)};
}

TS_ZOO_REGISTER_FAMILY(Whisper, WhisperArchs);

}  // namespace ts::zoo::internal
