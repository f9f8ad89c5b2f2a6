// pegasus (modeling_pegasus.py): BART's layers (bart.cc) pre-LN with final encoder / decoder
// layer_norm, Marian's sinusoid table; start = pad. PegasusForCausalLM holds the decoder as
// `model.decoder.*` with lm_head tied to its embed_tokens and no final_logits_bias; no
// SequenceClassification or QuestionAnswering class.
#include "workers/zoo/families/bart.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;
using H = Seq2SeqHead;

json PegasusExample() {  // google/pegasus-xsum
  return json{{"model_type", "pegasus"},
              {"activation_function", "relu"},
              {"add_final_layer_norm", true},
              {"d_model", 1024},
              {"decoder_attention_heads", 16},
              {"decoder_ffn_dim", 4096},
              {"decoder_layers", 16},
              {"decoder_start_token_id", 0},
              {"encoder_attention_heads", 16},
              {"encoder_ffn_dim", 4096},
              {"encoder_layers", 16},
              {"eos_token_id", 1},
              {"forced_eos_token_id", 1},
              {"init_std", 0.02},
              {"is_encoder_decoder", true},
              {"max_position_embeddings", 512},
              {"normalize_before", true},
              {"normalize_embedding", false},
              {"num_hidden_layers", 16},
              {"pad_token_id", 0},
              {"scale_embedding", true},
              {"static_position_embeddings", true},
              {"vocab_size", 96103}};
}

std::vector<ArchEntry> PegasusArchs() {
  return {
      BartEntry("PegasusForConditionalGeneration", "pegasus", H::kConditionalGeneration,
                PegasusExample()),
      BartEntry("PegasusModel", "pegasus", H::kModel, PegasusExample()),
      BartEntry("PegasusForCausalLM", "pegasus", H::kCausalLM, PegasusExample()),
  };
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Pegasus, PegasusArchs);

}  // namespace ts::zoo::internal
