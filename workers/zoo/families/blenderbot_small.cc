// blenderbot-small (modeling_blenderbot_small.py): BART's post-LN and layernorm_embedding
// (bart.cc), learned positions without offset; its decoder normalises the unscaled token
// embeddings and adds the positions after (transformers 5 leaves the decoder's embed_scale
// unused). BlenderbotSmallForCausalLM holds the decoder as `model.decoder.*` with lm_head tied to
// its embed_tokens and no final_logits_bias; no SequenceClassification or QuestionAnswering class.
#include "workers/zoo/families/bart.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;
using H = Seq2SeqHead;

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

std::vector<ArchEntry> BlenderbotSmallArchs() {
  return {
      BartEntry("BlenderbotSmallForConditionalGeneration", "blenderbot-small",
                H::kConditionalGeneration, BlenderbotSmallExample()),
      BartEntry("BlenderbotSmallModel", "blenderbot-small", H::kModel, BlenderbotSmallExample()),
      BartEntry("BlenderbotSmallForCausalLM", "blenderbot-small", H::kCausalLM,
                BlenderbotSmallExample()),
  };
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(BlenderbotSmall, BlenderbotSmallArchs);

}  // namespace ts::zoo::internal
