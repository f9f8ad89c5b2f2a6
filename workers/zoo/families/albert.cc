// albert: a factorised embedding (embedding_size E) mapped to the hidden size by
// encoder.embedding_hidden_mapping_in; layer groups shared across the depth (num_hidden_groups,
// inner_group_num); the pooler is albert.pooler; predictions.* for the masked LM.
#include <algorithm>

#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

Status ParseAlbertGroups(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(c.groups, r.Int("num_hidden_groups", 1));
  TS_RETURN_IF_ERROR(Positive(r, "num_hidden_groups", c.groups));
  if (c.groups > c.layers) {
    return r.Error("num_hidden_groups", "must not exceed num_hidden_layers (" +
                                            std::to_string(c.groups) + " > " +
                                            std::to_string(c.layers) + ")");
  }
  TS_ASSIGN_OR_RETURN(c.inner, r.Int("inner_group_num", 1));
  return Positive(r, "inner_group_num", c.inner);
}

void ScaleAlbertGroups(const Recipe& real, json& t) {
  t["num_hidden_groups"] = std::min(real.groups, t["num_hidden_layers"].get<int64_t>());
  t["inner_group_num"] = std::min<int64_t>(real.inner, 2);
}

}  // namespace

EncoderFamily Albert() {
  return {
      .model_type = "albert",
      .defaults = {.act = "gelu_new", .embedding = 128},
      .structure = {.layout = Layout::kAlbert,
                    .projection = Projection::kAlbert,
                    .base = "albert."},
      .names = {.pooler = "pooler",
                .lm_dense = "predictions.dense",
                .lm_norm = "predictions.LayerNorm",
                .lm_bias = "predictions",
                // AlbertForPreTraining: sentence-order prediction (AlbertSOPHead).
                .pair_head = "sop_classifier.classifier",
                .pair = {.output = "sop_logits", .label = "sentence_order_label"}},
      .parse_late = ParseAlbertGroups,
      .scale_extra = ScaleAlbertGroups,
      .classes = AllHeads("Albert", /*causal=*/false, /*nsp=*/false, /*qa=*/true,
                          /*pretraining=*/true),
      // albert-base-v2
      .example = json{{"model_type", "albert"},   {"attention_probs_dropout_prob", 0},
                      {"bos_token_id", 2},        {"classifier_dropout_prob", 0.1},
                      {"down_scale_factor", 1},   {"embedding_size", 128},
                      {"eos_token_id", 3},        {"gap_size", 0},
                      {"hidden_act", "gelu_new"}, {"hidden_dropout_prob", 0},
                      {"hidden_size", 768},       {"initializer_range", 0.02},
                      {"inner_group_num", 1},     {"intermediate_size", 3072},
                      {"layer_norm_eps", 1e-12},  {"max_position_embeddings", 512},
                      {"net_structure_type", 0},  {"num_attention_heads", 12},
                      {"num_hidden_groups", 1},   {"num_hidden_layers", 12},
                      {"num_memory_blocks", 0},   {"pad_token_id", 0},
                      {"type_vocab_size", 2},     {"vocab_size", 30000}},
  };
}

TS_ZOO_ENCODER_FAMILY(Albert);

}  // namespace ts::zoo::internal::encoder
