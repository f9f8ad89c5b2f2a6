// mbart: BART (bart.cc) with pre-LN layers, final encoder/decoder layer_norm, a sqrt(d_model)
// embedding scale, and decoder inputs that wrap the row's last token (the language id) to the
// front (HF mbart shift_tokens_right).
#include "workers/zoo/families/bart.h"

namespace ts::zoo::internal {
namespace {

nlohmann::json MBartExample() {  // facebook/mbart-large-cc25
  return nlohmann::json{{"model_type", "mbart"},
                        {"activation_function", "gelu"},
                        {"add_bias_logits", false},
                        {"add_final_layer_norm", true},
                        {"bos_token_id", 0},
                        {"d_model", 1024},
                        {"decoder_attention_heads", 16},
                        {"decoder_ffn_dim", 4096},
                        {"decoder_layers", 12},
                        {"encoder_attention_heads", 16},
                        {"encoder_ffn_dim", 4096},
                        {"encoder_layers", 12},
                        {"eos_token_id", 2},
                        {"init_std", 0.02},
                        {"is_encoder_decoder", true},
                        {"max_position_embeddings", 1024},
                        {"normalize_before", true},
                        {"normalize_embedding", true},
                        {"num_hidden_layers", 12},
                        {"pad_token_id", 1},
                        {"scale_embedding", true},
                        {"vocab_size", 250027}};
}

}  // namespace

std::vector<ArchEntry> MbartArchs() {
  using Head = Seq2SeqHead;
  return {
      BartEntry("MBartForCausalLM", "mbart", Head::kCausalLM, MBartExample()),
      BartEntry("MBartForConditionalGeneration", "mbart", Head::kConditionalGeneration,
                MBartExample()),
      BartEntry("MBartModel", "mbart", Head::kModel, MBartExample()),
      BartEntry("MBartForSequenceClassification", "mbart", Head::kSequenceClassification,
                MBartExample()),
      BartEntry("MBartForQuestionAnswering", "mbart", Head::kQuestionAnswering, MBartExample()),
  };
}

TS_ZOO_REGISTER_FAMILY(Mbart, MbartArchs);

}  // namespace ts::zoo::internal
