// electra: embeddings_project when embedding_size != hidden_size, no pooler (classifier.dense +
// out_proj with GELU; sequence_summary.summary for multiple choice), generator_predictions.* and
// generator_lm_head for the masked LM.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

// google/electra-base-discriminator; the masked LM is google/electra-base-generator (its
// embedding_size 768 != hidden_size 256, so the embedding projection is exercised).
json ElectraExample(bool generator) {
  return json{{"model_type", "electra"},
              {"attention_probs_dropout_prob", 0.1},
              {"embedding_size", 768},
              {"hidden_act", "gelu"},
              {"hidden_dropout_prob", 0.1},
              {"hidden_size", generator ? 256 : 768},
              {"initializer_range", 0.02},
              {"intermediate_size", generator ? 1024 : 3072},
              {"layer_norm_eps", 1e-12},
              {"max_position_embeddings", 512},
              {"num_attention_heads", generator ? 4 : 12},
              {"num_hidden_layers", 12},
              {"pad_token_id", 0},
              {"type_vocab_size", 2},
              {"vocab_size", 30522}};
}

}  // namespace

EncoderFamily Electra() {
  return {
      .model_type = "electra",
      .defaults = {.embedding = 128},
      .structure = {.projection = Projection::kElectra, .base = "electra."},
      .names = {.seq_pooled = false,
                .seq_dense = "classifier.dense",
                .seq_act = DenseAct::kGelu,
                .seq_out = "classifier.out_proj",
                .choice_pooled = false,
                .choice_dense = "sequence_summary.summary",
                .choice_act = DenseAct::kGelu,
                .lm_dense = "generator_predictions.dense",
                .lm_norm = "generator_predictions.LayerNorm",
                .lm_bias = "generator_lm_head",
                .lm_hidden_act = false,
                .pretraining_discriminator = true},
      .absolute_positions = true,
      .classes = AllHeads("Electra", /*causal=*/true, /*nsp=*/false, /*qa=*/true,
                          /*pretraining=*/true),
      .example = ElectraExample(false),
      .lm_example = ElectraExample(true),
      // The generator's output layer (ElectraForMaskedLM, ForCausalLM, ForPreTraining's MLM part)
      // is tied to the word embeddings.
      .state_dict = {.tied_projections = {"generator_lm_head"}},
  };
}

TS_ZOO_ENCODER_FAMILY(Electra);

}  // namespace ts::zoo::internal::encoder
