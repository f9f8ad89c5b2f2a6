// mpnet (modeling_mpnet.py): BERT-style post-LN layers named attention.attn.q / k / v / o and
// attention.LayerNorm; no token types; RoBERTa's positions after the pad id (padding_idx 1);
// one relative position bias table, encoder.relative_attention_bias [buckets, heads], shared by
// every layer and added to the scaled scores before the mask, its buckets
// relative_position_bucket(key - query) at 32 buckets / distance 128 whatever the config says.
// Heads: MPNetModel's pooler (pooled by multiple choice), lm_head.dense / gelu / layer_norm /
// tied decoder + lm_head.bias, classifier.dense / tanh / out_proj on token 0, token classifier,
// qa_outputs. No causal LM.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

json MpnetExample() {  // microsoft/mpnet-base
  return json{{"model_type", "mpnet"},
              {"attention_probs_dropout_prob", 0.1},
              {"bos_token_id", 0},
              {"eos_token_id", 2},
              {"hidden_act", "gelu"},
              {"hidden_dropout_prob", 0.1},
              {"hidden_size", 768},
              {"initializer_range", 0.02},
              {"intermediate_size", 3072},
              {"layer_norm_eps", 1e-5},
              {"max_position_embeddings", 514},
              {"num_attention_heads", 12},
              {"num_hidden_layers", 12},
              {"pad_token_id", 1},
              {"relative_attention_num_buckets", 32},
              {"vocab_size", 30527}};
}

}  // namespace

EncoderFamily Mpnet() {
  return {
      .model_type = "mpnet",
      .defaults = {.type_vocab = -1, .pad = 1},
      .structure = {.layout = Layout::kMpnet, .positions = Positions::kAfterPad, .base = "mpnet."},
      .names = RobertaHeadNames(),  // MPNetClassificationHead, MPNetLMHead: RoBERTa's
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(c.mpnet_buckets, r.Int("relative_attention_num_buckets", 32));
        // relative_position_bucket always yields buckets 0..31.
        if (c.mpnet_buckets < 32) {
          return r.Error("relative_attention_num_buckets",
                         "must be at least 32, the buckets MPNet's relative_position_bucket "
                         "computes (got " + std::to_string(c.mpnet_buckets) + ")");
        }
        return OkStatus();
      },
      .classes = AllHeads("MPNet", /*causal=*/false),
      .example = MpnetExample(),
  };
}

TS_ZOO_ENCODER_FAMILY(Mpnet);

}  // namespace ts::zoo::internal::encoder
