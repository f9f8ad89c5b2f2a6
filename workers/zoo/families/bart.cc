// bart (README.md): learned positions (offset 2), layernorm_embedding, optional sqrt(d_model)
// embedding scale, q/k/v/out biases, gelu fc1/fc2, post-LN; lm_head tied to shared +
// final_logits_bias. Classes: ForConditionalGeneration, Model, ForSequenceClassification (decoder
// state at the last eos of input_ids; dense, tanh, out_proj), ForQuestionAnswering, ForCausalLM
// (the decoder alone). mvp (RUCAIBox/mvp without prompts) and plbart (BART layers, scaled
// embeddings, mBART's shift) are this lineage too (families/mvp.cc, families/plbart.cc).
#include "workers/zoo/families/bart.h"

#include <algorithm>
#include <optional>

#include "workers/zoo/config.h"
#include "workers/zoo/families/config_fields.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct BartCfg {
  int64_t vocab = 0, d_model = 0, enc_layers = 0, dec_layers = 0, enc_heads = 0, dec_heads = 0;
  int64_t enc_ffn = 0, dec_ffn = 0, max_pos = 1024, num_labels = 3;
  int64_t pad = 1, eos = 2, start = 2;
  Activation act = Activation::kGeluErf;
  bool scale_embedding = false, tie = true;
};

Status ParseBartSizes(const ConfigReader& r, BartCfg& c) {
  auto pos = [&](const std::string& f, int64_t& out, std::optional<int64_t> def) -> Status {
    StatusOr<int64_t> v = def ? r.Int(f, *def) : r.Int(f);
    if (!v.ok()) return v.status();
    if (*v <= 0) return r.Error(f, "must be positive (got " + std::to_string(*v) + ")");
    out = *v;
    return OkStatus();
  };
  TS_RETURN_IF_ERROR(pos("vocab_size", c.vocab, std::nullopt));
  TS_RETURN_IF_ERROR(pos("d_model", c.d_model, std::nullopt));
  TS_RETURN_IF_ERROR(pos("encoder_layers", c.enc_layers, std::nullopt));
  TS_RETURN_IF_ERROR(pos("decoder_layers", c.dec_layers, std::nullopt));
  TS_RETURN_IF_ERROR(pos("encoder_attention_heads", c.enc_heads, std::nullopt));
  TS_RETURN_IF_ERROR(pos("decoder_attention_heads", c.dec_heads, std::nullopt));
  for (const char* f : {"encoder_attention_heads", "decoder_attention_heads"}) {
    const int64_t h = std::string(f) == "encoder_attention_heads" ? c.enc_heads : c.dec_heads;
    if (c.d_model % h != 0) {
      return r.Error(f, "must divide d_model (" + std::to_string(c.d_model) + " % " +
                            std::to_string(h) + " != 0)");
    }
  }
  TS_RETURN_IF_ERROR(pos("encoder_ffn_dim", c.enc_ffn, 4096));
  TS_RETURN_IF_ERROR(pos("decoder_ffn_dim", c.dec_ffn, 4096));
  TS_RETURN_IF_ERROR(pos("max_position_embeddings", c.max_pos, 1024));
  return OkStatus();
}

// The config classes' token defaults (pad, eos, decoder start) of the lineage.
struct TokenDefaults {
  int64_t pad = 1, eos = 2, start = 2;
};
TokenDefaults FamilyTokens(const std::string& family) {
  if (family == "marian") return {58100, 0, 58100};          // MarianConfig: start = pad
  if (family == "pegasus") return {0, 1, 0};                 // PegasusConfig: start = pad
  if (family.rfind("blenderbot", 0) == 0) return {0, 2, 1};  // start = bos
  return {1, 2, 2};  // bart, mbart, mvp, plbart, m2m_100: start = eos
}

// The lineage's config classes differ in defaults and extras: PLBartConfig scale_embedding
// defaults to true; MvpConfig's prompts (use_prompt) add modules the zoo does not build.
StatusOr<BartCfg> ParseBart(const json& config, const std::string& family) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  BartCfg c;
  TS_RETURN_IF_ERROR(ParseBartSizes(r, c));
  const bool m2m = family == "m2m_100";
  TS_ASSIGN_OR_RETURN(std::string act, r.String("activation_function", m2m ? "relu" : "gelu"));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, r.Name("activation_function")));
  TS_ASSIGN_OR_RETURN(c.scale_embedding, r.Bool("scale_embedding", family == "plbart" || m2m));
  if (family == "mvp") {
    TS_ASSIGN_OR_RETURN(bool prompt, r.Bool("use_prompt", false));
    if (prompt)
      return r.Error("use_prompt", "true (MVP's task prompts) is not supported by the zoo");
  }
  if (family == "marian") {
    // MarianConfig: separate encoder / decoder tables (and a decoder_vocab_size of its own) only
    // when share_encoder_decoder_embeddings is false.
    TS_ASSIGN_OR_RETURN(bool share, r.Bool("share_encoder_decoder_embeddings", true));
    if (!share) {
      return r.Error("share_encoder_decoder_embeddings",
                     "false (separate source and target tables) is not supported by the zoo");
    }
  }
  const TokenDefaults tok = FamilyTokens(family);
  TS_RETURN_IF_ERROR(
      ReadSeq2SeqTokens(r, tok.pad, tok.eos, /*start_is_eos=*/tok.start == tok.eos, c));
  if (tok.start != tok.eos && tok.start != tok.pad) {
    TS_ASSIGN_OR_RETURN(c.start, TokenIdField(r, "decoder_start_token_id", tok.start, c.vocab));
  }
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

