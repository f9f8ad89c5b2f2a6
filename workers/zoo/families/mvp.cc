// mvp (modeling_mvp.py): BART's encoder-decoder (bart.cc) under its own model type, with BART's
// layers and heads; `use_prompt` (task prompts) is refused.
#include "workers/zoo/families/bart.h"

namespace ts::zoo::internal {
namespace {

nlohmann::json MvpExample() {  // RUCAIBox/mvp
  return nlohmann::json{{"model_type", "mvp"},
                        {"activation_function", "gelu"},
                        {"bos_token_id", 0},
                        {"d_model", 1024},
                        {"decoder_attention_heads", 16},
                        {"decoder_ffn_dim", 4096},
                        {"decoder_layers", 12},
                        {"decoder_start_token_id", 2},
                        {"encoder_attention_heads", 16},
                        {"encoder_ffn_dim", 4096},
                        {"encoder_layers", 12},
                        {"eos_token_id", 2},
                        {"forced_bos_token_id", 0},
                        {"forced_eos_token_id", 2},
                        {"init_std", 0.02},
                        {"is_encoder_decoder", true},
                        {"max_position_embeddings", 1024},
                        {"num_hidden_layers", 12},
                        {"pad_token_id", 1},
                        {"scale_embedding", false},
                        {"use_prompt", false},
                        {"vocab_size", 50267}};
}

std::vector<ArchEntry> MvpArchs() {
  using Head = Seq2SeqHead;
  return {
      BartEntry("MvpForCausalLM", "mvp", Head::kCausalLM, MvpExample()),
      BartEntry("MvpForConditionalGeneration", "mvp", Head::kConditionalGeneration, MvpExample()),
      BartEntry("MvpModel", "mvp", Head::kModel, MvpExample()),
      BartEntry("MvpForSequenceClassification", "mvp", Head::kSequenceClassification, MvpExample()),
      BartEntry("MvpForQuestionAnswering", "mvp", Head::kQuestionAnswering, MvpExample()),
  };
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Mvp, MvpArchs);

}  // namespace ts::zoo::internal
