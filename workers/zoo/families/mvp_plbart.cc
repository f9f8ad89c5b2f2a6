// mvp and plbart: BART's encoder-decoder (bart.cc) under their own model types.
//   mvp (modeling_mvp.py): BART's layers and heads; `use_prompt` (task prompts) is refused.
//   plbart (modeling_plbart.py): BART's post-LN layers, scale_embedding default true, mBART's
//   shift_tokens_right; no QuestionAnswering class.
#include "workers/zoo/families/bart.h"
#include "workers/zoo/families/family_lists.h"

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

nlohmann::json PlbartExample() {  // uclanlp/plbart-base
  return nlohmann::json{{"model_type", "plbart"},
                        {"activation_function", "gelu"},
                        {"bos_token_id", 0},
                        {"d_model", 768},
                        {"decoder_attention_heads", 12},
                        {"decoder_ffn_dim", 3072},
                        {"decoder_layers", 6},
                        {"encoder_attention_heads", 12},
                        {"encoder_ffn_dim", 3072},
                        {"encoder_layers", 6},
                        {"eos_token_id", 2},
                        {"init_std", 0.02},
                        {"is_encoder_decoder", true},
                        {"max_position_embeddings", 1024},
                        {"num_hidden_layers", 6},
                        {"pad_token_id", 1},
                        {"scale_embedding", true},
                        {"vocab_size", 50005}};
}

}  // namespace

std::vector<ArchEntry> MvpArchs() {
  using H = Seq2SeqHead;
  return {
      BartEntry("MvpForCausalLM", "mvp", H::kCausalLM, MvpExample()),
      BartEntry("MvpForConditionalGeneration", "mvp", H::kConditionalGeneration, MvpExample()),
      BartEntry("MvpModel", "mvp", H::kModel, MvpExample()),
      BartEntry("MvpForSequenceClassification", "mvp", H::kSequenceClassification, MvpExample()),
      BartEntry("MvpForQuestionAnswering", "mvp", H::kQuestionAnswering, MvpExample()),
  };
}

std::vector<ArchEntry> PlbartArchs() {
  using H = Seq2SeqHead;
  return {
      BartEntry("PLBartForCausalLM", "plbart", H::kCausalLM, PlbartExample()),
      BartEntry("PLBartForConditionalGeneration", "plbart", H::kConditionalGeneration,
                PlbartExample()),
      BartEntry("PLBartModel", "plbart", H::kModel, PlbartExample()),
      BartEntry("PLBartForSequenceClassification", "plbart", H::kSequenceClassification,
                PlbartExample()),
  };
}

}  // namespace ts::zoo::internal
