// m2m_100 (modeling_m2m_100.py): BART's layers (bart.cc) pre-LN with final layer_norm, fairseq
// sinusoid positions from the padding (not in the state_dict), scale_embedding default true,
// relu, no final_logits_bias; no ForCausalLM, SequenceClassification or QuestionAnswering class.
#include "workers/zoo/families/bart.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;
using H = Seq2SeqHead;

json M2m100Example() {  // facebook/m2m100_418M
  return json{{"model_type", "m2m_100"},
              {"activation_function", "relu"},
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
              {"init_std", 0.02},
              {"is_encoder_decoder", true},
              {"max_position_embeddings", 1024},
              {"num_hidden_layers", 12},
              {"pad_token_id", 1},
              {"scale_embedding", true},
              {"vocab_size", 128112}};
}

std::vector<ArchEntry> M2m100Archs() {
  return {
      BartEntry("M2M100ForConditionalGeneration", "m2m_100", H::kConditionalGeneration,
                M2m100Example()),
      BartEntry("M2M100Model", "m2m_100", H::kModel, M2m100Example()),
  };
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(M2m100, M2m100Archs);

}  // namespace ts::zoo::internal
