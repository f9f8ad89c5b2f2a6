// distilbert: dim / n_layers / n_heads / hidden_dim / activation, no token types, q_lin / k_lin /
// v_lin / out_lin, sa_layer_norm, ffn.lin1 / lin2; a pre_classifier (ReLU) before the
// classifiers; vocab_transform / vocab_layer_norm / vocab_projector for the masked LM.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

EncoderFamily DistilBert() {
  return {
      .model_type = "distilbert",
      .fields = {.hidden = "dim",
                 .layers = "n_layers",
                 .heads = "n_heads",
                 .inter = "hidden_dim",
                 .act = "activation",
                 .distil = true},
      .defaults = {.type_vocab = -1},
      .structure = {.layout = Layout::kDistilBert, .base = "distilbert."},
      .names = {.seq_pooled = false,
                .seq_dense = "pre_classifier",
                .seq_act = DenseAct::kRelu,
                .choice_pooled = false,
                .choice_dense = "pre_classifier",
                .choice_act = DenseAct::kRelu,
                .lm_dense = "vocab_transform",
                .lm_norm = "vocab_layer_norm",
                .lm_bias = "vocab_projector",
                .lm_embedding_width = false},
      .parse_late = [](const ConfigReader& r, const json&, Recipe&) -> Status {
        TS_ASSIGN_OR_RETURN(bool sin, r.Bool("sinusoidal_pos_embds", false));
        if (sin) return r.Error("sinusoidal_pos_embds", "unsupported (true)");
        return OkStatus();
      },
      .classes = AllHeads("DistilBert", /*causal=*/false),
      // distilbert-base-uncased
      .example = json{{"model_type", "distilbert"},
                      {"activation", "gelu"},
                      {"attention_dropout", 0.1},
                      {"dim", 768},
                      {"dropout", 0.1},
                      {"hidden_dim", 3072},
                      {"initializer_range", 0.02},
                      {"max_position_embeddings", 512},
                      {"n_heads", 12},
                      {"n_layers", 6},
                      {"pad_token_id", 0},
                      {"qa_dropout", 0.1},
                      {"seq_classif_dropout", 0.2},
                      {"sinusoidal_pos_embds", false},
                      {"tie_weights_", true},
                      {"vocab_size", 30522}},
      // DistilBertForMaskedLM's vocab_projector is tied to the word embeddings.
      .state_dict = {.tied_projections = {"vocab_projector"}},
  };
}

TS_ZOO_ENCODER_FAMILY(DistilBert);

}  // namespace ts::zoo::internal::encoder
