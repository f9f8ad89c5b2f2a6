// roc_bert: RoCBert (modeling_roc_bert.py), BERT with shape and pronunciation embeddings: with
// concat_input, [word | shape | pronunciation] through embeddings.map_inputs_layer, then token
// types and positions, then the LayerNorm; without it, the BERT embeddings averaged with the
// enabled tables' lookups. The batches carry input_shape_ids and input_pronunciation_ids. BERT's
// head names under roc_bert. RoCBertForPreTraining is left out (FIDELITY.md: its loss is the
// masked LM over labels_input_ids plus a contrastive loss over attack_* inputs).
// weiweishi/roc-bert-base-zh.
#include <algorithm>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {
namespace {

Status ParseRocBert(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(c.shape_vocab, r.Int("shape_vocab_size", 24858));
  TS_RETURN_IF_ERROR(Positive(r, "shape_vocab_size", c.shape_vocab));
  TS_ASSIGN_OR_RETURN(c.shape_dim, r.Int("shape_embed_dim", 512));
  TS_RETURN_IF_ERROR(Positive(r, "shape_embed_dim", c.shape_dim));
  TS_ASSIGN_OR_RETURN(c.pron_vocab, r.Int("pronunciation_vocab_size", 910));
  TS_RETURN_IF_ERROR(Positive(r, "pronunciation_vocab_size", c.pron_vocab));
  TS_ASSIGN_OR_RETURN(c.pron_dim, r.Int("pronunciation_embed_dim", 768));
  TS_RETURN_IF_ERROR(Positive(r, "pronunciation_embed_dim", c.pron_dim));
  TS_ASSIGN_OR_RETURN(c.shape_on, r.Bool("enable_shape", true));
  TS_ASSIGN_OR_RETURN(c.pron_on, r.Bool("enable_pronunciation", true));
  TS_ASSIGN_OR_RETURN(c.roc_concat, r.Bool("concat_input", true));
  // Both tables take padding_idx=pad_token_id.
  if (c.pad && *c.pad >= std::min(c.shape_vocab, c.pron_vocab)) {
    return r.Error("pad_token_id", "must be below shape_vocab_size and pronunciation_vocab_size");
  }
  return OkStatus();
}

void ScaleRocBert(const Recipe& real, json& t) {
  const int64_t hidden = t["hidden_size"].get<int64_t>();
  t["shape_vocab_size"] = std::min(real.shape_vocab, TinyProfile::kVocab);
  t["pronunciation_vocab_size"] = std::min(real.pron_vocab, TinyProfile::kVocab);
  t["shape_embed_dim"] = ScaleRatio(real.shape_dim, real.hidden, hidden, 8);
  t["pronunciation_embed_dim"] = ScaleRatio(real.pron_dim, real.hidden, hidden, 8);
}

// A disabled table is built by transformers and never read.
void AddDisabledTables(StateDictBuilder& sd) {
  const json& cfg = sd.model().spec().tiny_config;
  const std::string p = sd.HasWeight("embeddings.word_embeddings.weight") ? "" : "roc_bert.";
  if (!cfg.value("enable_pronunciation", true)) {
    sd.AddUnused(p + "embeddings.pronunciation_embed.weight",
                 {cfg.value("pronunciation_vocab_size", int64_t{910}),
                  cfg.value("pronunciation_embed_dim", int64_t{768})});
  }
  if (!cfg.value("enable_shape", true)) {
    sd.AddUnused(p + "embeddings.shape_embed.weight",
                 {cfg.value("shape_vocab_size", int64_t{24858}),
                  cfg.value("shape_embed_dim", int64_t{512})});
  }
}

}  // namespace

EncoderFamily RocBert() {
  json example = BertExample();
  example["model_type"] = "roc_bert";
  example["vocab_size"] = 21128;
  example["concat_input"] = true;
  example["enable_pronunciation"] = true;
  example["enable_shape"] = true;
  example["pronunciation_embed_dim"] = 768;
  example["pronunciation_vocab_size"] = 910;
  example["shape_embed_dim"] = 512;
  example["shape_vocab_size"] = 24858;
  example["position_embedding_type"] = "absolute";
  HeadClasses classes = AllHeads("RoCBert", /*causal=*/true);
  return {
      .model_type = "roc_bert",
      .structure = {.base = "roc_bert."},
      .names = BertHeadNames(),
      .absolute_positions = true,
      .parse = ParseRocBert,
      .scale_extra = ScaleRocBert,
      .classes = classes,
      .example = example,
      .state_dict = {.extra = AddDisabledTables},
  };
}

TS_ZOO_ENCODER_FAMILY(RocBert);

}  // namespace ts::zoo::internal::encoder
