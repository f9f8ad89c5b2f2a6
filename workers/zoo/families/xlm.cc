// xlm (modeling_xlm.py; flaubert.cc derives from it: modeling_flaubert.py): under transformer.,
// position_embeddings, lang_embeddings (n_langs > 1 with use_lang_emb; never read, as the
// tokenizers return no langs), embeddings (the words, padding_idx pad_index) and layer_norm_emb,
// then one ModuleList per kind: attentions.i.q_lin / k_lin / v_lin / out_lin (q / sqrt(d) before
// q k^T), layer_norm1.i, ffns.i.lin1 / lin2 (4 * emb_dim, exact GELU or ReLU by gelu_activation),
// layer_norm2.i; post-LN, or Flaubert's pre_norm (x + attn(LN1(x)), x + ffn(LN2(x)), no final
// norm). Padded rows are zeroed after the embeddings and after every layer (tensor *= mask);
// `causal` masks the attention causally. No token types (transformers 5's tokenizers return none)
// and no pooler. Heads: pred_layer.proj (bias, weight tied to the words; the loss is not shifted),
// sequence_summary.summary [num_labels, H] over token 0 (summary_type "first", or "last"),
// classifier, qa_outputs (the *ForQuestionAnsweringSimple classes), and for multiple choice the
// summary then logits_proj [1, num_labels].
//
// Refused with the field named: asm (adaptive softmax), sinusoidal_embeddings (a frozen table the
// training steps would move), is_encoder false (transformers raises NotImplementedError); the
// summary options other than a projection to the labels with no activation refuse the two
// classes that read them. Flaubert's layerdrop skips layers at random in training only, like the
// dropouts the zoo leaves out.
#include <cmath>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {
namespace {

Status ParseXlm(const ConfigReader& r, Recipe& c) {
  TS_ASSIGN_OR_RETURN(bool gelu, r.Bool("gelu_activation", true));
  c.act = gelu ? Activation::kGeluErf : Activation::kRelu;
  if (!r.Has("pad_token_id") && r.Has("pad_index")) {  // attribute_map: pad_index
    TS_ASSIGN_OR_RETURN(int64_t pad, r.Int("pad_index"));
    if (pad < 0 || pad >= c.vocab) {
      return r.Error("pad_index", "must be a token id below vocab_size (got " +
                                      std::to_string(pad) + ")");
    }
    c.pad = pad;
  }
  TS_ASSIGN_OR_RETURN(int64_t langs, r.Int("n_langs", 1));
  TS_RETURN_IF_ERROR(Positive(r, "n_langs", langs));
  TS_ASSIGN_OR_RETURN(bool lang_emb, r.Bool("use_lang_emb", true));
  c.langs = langs > 1 && lang_emb ? langs : 0;
  TS_ASSIGN_OR_RETURN(c.causal, r.Bool("causal", false));
  TS_ASSIGN_OR_RETURN(bool asm_softmax, r.Bool("asm", false));
  if (asm_softmax) return r.Error("asm", "unsupported (true): adaptive softmax output");
  TS_ASSIGN_OR_RETURN(bool sinusoidal, r.Bool("sinusoidal_embeddings", false));
  if (sinusoidal) {
    return r.Error("sinusoidal_embeddings",
                   "unsupported (true): a frozen sinusoid table that training would update");
  }
  TS_ASSIGN_OR_RETURN(bool encoder, r.Bool("is_encoder", true));
  if (!encoder) return r.Error("is_encoder", "unsupported (false): transformers refuses it too");
  // XLMSequenceSummary.
  TS_ASSIGN_OR_RETURN(std::string type, r.String("summary_type", "first"));
  TS_ASSIGN_OR_RETURN(bool use_proj, r.Bool("summary_use_proj", true));
  TS_ASSIGN_OR_RETURN(bool to_labels, r.Bool("summary_proj_to_labels", true));
  c.summary_last = type == "last";
  if (type != "first" && type != "last") {
    c.summary_error = r.Name("summary_type") + ": unsupported '" + type + "' (first, last)";
  } else if (!use_proj || !to_labels) {
    c.summary_error = r.Name(use_proj ? "summary_proj_to_labels" : "summary_use_proj") +
                      ": unsupported (false): the summary must project to the labels";
  } else if (r.Has("summary_activation")) {
    TS_ASSIGN_OR_RETURN(std::string act, r.String("summary_activation"));
    c.summary_error =
        r.Name("summary_activation") + ": unsupported '" + act + "' (null: no activation)";
  }
  return OkStatus();
}

}  // namespace

