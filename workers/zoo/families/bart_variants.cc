// BART's sibling encoder-decoders (bart.cc holds their parsing and recipes), each as its
// transformers 5 modeling file computes it:
//   marian (modeling_marian.py): BART's post-LN layers without layernorm_embedding;
//     MarianSinusoidalPositionalEmbedding, a frozen [max_pos, d] table (sin | cos halves,
//     p / 10000^(2i/d)) at arange(S), no offset; embeddings * sqrt(d) when scale_embedding;
//     start = pad. Classes MarianMTModel, MarianModel, MarianForCausalLM.
//   pegasus (modeling_pegasus.py): pre-LN with final encoder / decoder layer_norm, Marian's
//     sinusoid table; start = pad.
//   blenderbot (modeling_blenderbot.py): pre-LN with final layer_norm, learned positions at
//     arange(S) (no offset); start = bos.
//   blenderbot-small (modeling_blenderbot_small.py): BART's post-LN and layernorm_embedding,
//     learned positions without offset; its decoder normalises the unscaled token embeddings
//     and adds the positions after (transformers 5 leaves the decoder's embed_scale unused).
//   m2m_100 (modeling_m2m_100.py): pre-LN with final layer_norm, fairseq sinusoid positions from
//     the padding (not in the state_dict), scale_embedding default true, relu, no
//     final_logits_bias; no ForCausalLM.
// Their ForCausalLM hold the decoder as `model.decoder.*` with lm_head tied to its embed_tokens
// and no final_logits_bias. None has a SequenceClassification or QuestionAnswering class.
#include "workers/zoo/families/bart.h"
#include "workers/zoo/families/family_lists.h"

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

json BlenderbotExample() {  // facebook/blenderbot-400M-distill
  return json{{"model_type", "blenderbot"},
              {"activation_function", "gelu"},
              {"bos_token_id", 1},
              {"d_model", 1280},
              {"decoder_attention_heads", 32},
              {"decoder_ffn_dim", 5120},
              {"decoder_layers", 12},
              {"decoder_start_token_id", 1},
              {"encoder_attention_heads", 32},
              {"encoder_ffn_dim", 5120},
              {"encoder_layers", 2},
              {"eos_token_id", 2},
              {"init_std", 0.02},
              {"is_encoder_decoder", true},
              {"layernorm_variant", "prelayernorm"},
              {"max_position_embeddings", 128},
              {"normalize_before", true},
              {"pad_token_id", 0},
              {"scale_embedding", true},
              {"unk_token_id", 3},
              {"vocab_size", 8008}};
}

json BlenderbotSmallExample() {  // facebook/blenderbot_small-90M
  return json{{"model_type", "blenderbot-small"},
              {"activation_function", "gelu"},
              {"bos_token_id", 1},
              {"d_model", 512},
              {"decoder_attention_heads", 16},
              {"decoder_ffn_dim", 2048},
              {"decoder_layers", 8},
              {"decoder_start_token_id", 1},
              {"encoder_attention_heads", 16},
              {"encoder_ffn_dim", 2048},
              {"encoder_layers", 8},
              {"eos_token_id", 2},
              {"init_std", 0.02},
              {"is_encoder_decoder", true},
              {"max_position_embeddings", 512},
              {"normalize_before", false},
              {"pad_token_id", 0},
              {"scale_embedding", true},
              {"vocab_size", 54944}};
}

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

}  // namespace

std::vector<ArchEntry> BartVariantArchs() {
  return {
      BartEntry("MarianMTModel", "marian", H::kConditionalGeneration, MarianExample()),
      BartEntry("MarianModel", "marian", H::kModel, MarianExample()),
      BartEntry("MarianForCausalLM", "marian", H::kCausalLM, MarianExample()),
      BartEntry("PegasusForConditionalGeneration", "pegasus", H::kConditionalGeneration,
                PegasusExample()),
      BartEntry("PegasusModel", "pegasus", H::kModel, PegasusExample()),
      BartEntry("PegasusForCausalLM", "pegasus", H::kCausalLM, PegasusExample()),
      BartEntry("BlenderbotForConditionalGeneration", "blenderbot", H::kConditionalGeneration,
                BlenderbotExample()),
      BartEntry("BlenderbotModel", "blenderbot", H::kModel, BlenderbotExample()),
      BartEntry("BlenderbotForCausalLM", "blenderbot", H::kCausalLM, BlenderbotExample()),
      BartEntry("BlenderbotSmallForConditionalGeneration", "blenderbot-small",
                H::kConditionalGeneration, BlenderbotSmallExample()),
      BartEntry("BlenderbotSmallModel", "blenderbot-small", H::kModel, BlenderbotSmallExample()),
      BartEntry("BlenderbotSmallForCausalLM", "blenderbot-small", H::kCausalLM,
                BlenderbotSmallExample()),
      BartEntry("M2M100ForConditionalGeneration", "m2m_100", H::kConditionalGeneration,
                M2m100Example()),
      BartEntry("M2M100Model", "m2m_100", H::kModel, M2m100Example()),
  };
}

}  // namespace ts::zoo::internal
