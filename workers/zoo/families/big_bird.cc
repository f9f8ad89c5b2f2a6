// big_bird: BERT names; full attention as HF runs it when the sequence is no longer than
// (5 + 2 * num_random_blocks) * block_size (always at the run's length); its classification
// head is classifier.dense (hidden_act) + out_proj; BigBirdForQuestionAnswering's
// qa_classifier (BigBirdForQuestionAnsweringHead: intermediate, output with its residual
// LayerNorm, qa_outputs) with the question tokens (up to the first sep_token_id) masked out of the
// logits, and no pooler (add_pooling_layer=False). google/bigbird-roberta-base.
#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {
namespace {

Status ParseBigBird(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(std::string at, r.String("attention_type", "block_sparse"));
  if (at != "block_sparse" && at != "original_full") {
    return r.Error("attention_type", "unknown '" + at + "'");
  }
  TS_ASSIGN_OR_RETURN(int64_t block, r.Int("block_size", 64));
  TS_ASSIGN_OR_RETURN(int64_t random, r.Int("num_random_blocks", 3));
  if (at == "block_sparse" && (5 + 2 * random) * block < TinyProfile::kSeqLen) {
    return r.Error("block_size", "block-sparse attention at the run's length is unsupported");
  }
  TS_ASSIGN_OR_RETURN(c.rescale_embeddings, r.Bool("rescale_embeddings", false));
  TS_ASSIGN_OR_RETURN(c.sep, r.Int("sep_token_id", 66));
  if (c.sep < 0 || c.sep >= c.vocab) {
    return r.Error("sep_token_id", "must be a token id below vocab_size");
  }
  TS_ASSIGN_OR_RETURN(bool bias, r.Bool("use_bias", true));
  if (!bias) return r.Error("use_bias", "false is not supported by the zoo");
  return OkStatus();
}

// Every BigBird head but the QA one holds BigBirdModel with its pooler (add_pooling_layer
// defaults to True; BigBirdForQuestionAnswering passes False), which no head but the base model
// calls: the export writes it, seeded.
void AddUnusedPooler(StateDictBuilder& sd) {
  const std::string& arch = sd.model().spec().arch;
  const std::string qa = "ForQuestionAnswering";
  if (arch.size() >= qa.size() && arch.compare(arch.size() - qa.size(), qa.size(), qa) == 0) {
    return;
  }
  const std::string words = "bert.embeddings.word_embeddings.weight";
  if (!sd.HasWeight(words)) return;
  const int64_t h = sd.weights().at(words)[1];
  sd.AddUnused("bert.pooler.weight", {h, h});
  sd.AddUnused("bert.pooler.bias", {h});
}

}  // namespace

EncoderFamily BigBird() {
  HeadNames names = BertHeadNames();
  names.pooler = "pooler";  // BigBirdModel.pooler is a bare nn.Linear
  names.seq_pooled = false;
  names.seq_dense = "classifier.dense";
  names.seq_act = DenseAct::kHiddenAct;
  names.seq_out = "classifier.out_proj";
  names.qa_block = "qa_classifier";
  names.qa_masks_question = true;
  json example = {{"model_type", "big_bird"},
                  {"attention_probs_dropout_prob", 0.1},
                  {"attention_type", "block_sparse"},
                  {"block_size", 64},
                  {"bos_token_id", 1},
                  {"eos_token_id", 2},
                  {"hidden_act", "gelu_new"},
                  {"hidden_dropout_prob", 0.1},
                  {"hidden_size", 768},
                  {"initializer_range", 0.02},
                  {"intermediate_size", 3072},
                  {"layer_norm_eps", 1e-12},
                  {"max_position_embeddings", 4096},
                  {"num_attention_heads", 12},
                  {"num_hidden_layers", 12},
                  {"num_random_blocks", 3},
                  {"pad_token_id", 0},
                  {"rescale_embeddings", false},
                  {"sep_token_id", 66},
                  {"type_vocab_size", 2},
                  {"use_bias", true},
                  {"vocab_size", 50358}};
  return {
      .model_type = "big_bird",
      .defaults = {.act = "gelu_new"},
      .structure = {.base = "bert."},
      .names = names,
      .absolute_positions = true,
      .parse = ParseBigBird,
      .classes = AllHeads("BigBird", /*causal=*/true, /*nsp=*/false, /*qa=*/true,
                          /*pretraining=*/true),
      .example = example,
      .state_dict = {.extra = AddUnusedPooler},
  };
}

TS_ZOO_ENCODER_FAMILY(BigBird);

}  // namespace ts::zoo::internal::encoder
