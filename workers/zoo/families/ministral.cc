// ministral: llama layout with a `layer_types` sliding/full pattern.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Ministral() {
  return {
      .model_type = "ministral",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 32768},
      .parse = MistralWindow,
      .scale_extra = ScaleWindowPattern,
      .classes = {"MinistralForCausalLM",
                  "MinistralForSequenceClassification",
                  "MinistralForTokenClassification",
                  "MinistralForQuestionAnswering",
                  "MinistralModel"},
      .qa_base = "transformer.",
      // mistralai/Ministral-8B-Instruct-2410 (interleaved sliding / full layers)
      .example = R"({"hidden_size":4096,"intermediate_size":12288,"num_attention_heads":32,"num_key_value_heads":8,
         "head_dim":128,"num_hidden_layers":36,"vocab_size":131072,"max_position_embeddings":32768,
         "rms_norm_eps":1e-5,"rope_theta":100000000.0,"hidden_act":"silu","sliding_window":4096,
         "layer_types":["sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention",
           "sliding_attention","sliding_attention","sliding_attention","full_attention"],
         "tie_word_embeddings":false,"bos_token_id":1,"eos_token_id":2})",
  };
}

TS_ZOO_DECODER_FAMILY(Ministral);

}  // namespace ts::zoo::internal::decoder
