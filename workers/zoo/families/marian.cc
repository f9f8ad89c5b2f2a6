// marian (modeling_marian.py): BART's post-LN layers (bart.cc) without layernorm_embedding;
// MarianSinusoidalPositionalEmbedding, a frozen [max_pos, d] table (sin | cos halves,
// p / 10000^(2i/d)) at arange(S), no offset; embeddings * sqrt(d) when scale_embedding; start =
// pad. MarianForCausalLM holds the decoder as `model.decoder.*` with lm_head tied to its
// embed_tokens and no final_logits_bias; no SequenceClassification or QuestionAnswering class.
#include "workers/zoo/families/bart.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;
using H = Seq2SeqHead;

json MarianExample() {  // Helsinki-NLP/opus-mt-en-de
  return json{{"model_type", "marian"},
              {"activation_function", "swish"},
              {"bos_token_id", 0},
              {"d_model", 512},
              {"decoder_attention_heads", 8},
              {"decoder_ffn_dim", 2048},
              {"decoder_layers", 6},
              {"decoder_start_token_id", 58100},
              {"decoder_vocab_size", 58101},
              {"encoder_attention_heads", 8},
              {"encoder_ffn_dim", 2048},
              {"encoder_layers", 6},
              {"eos_token_id", 0},
              {"forced_eos_token_id", 0},
              {"init_std", 0.02},
              {"is_encoder_decoder", true},
              {"max_position_embeddings", 512},
              {"normalize_before", false},
              {"normalize_embedding", false},
              {"num_hidden_layers", 6},
              {"pad_token_id", 58100},
              {"scale_embedding", true},
              {"share_encoder_decoder_embeddings", true},
              {"static_position_embeddings", true},
              {"vocab_size", 58101}};
}

std::vector<ArchEntry> MarianArchs() {
  return {
      BartEntry("MarianMTModel", "marian", H::kConditionalGeneration, MarianExample()),
      BartEntry("MarianModel", "marian", H::kModel, MarianExample()),
      BartEntry("MarianForCausalLM", "marian", H::kCausalLM, MarianExample()),
  };
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Marian, MarianArchs);

}  // namespace ts::zoo::internal
