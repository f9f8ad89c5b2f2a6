// dpr (modeling_dpr.py): DPRQuestionEncoder.question_encoder is a DPREncoder, a BertModel
// without its pooler (bert_model, add_pooling_layer=False) and, when projection_dim > 0, a Linear
// encode_proj [projection_dim, H]. Its one output is pooler_output, sequence_output[:, 0, :]
// (no tanh, no BERT pooler), through encode_proj when there is one. DPRConfig is BERT's fields
// plus projection_dim (default 0). DPRContextEncoder (ctx_encoder.) and DPRReader
// (span_predictor.) are not in transformers' task tables (only DPRQuestionEncoder is, under
// AutoModel), so the zoo serves the question encoder only.
#include "workers/zoo/families/encoder_lineages.h"

#include <algorithm>

namespace ts::zoo::internal::encoder {
namespace {

json DprExample() {  // facebook/dpr-question_encoder-single-nq-base
  return json{{"model_type", "dpr"},
              {"attention_probs_dropout_prob", 0.1},
              {"hidden_act", "gelu"},
              {"hidden_dropout_prob", 0.1},
              {"hidden_size", 768},
              {"initializer_range", 0.02},
              {"intermediate_size", 3072},
              {"layer_norm_eps", 1e-12},
              {"max_position_embeddings", 512},
              {"num_attention_heads", 12},
              {"num_hidden_layers", 12},
              {"pad_token_id", 0},
              {"position_embedding_type", "absolute"},
              {"projection_dim", 0},
              {"type_vocab_size", 2},
              {"vocab_size", 30522}};
}

}  // namespace

EncoderFamily Dpr() {
  return {
      .model_type = "dpr",
      .structure = {.base = "question_encoder.bert_model."},
      .names = {.pooler = "", .encode_proj = "question_encoder.encode_proj"},
      .absolute_positions = true,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(c.projection_dim, r.Int("projection_dim", 0));
        if (c.projection_dim < 0) {
          return r.Error("projection_dim",
                         "must be 0 (none) or positive (got " + std::to_string(c.projection_dim) +
                             ")");
        }
        return OkStatus();
      },
      .scale_extra = [](const Recipe& real, json& tiny) {
        if (real.projection_dim > 0) {  // at most the tiny width
          tiny["projection_dim"] =
              std::min<int64_t>(real.projection_dim, tiny["hidden_size"].get<int64_t>());
        }
      },
      .classes = {.dpr_encoder = "DPRQuestionEncoder"},
      .example = DprExample(),
  };
}

TS_ZOO_ENCODER_FAMILY(Dpr);

}  // namespace ts::zoo::internal::encoder
