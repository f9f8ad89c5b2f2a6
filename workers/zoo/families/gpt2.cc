// gpt2: learned positions, Conv1D weights stored [in, out], fused biased `c_attn`, and the
// scores' scale of GPT2Attention's eager_attention_forward: / sqrt(head_dim) only when
// `scale_attn_weights` (default true), then / (layer_idx + 1) when
// `scale_attn_by_inverse_layer_idx` (default false).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

void GptLayers(Recipe& c) {
  c.pos = Pos::kLearned;
  c.norm = Norm::kLayerNorm;
  c.mlp = Mlp::kPlain;
  c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = true;
}

Fields Gpt2Fields() {
  return {.hidden = "n_embd",
          .inter = "n_inner",
          .layers = "n_layer",
          .heads = "n_head",
          .kv = "",
          .max_pos = "n_positions",
          .act = "activation_function",
          .eps = "layer_norm_epsilon"};
}

Names Gpt2Names() {
  return {.head_base = "transformer.",
          .embed = "wte",
          .pos = "wpe",
          .layers = "h.",
          .ln1 = "ln_1",
          .ln2 = "ln_2",
          .attn = "attn.",
          .qkv = "c_attn",
          .o = "c_proj",
          .up = "c_fc",
          .down = "c_proj",
          .final_norm = "ln_f",
          .token_cls = "classifier"};
}

DecoderFamily Gpt2() {
  return {
      .model_type = "gpt2",
      .fields = Gpt2Fields(),
      .defaults = {.inter_mult = 4, .max_pos = 1024, .act = "gelu_new", .eps = 1e-5, .tie = true},
      .names = Gpt2Names(),
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        GptLayers(c);
        c.conv1d = true;
        c.qkv = Qkv::kFused;
        TS_ASSIGN_OR_RETURN(bool scaled, r.Bool("scale_attn_weights", true));
        if (!scaled) c.attn_scale = 1.0;
        TS_ASSIGN_OR_RETURN(c.attn_scale_by_layer,
                            r.Bool("scale_attn_by_inverse_layer_idx", false));
        return OkStatus();
      },
      .scale_extra = [](const json&, const Recipe&, json& t) { t["n_ctx"] = t["n_positions"]; },
      .classes = {"GPT2LMHeadModel",
                  "GPT2ForSequenceClassification",
                  "GPT2ForTokenClassification",
                  "GPT2ForQuestionAnswering",
                  "GPT2Model"},
      // openai-community/gpt2
      .example = R"({"model_type":"gpt2","n_embd":768,"n_head":12,"n_layer":12,"n_positions":1024,
           "n_ctx":1024,"vocab_size":50257,"activation_function":"gelu_new",
           "layer_norm_epsilon":1e-5,"initializer_range":0.02,"bos_token_id":50256,
           "eos_token_id":50256})",
  };
}

TS_ZOO_DECODER_FAMILY(Gpt2);

}  // namespace ts::zoo::internal::decoder
