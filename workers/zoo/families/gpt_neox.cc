// gpt_neox: per-head fused `query_key_value`, partial rotary (`rotary_pct`, `rotary_emb_base`),
// parallel residual over two norms.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily GptNeoX() {
  return {
      .model_type = "gpt_neox",
      .fields = {.eps = "layer_norm_eps"},
      .defaults = {.act = "gelu", .eps = 1e-5},
      .names = {.head_base = "gpt_neox.",
                .embed = "embed_in",
                .attn = "attention.",
                .qkv = "query_key_value",
                .o = "dense",
                .up = "dense_h_to_4h",
                .down = "dense_4h_to_h",
                .final_norm = "final_layer_norm",
                .lm_head = "lm_head",  // transformers 5 (4.x: embed_out)
                .token_cls = "classifier"},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        json rc = config;
        if (!r.Has("rope_theta") && r.Has("rotary_emb_base")) {
          rc["rope_theta"] = config["rotary_emb_base"];
        }
        TS_RETURN_IF_ERROR(ReadClassicRotary(r, rc, "rotary_pct", 0.25, false, c));
        TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", true));
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
        c.mlp_bias = true;
        TS_ASSIGN_OR_RETURN(bool parallel, r.Bool("use_parallel_residual", true));
        if (parallel) c.block = Block::kParallel2;
        c.norm = Norm::kLayerNorm;
        c.qkv = Qkv::kPerHeadNarrow;
        c.mlp = Mlp::kPlain;
        return OkStatus();
      },
      .classes = {"GPTNeoXForCausalLM",
                  "GPTNeoXForSequenceClassification",
                  "GPTNeoXForTokenClassification",
                  "GPTNeoXForQuestionAnswering",
                  "GPTNeoXModel"},
      // EleutherAI/pythia-410m
      .example = R"({"model_type":"gpt_neox","hidden_size":1024,"intermediate_size":4096,
           "num_attention_heads":16,"num_hidden_layers":24,"vocab_size":50304,
           "max_position_embeddings":2048,"layer_norm_eps":1e-5,"rotary_pct":0.25,
           "rotary_emb_base":10000,"hidden_act":"gelu","use_parallel_residual":true,
           "tie_word_embeddings":false,"bos_token_id":0,"eos_token_id":0})",
  };
}

TS_ZOO_DECODER_FAMILY(GptNeoX);

}  // namespace ts::zoo::internal::decoder
