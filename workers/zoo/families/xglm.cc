// xglm: sinusoidal positions (offset 2), sqrt(d) embedding scale.
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Xglm() {
  return {
      .model_type = "xglm",
      .fields = {.hidden = "d_model",
                 .inter = "ffn_dim",
                 .layers = "num_layers",
                 .heads = "attention_heads",
                 .kv = "",
                 .act = "activation_function",
                 .eps = ""},
      .defaults = {.act = "gelu", .eps = 1e-5, .tie = true},
      .names = {.final_norm = "layer_norm"},
      .llama_biases = false,
      .reads_rope = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        BartDecoderLayers(c);
        TS_ASSIGN_OR_RETURN(bool scale, r.Bool("scale_embedding", true));
        if (scale) c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
        c.pos = Pos::kSinusoidal;
        c.pos_offset = 2;
        return OkStatus();
      },
      .classes = {"XGLMForCausalLM", "", "", "", "XGLMModel"},
      // facebook/xglm-564M
      .example = R"({"d_model":1024,"ffn_dim":4096,"num_layers":24,"attention_heads":16,"max_position_embeddings":2048,
         "vocab_size":256008,"activation_function":"gelu","scale_embedding":true,"pad_token_id":1,
         "bos_token_id":0,"eos_token_id":2,"decoder_start_token_id":2})",
  };
}

TS_ZOO_DECODER_FAMILY(Xglm);

}  // namespace ts::zoo::internal::decoder
