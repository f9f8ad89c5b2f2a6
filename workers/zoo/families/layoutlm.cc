// layoutlm (modeling_layoutlm.py): BERT with 2D position embeddings. LayoutLMEmbeddings adds, to
// words + positions + token types, x_position_embeddings of bbox[..., 0] and bbox[..., 2],
// y_position_embeddings of bbox[..., 1] and bbox[..., 3], h_position_embeddings of the height
// (y1 - y0) and w_position_embeddings of the width (x1 - x0), each table
// [max_2d_position_embeddings, H]; the bbox input [B, S, 4] defaults to zeros. Batches carry
// boxes with x0 <= x1, y0 <= y1 inside the tables, [0, 0, 0, 0] on padding. BERT's layers and
// heads under layoutlm. (the pooler in every class); LayoutLMForQuestionAnswering serves
// document question answering.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

json LayoutLmExample() {  // microsoft/layoutlm-base-uncased
  return json{{"model_type", "layoutlm"},
              {"attention_probs_dropout_prob", 0.1},
              {"hidden_act", "gelu"},
              {"hidden_dropout_prob", 0.1},
              {"hidden_size", 768},
              {"initializer_range", 0.02},
              {"intermediate_size", 3072},
              {"layer_norm_eps", 1e-12},
              {"max_2d_position_embeddings", 1024},
              {"max_position_embeddings", 512},
              {"num_attention_heads", 12},
              {"num_hidden_layers", 12},
              {"output_past", true},
              {"pad_token_id", 0},
              {"type_vocab_size", 2},
              {"vocab_size", 30522}};
}

}  // namespace

EncoderFamily LayoutLm() {
  return {
      .model_type = "layoutlm",
      .structure = {.base = "layoutlm."},
      .names = BertHeadNames(),
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(c.max_2d, r.Int("max_2d_position_embeddings", 1024));
        return Positive(r, "max_2d_position_embeddings", c.max_2d);
      },
      .classes = {.base = "LayoutLMModel",
                  .seq_cls = "LayoutLMForSequenceClassification",
                  .token_cls = "LayoutLMForTokenClassification",
                  .qa = "LayoutLMForQuestionAnswering",
                  .masked_lm = "LayoutLMForMaskedLM"},
      .qa_task = "document-question-answering",
      .example = LayoutLmExample(),
  };
}

TS_ZOO_ENCODER_FAMILY(LayoutLm);

}  // namespace ts::zoo::internal::encoder
