// biogpt: learned positions with offset 2 from the mask, sqrt(d) embedding scale.
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily BioGpt() {
  return {
      .model_type = "biogpt",
      .fields = {.kv = "", .eps = "layer_norm_eps"},
      .defaults = {.max_pos = 1024, .act = "gelu", .eps = 1e-12, .tie = true},
      .names = {.head_base = "biogpt.",
                .pos = "embed_positions",
                .final_norm = "layer_norm",
                .lm_head = "output_projection",
                .token_cls = "classifier"},
      .llama_biases = false,
      .reads_rope = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        BartDecoderLayers(c);
        TS_ASSIGN_OR_RETURN(bool scale, r.Bool("scale_embedding", true));
        if (scale) c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
        c.pos = Pos::kLearned;
        c.pos_offset = 2;
        c.pos_from_mask = true;
        return OkStatus();
      },
      .classes = {"BioGptForCausalLM",
                  "BioGptForSequenceClassification",
                  "BioGptForTokenClassification",
                  "",
                  "BioGptModel"},
      // microsoft/biogpt
      .example = R"({"hidden_size":1024,"intermediate_size":4096,"num_attention_heads":16,"num_hidden_layers":24,
         "max_position_embeddings":1024,"vocab_size":42384,"hidden_act":"gelu","scale_embedding":true,
         "layer_norm_eps":1e-12,"pad_token_id":1,"bos_token_id":0,"eos_token_id":2})",
      // BioGptForCausalLM ties output_projection (not lm_head) to the token embedding.
      .state_dict = {.tied_output = "output_projection"},
  };
}

TS_ZOO_DECODER_FAMILY(BioGpt);

}  // namespace ts::zoo::internal::decoder
