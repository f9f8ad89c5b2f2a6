// bloom: ALiBi from `cumsum(mask) - 1`, `word_embeddings_layernorm`, per-head fused qkv, tanh gelu.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

Names BloomNames(bool emb_ln) {
  return {.head_base = "transformer.",
          .embed = "word_embeddings",
          .emb_ln = emb_ln ? "word_embeddings_layernorm" : "",
          .layers = "h.",
          .attn = "self_attention.",
          .qkv = "query_key_value",
          .o = "dense",
          .up = "dense_h_to_4h",
          .down = "dense_4h_to_h",
          .final_norm = "ln_f",
          .token_cls = "classifier"};
}

Status RejectPostLnResidual(const ConfigReader& r) {
  TS_ASSIGN_OR_RETURN(bool post, r.Bool("apply_residual_connection_post_layernorm", false));
  if (post)
    return r.Error("apply_residual_connection_post_layernorm", "true is not supported by the zoo");
  return OkStatus();
}

DecoderFamily Bloom() {
  return {
      .model_type = "bloom",
      .fields = {.inter = "",
                 .layers = "n_layer",
                 .heads = "n_head",
                 .kv = "",
                 .max_pos = "",
                 .act = "",
                 .eps = "layer_norm_epsilon"},
      .defaults = {.inter_mult = 4, .act = "gelu_pytorch_tanh", .eps = 1e-5, .tie = true},
      .names = BloomNames(/*emb_ln=*/true),
      .llama_biases = false,
      .reads_rope = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(RejectPostLnResidual(r));
        c.norm = Norm::kLayerNorm;
        c.pos = Pos::kNone;
        c.alibi = Alibi::kBloom;
        c.qkv = Qkv::kPerHead;
        c.mlp = Mlp::kPlain;
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = true;
        c.embed_padding_idx = false;
        return OkStatus();
      },
      .aliases = {{"n_embed", "hidden_size"},
                  {"num_attention_heads", "n_head"},
                  {"num_hidden_layers", "n_layer"}},
      .classes = {"BloomForCausalLM",
                  "BloomForSequenceClassification",
                  "BloomForTokenClassification",
                  "BloomForQuestionAnswering",
                  "BloomModel"},
      // bigscience/bloom-560m
      .example = R"({"n_embed":1024,"num_attention_heads":16,"n_layer":24,"vocab_size":250880,"layer_norm_epsilon":1e-5,
         "apply_residual_connection_post_layernorm":false,"initializer_range":0.02,"pad_token_id":3,
         "bos_token_id":1,"eos_token_id":2,"slow_but_exact":false})",
  };
}

TS_ZOO_DECODER_FAMILY(Bloom);

}  // namespace ts::zoo::internal::decoder