StatusOr<json> ScaleBart(const json& config, const std::string& family) {
  using P = TinyProfile;
  TS_ASSIGN_OR_RETURN(BartCfg c, ParseBart(config, family));
  json t = config;
  const int64_t heads = std::min(c.enc_heads, P::kHeads);
  const int64_t d = heads * (P::kHidden / P::kHeads);
  int64_t dec_heads = std::min(c.dec_heads, P::kHeads);
  if (d % dec_heads != 0) dec_heads = heads;
  t["d_model"] = d;
  t["encoder_attention_heads"] = heads;
  t["decoder_attention_heads"] = dec_heads;
  t["encoder_ffn_dim"] = ScaleRatio(c.enc_ffn, c.d_model, d, 8);
  t["decoder_ffn_dim"] = ScaleRatio(c.dec_ffn, c.d_model, d, 8);
  t["encoder_layers"] = TinyDepth(c.enc_layers, false);
  t["decoder_layers"] = TinyDepth(c.dec_layers, false);
  t["num_hidden_layers"] = TinyDepth(c.enc_layers, false);
  t["max_position_embeddings"] = std::min(c.max_pos, P::kMaxPositions);
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t["vocab_size"] = vocab;
  if (t.contains("decoder_vocab_size") && !t["decoder_vocab_size"].is_null())
    t["decoder_vocab_size"] = vocab;  // marian, shared tables: equal to vocab_size
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
                        "forced_bos_token_id", "forced_eos_token_id"})
    MapTokenId(t, f, vocab);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, std::min(P::kSeqLen, std::min(c.max_pos, P::kMaxPositions)));
  return t;
}

// mbart: pre-LN layers, final encoder/decoder layer_norm, the language-id shift in its batches.
// The rest differ from BART in norms and positions (see the headers of marian.cc, pegasus.cc,
// blenderbot.cc, blenderbot_small.cc and m2m_100.cc):
//   marian           post-LN, no embedding norm, the sinusoid table
//   pegasus          pre-LN + final norms, the sinusoid table
//   blenderbot       pre-LN + final norms, learned positions without offset
//   blenderbot-small BART's post-LN and embedding norm (its decoder's before the positions),
//                    learned positions without offset
//   m2m_100          pre-LN + final norms, fairseq sinusoid positions, no final_logits_bias
EncDecRecipe BartRecipe(const BartCfg& c, Seq2SeqHead head, const std::string& family) {
  using P = EncDecRecipe::Positions;
  const bool pre_ln =
      family == "mbart" || family == "pegasus" || family == "blenderbot" || family == "m2m_100";
  EncDecRecipe r;
  r.naming = EncDecRecipe::Naming::kBart;
  r.norm = EncDecRecipe::Norm::kLayerNorm;
  r.eps = 1e-5;
  r.pre_ln = pre_ln;
  r.final_norm = pre_ln;
  r.d_model = c.d_model;
  r.act = c.act;
  r.positions = family == "marian" || family == "pegasus" ? P::kSinusoidalTable
                : family == "m2m_100"                     ? P::kFairseq
                : family.rfind("blenderbot", 0) == 0      ? P::kLookup
                                                          : P::kLookupOffset2;
  r.embedding_norm = family == "bart" || family == "mbart" || family == "mvp" ||
                     family == "plbart" || family == "blenderbot-small";
  r.decoder_norm_tokens = family == "blenderbot-small";
  r.scale_embedding = c.scale_embedding;
  r.mask_before_embedding = true;
  const std::string pre = head == Seq2SeqHead::kModel ? "" : "model.";
  const bool causal = head == Seq2SeqHead::kCausalLM;
  if (!causal) r.shared = pre + "shared.weight";
  const int64_t rows = r.positions == P::kLookupOffset2 ? c.max_pos + 2
                       : r.positions == P::kFairseq     ? 0
                                                        : c.max_pos;
  r.encoder = EncDecStack::Of(pre + "encoder", c.enc_layers, c.enc_heads, c.enc_ffn);
  r.encoder.positions = rows;
  r.decoder = EncDecStack::Of(pre + "decoder", c.dec_layers, c.dec_heads, c.dec_ffn);
  r.decoder.decoder = true;
  r.decoder.cross = !causal;
  r.decoder.own_embedding = causal;
  r.decoder.positions = rows;
  r.decoder.decoder_mask = true;
  r.batch = family == "mbart" ? EncDecRecipe::Batch::kMbart : EncDecRecipe::Batch::kBart;
  r.vocab = c.vocab;
  r.num_labels = c.num_labels;
  r.pad = c.pad;
  r.eos = c.eos;
  r.start = c.start;
  r.tie = c.tie;
  r.final_logits_bias = family != "m2m_100";
  return r;
}

