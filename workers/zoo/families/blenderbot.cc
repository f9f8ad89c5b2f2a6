// blenderbot (modeling_blenderbot.py): BART's layers (bart.cc) pre-LN with final layer_norm,
// learned positions at arange(S) (no offset); start = bos. BlenderbotForCausalLM holds the decoder
// as `model.decoder.*` with lm_head tied to its embed_tokens and no final_logits_bias; no
// SequenceClassification or QuestionAnswering class.
#include "workers/zoo/families/bart.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;
using H = Seq2SeqHead;

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

std::vector<ArchEntry> BlenderbotArchs() {
  return {
      BartEntry("BlenderbotForConditionalGeneration", "blenderbot", H::kConditionalGeneration,
                BlenderbotExample()),
      BartEntry("BlenderbotModel", "blenderbot", H::kModel, BlenderbotExample()),
      BartEntry("BlenderbotForCausalLM", "blenderbot", H::kCausalLM, BlenderbotExample()),
  };
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Blenderbot, BlenderbotArchs);

}  // namespace ts::zoo::internal
