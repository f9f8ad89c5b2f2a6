// deberta (modeling_deberta.py, transformers 5): DeBERTa v1 on the disentangled-attention path
// of deberta-v2. DisentangledSelfAttention holds one in_proj [3H, H] without bias, split per head
// (transpose_for_scores, then chunk(3, -1): head h's rows are its q, k and v in turn), q_bias and
// v_bias added per head, the query divided by sqrt(d * (1 + len(pos_att_type))) before the
// scores; with relative_attention, encoder.rel_embeddings [2 * max_relative_positions, H] (no
// LayerNorm), c2p through pos_proj (no bias) and p2c through pos_q_proj (bias) over plain q - k
// positions (the table's rows around max_relative_positions, as transformers slices them). No
// position buckets, no shared keys, no conv. Embeddings, ContextPooler and the legacy
// cls.predictions masked-LM head as deberta-v2's (legacy false, lm_predictions.lm_head, refuses
// the masked-LM class; talking_head is refused).
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

Status ParseDebertaV1(const ConfigReader& r, const json& config, Recipe& c) {
  TS_ASSIGN_OR_RETURN(c.relative, r.Bool("relative_attention", false));
  TS_ASSIGN_OR_RETURN(c.pos_biased_input, r.Bool("position_biased_input", true));
  TS_ASSIGN_OR_RETURN(c.max_rel, r.Int("max_relative_positions", -1));
  if (c.max_rel < 1) c.max_rel = c.max_pos;
  TS_RETURN_IF_ERROR(ParsePosAttType(r, config, c));
  c.att_scale_factor = 1 + (c.c2p ? 1 : 0) + (c.p2c ? 1 : 0);
  if (!c.relative) c.c2p = c.p2c = false;  // the scale stays (scale_factor counts the list)
  TS_RETURN_IF_ERROR(ParseDebertaPooler(r, c));
  TS_ASSIGN_OR_RETURN(bool talking, r.Bool("talking_head", false));
  if (talking) return r.Error("talking_head", "unsupported (true)");
  TS_ASSIGN_OR_RETURN(bool legacy, r.Bool("legacy", true));
  if (!legacy) {
    c.lm_error = r.Name("legacy") +
                 ": unsupported (false): the lm_predictions.lm_head masked-LM head";
  }
  return OkStatus();
}

json DebertaExample() {  // microsoft/deberta-base
  return json{{"model_type", "deberta"},       {"attention_probs_dropout_prob", 0.1},
              {"hidden_act", "gelu"},           {"hidden_dropout_prob", 0.1},
              {"hidden_size", 768},             {"initializer_range", 0.02},
              {"intermediate_size", 3072},      {"max_position_embeddings", 512},
              {"relative_attention", true},     {"pos_att_type", "c2p|p2c"},
              {"layer_norm_eps", 1e-7},         {"max_relative_positions", -1},
              {"position_biased_input", false}, {"num_attention_heads", 12},
              {"num_hidden_layers", 12},        {"type_vocab_size", 0},
              {"vocab_size", 50265}};
}

}  // namespace

EncoderFamily Deberta() {
  return {
      .model_type = "deberta",
      .defaults = {.type_vocab = 0, .eps = 1e-7, .embedding = -1},
      .structure = {.deberta_v1 = true,
                    .layout = Layout::kDeberta,
                    .projection = Projection::kDeberta,
                    .base = "deberta."},
      .names = DebertaHeadNames(),
      .parse_late = ParseDebertaV1,
      .scale_extra = ScaleDeberta,
      .classes = {.base = "DebertaModel",
                  .seq_cls = "DebertaForSequenceClassification",
                  .token_cls = "DebertaForTokenClassification",
                  .qa = "DebertaForQuestionAnswering",
                  .masked_lm = "DebertaForMaskedLM"},
      .example = DebertaExample(),
  };
}

TS_ZOO_ENCODER_FAMILY(Deberta);

}  // namespace ts::zoo::internal::encoder
