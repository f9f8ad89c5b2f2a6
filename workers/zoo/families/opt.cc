// opt: learned positions from `cumsum(mask) * mask - 1` with offset 2, ReLU.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Opt() {
  return {
      .model_type = "opt",
      .fields = {.inter = "ffn_dim", .kv = "", .act = "activation_function", .eps = ""},
      .defaults = {.act = "relu", .eps = 1e-5, .tie = true},
      .names = {.head_base = "model.decoder.",
                .model_base = "decoder.",
                .pos = "embed_positions",
                .final_norm = "final_layer_norm"},
      .llama_biases = false,
      .reads_rope = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(bool before, r.Bool("do_layer_norm_before", true));
        if (!before) return r.Error("do_layer_norm_before", "false is not supported by the zoo");
        TS_ASSIGN_OR_RETURN(int64_t proj, r.Int("word_embed_proj_dim", c.hidden));
        if (proj != c.hidden) return r.Error("word_embed_proj_dim", "must equal hidden_size");
        TS_ASSIGN_OR_RETURN(bool affine, r.Bool("layer_norm_elementwise_affine", true));
        if (!affine)
          return r.Error("layer_norm_elementwise_affine", "false is not supported by the zoo");
        TS_ASSIGN_OR_RETURN(bool bias, r.Bool("enable_bias", true));
        BartDecoderLayers(c);
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = bias;
        c.pos = Pos::kLearned;
        c.pos_offset = 2;
        c.pos_from_mask = true;
        return OkStatus();
      },
      .scale_extra = [](const json&, const Recipe&, json& t) {
        if (t.contains("word_embed_proj_dim")) t["word_embed_proj_dim"] = t["hidden_size"];
      },
      .classes = {"OPTForCausalLM",
                  "OPTForSequenceClassification",
                  "",
                  "OPTForQuestionAnswering",
                  "OPTModel"},
      // facebook/opt-125m
      .example = R"({"hidden_size":768,"ffn_dim":3072,"num_attention_heads":12,"num_hidden_layers":12,
         "max_position_embeddings":2048,"vocab_size":50272,"activation_function":"relu",
         "do_layer_norm_before":true,"word_embed_proj_dim":768,"enable_bias":true,
         "layer_norm_elementwise_affine":true,"pad_token_id":1,"bos_token_id":2,"eos_token_id":2})",
  };
}

TS_ZOO_DECODER_FAMILY(Opt);

}  // namespace ts::zoo::internal::decoder
