// roformer (modeling_roformer.py): BERT's layers and names without absolute position embeddings;
// q and k (and v when rotary_value) are rotated over interleaved pairs (2i, 2i + 1) by the frozen
// sinusoid table encoder.embed_positions.weight [max_position_embeddings, head_dim] ([sin | cos]
// halves, 10000^(-2i/d)) at arange(S); embedding_size (default hidden_size) with ELECTRA's
// embeddings_project when it differs; no pooler. Heads: cls.predictions (transform to the
// embedding width, hidden_act), classifier.dense / hidden_act / out_proj on token 0, multiple
// choice on the last position without projection (RoFormerSequenceSummary's "last"), token
// classifier, qa_outputs; the CausalLM is the MLM head run causally.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

json RoFormerExample() {  // junnyu/roformer_chinese_base
  return json{{"model_type", "roformer"},
              {"attention_probs_dropout_prob", 0.1},
              {"embedding_size", 768},
              {"hidden_act", "gelu"},
              {"hidden_dropout_prob", 0.1},
              {"hidden_size", 768},
              {"initializer_range", 0.02},
              {"intermediate_size", 3072},
              {"layer_norm_eps", 1e-12},
              {"max_position_embeddings", 1536},
              {"num_attention_heads", 12},
              {"num_hidden_layers", 12},
              {"pad_token_id", 0},
              {"rotary_value", false},
              {"type_vocab_size", 2},
              {"vocab_size", 50000}};
}

}  // namespace

EncoderFamily RoFormer() {
  return {
      .model_type = "roformer",
      .defaults = {.embedding = -1},
      .structure = {.rotary = true,
                    .positions = Positions::kNone,
                    .projection = Projection::kElectra,
                    .base = "roformer."},
      .names = {.seq_pooled = false,
                .seq_dense = "classifier.dense",
                .seq_act = DenseAct::kHiddenAct,
                .seq_out = "classifier.out_proj",
                .choice_pooled = false,
                .choice_last = true,
                .lm_dense = "cls.predictions.transform.dense",
                .lm_norm = "cls.predictions.transform.LayerNorm",
                .lm_bias = "cls.predictions"},
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(c.rotary_value, r.Bool("rotary_value", false));
        if ((c.hidden / c.heads) % 2 != 0) {
          return r.Error("num_attention_heads", "hidden_size / num_attention_heads must be even "
                                                "for the rotary pairs");
        }
        return OkStatus();
      },
      .classes = AllHeads("RoFormer", /*causal=*/true),
      .example = RoFormerExample(),
  };
}

TS_ZOO_ENCODER_FAMILY(RoFormer);

}  // namespace ts::zoo::internal::encoder