json BartBaseExample() {  // facebook/bart-base
  return json{{"model_type", "bart"},
              {"activation_function", "gelu"},
              {"add_bias_logits", false},
              {"add_final_layer_norm", false},
              {"bos_token_id", 0},
              {"d_model", 768},
              {"decoder_attention_heads", 12},
              {"decoder_ffn_dim", 3072},
              {"decoder_layers", 6},
              {"decoder_start_token_id", 2},
              {"encoder_attention_heads", 12},
              {"encoder_ffn_dim", 3072},
              {"encoder_layers", 6},
              {"eos_token_id", 2},
              {"forced_bos_token_id", 0},
              {"forced_eos_token_id", 2},
              {"id2label", json::object({{"0", "LABEL_0"}, {"1", "LABEL_1"}, {"2", "LABEL_2"}})},
              {"init_std", 0.02},
              {"is_encoder_decoder", true},
              {"max_position_embeddings", 1024},
              {"normalize_before", false},
              {"num_hidden_layers", 6},
              {"pad_token_id", 1},
              {"scale_embedding", false},
              {"vocab_size", 50265}};
}

const char* BartTask(Seq2SeqHead head) {
  switch (head) {
    case Seq2SeqHead::kConditionalGeneration:
      return "text2text-generation";
    case Seq2SeqHead::kSequenceClassification:
      return "text-classification";
    case Seq2SeqHead::kQuestionAnswering:
      return "question-answering";
    case Seq2SeqHead::kCausalLM:
      return "text-generation";
    default:
      return "feature-extraction";
  }
}

StatusOr<std::unique_ptr<Model>> BuildBart(ModelSpec spec, Seq2SeqHead head,
                                           const std::string& family) {
  TS_ASSIGN_OR_RETURN(BartCfg c, ParseBart(spec.tiny_config, family));
  EncDecRecipe r = BartRecipe(c, head, family);
  // PLBart's shift_tokens_right is mBART's (the row's last token, its language code, wraps to
  // the front); its layers are BART's post-LN ones.
  if (family == "plbart") r.batch = EncDecRecipe::Batch::kMbart;
  switch (head) {
    case Seq2SeqHead::kConditionalGeneration:
      return MakeSeq2SeqLm(std::move(spec), std::move(r));
    case Seq2SeqHead::kCausalLM:
      return MakeDecoderCausalLm(std::move(spec), std::move(r));
    case Seq2SeqHead::kModel:
      return MakeSeq2SeqBase(std::move(spec), std::move(r), head);
    default:
      return MakeSeq2SeqClassification(std::move(spec), std::move(r), head);
  }
}

}  // namespace

void AddUnusedCrossAttention(StateDictBuilder& sd) {
  for (const auto& [n, s] : sd.weights()) {
    for (const char* from : {".self_attn.", ".self_attn_layer_norm."}) {
      const size_t at = n.find(from);
      if (n.rfind("model.decoder.layers.", 0) != 0 || at == std::string::npos) continue;
      const std::string to =
          std::string(from) == ".self_attn." ? ".encoder_attn." : ".encoder_attn_layer_norm.";
      sd.AddUnused(n.substr(0, at) + to + n.substr(at + std::string(from).size()), s);
    }
  }
}

ArchEntry BartEntry(const std::string& arch, const std::string& family, Seq2SeqHead head,
                    json example) {
  ArchEntry e;
  e.info = {arch, family, BartTask(head)};
  example["architectures"] = {arch};
  if (head == Seq2SeqHead::kCausalLM) {  // a decoder-only checkpoint of the family
    example["is_decoder"] = true;
    example["is_encoder_decoder"] = false;
  }
  e.example_config = std::move(example);
  e.scale = [family](const json& c) { return ScaleBart(c, family); };
  e.build = [head, family](ModelSpec spec) { return BuildBart(std::move(spec), head, family); };
  if (head == Seq2SeqHead::kCausalLM) e.state_dict.extra = AddUnusedCrossAttention;
  return e;
}

std::vector<ArchEntry> BartArchs() {
  using Head = Seq2SeqHead;
  return {
      BartEntry("BartForConditionalGeneration", "bart", Head::kConditionalGeneration,
                BartBaseExample()),
      BartEntry("BartModel", "bart", Head::kModel, BartBaseExample()),
      BartEntry("BartForSequenceClassification", "bart", Head::kSequenceClassification,
                BartBaseExample()),
      BartEntry("BartForQuestionAnswering", "bart", Head::kQuestionAnswering, BartBaseExample()),
      BartEntry("BartForCausalLM", "bart", Head::kCausalLM, BartBaseExample()),
  };
}

TS_ZOO_REGISTER_FAMILY(Bart, BartArchs);

}  // namespace ts::zoo::internal