EncoderFamily XlmLineage(const std::string& model_type, const std::string& prefix, bool flaubert,
                         json example) {
  return {
      .model_type = model_type,
      .fields = {.hidden = "emb_dim", .layers = "n_layers", .heads = "n_heads", .inter = ""},
      .defaults = {.type_vocab = -1, .pad = 2},
      .structure = {.layout = Layout::kXlm, .base = "transformer."},
      .names = {.seq_pooled = false,
                .seq_out = "sequence_summary.summary",
                .choice_pooled = false,
                .choice_dense = "sequence_summary.summary",
                .choice_to_labels = true,
                .choice_out = "logits_proj",
                .lm_bias = "pred_layer.proj"},
      .parse = [flaubert](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ParseXlm(r, c));
        if (!flaubert) return OkStatus();
        TS_ASSIGN_OR_RETURN(c.xlm_pre_norm, r.Bool("pre_norm", false));
        TS_ASSIGN_OR_RETURN(double layerdrop, r.Double("layerdrop", 0.0));
        if (!(layerdrop >= 0.0 && layerdrop <= 1.0))
          return r.Error("layerdrop", "must be in [0, 1]");
        return OkStatus();
      },
      .scale_extra =
          [](const Recipe& real, json& tiny) {
            const int64_t vocab = std::min<int64_t>(real.vocab, TinyProfile::kVocab);
            for (const char* id : {"pad_index", "bos_index", "eos_index", "unk_index", "mask_index",
                                   "mask_token_id"})
              MapTokenId(tiny, id, vocab);
          },
      .classes = {.base = prefix + "Model",
                  .seq_cls = prefix + "ForSequenceClassification",
                  .token_cls = prefix + "ForTokenClassification",
                  .qa = prefix + "ForQuestionAnsweringSimple",
                  .masked_lm = prefix + "WithLMHeadModel",
                  .multiple_choice = prefix + "ForMultipleChoice"},
      .example = std::move(example),
      .state_dict = {.tied_projections = {"pred_layer.proj"}},
  };
}

// The fields XLM and Flaubert checkpoints share.
json XlmExample(const char* model_type, int64_t dim, int64_t heads, int64_t vocab, double eps) {
  return json{{"model_type", model_type},
              {"asm", false},
              {"attention_dropout", 0.1},
              {"bos_index", 0},
              {"causal", false},
              {"dropout", 0.1},
              {"emb_dim", dim},
              {"embed_init_std", 1.0 / std::sqrt(static_cast<double>(dim))},
              {"end_n_top", 5},
              {"eos_index", 1},
              {"gelu_activation", true},
              {"init_std", 0.02},
              {"is_encoder", true},
              {"layer_norm_eps", eps},
              {"mask_index", 5},
              {"max_position_embeddings", 512},
              {"n_heads", heads},
              {"n_langs", 1},
              {"n_layers", 12},
              {"pad_index", 2},
              {"pad_token_id", 2},
              {"sinusoidal_embeddings", false},
              {"start_n_top", 5},
              {"summary_activation", nullptr},
              {"summary_first_dropout", 0.1},
              {"summary_proj_to_labels", true},
              {"summary_type", "first"},
              {"summary_use_proj", true},
              {"unk_index", 3},
              {"use_lang_emb", true},
              {"vocab_size", vocab}};
}

EncoderFamily Xlm() {  // FacebookAI/xlm-mlm-en-2048
  return XlmLineage("xlm", "XLM", /*flaubert=*/false, XlmExample("xlm", 2048, 16, 30145, 1e-12));
}

TS_ZOO_ENCODER_FAMILY(Xlm);

}  // namespace ts::zoo::internal::encoder
