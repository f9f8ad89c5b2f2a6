// plbart (modeling_plbart.py): BART's encoder-decoder (bart.cc) under its own model type: BART's
// post-LN layers, scale_embedding default true, mBART's shift_tokens_right; no QuestionAnswering
// class.
#include "workers/zoo/families/bart.h"

namespace ts::zoo::internal {
namespace {

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

std::vector<ArchEntry> PlbartArchs() {
  using Head = Seq2SeqHead;
  return {
      BartEntry("PLBartForCausalLM", "plbart", Head::kCausalLM, PlbartExample()),
      BartEntry("PLBartForConditionalGeneration", "plbart", Head::kConditionalGeneration,
                PlbartExample()),
      BartEntry("PLBartModel", "plbart", Head::kModel, PlbartExample()),
      BartEntry("PLBartForSequenceClassification", "plbart", Head::kSequenceClassification,
                PlbartExample()),
  };
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Plbart, PlbartArchs);

}  // namespace ts::zoo::internal
