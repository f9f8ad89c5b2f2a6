// nanochat (modular_nanochat.py): LlamaModel's layout with NanoChat's pieces. NanoChatRMSNorm is
// Llama4TextL2Norm, x * rsqrt(mean(x^2) + eps) without a weight, for input_layernorm,
// post_attention_layernorm and `norm`, which NanoChatModel also applies to the embeddings before
// the first layer (Recipe::embed_norm). NanoChatAttention is Qwen3Attention (q / k / v / o biases
// with attention_bias) with weight-free per-head q / k norms after the rotary, and a rotate_half
// of (x2, -x1), the negation of llama's (Recipe::rotate_half_negated). NanoChatMLP is CLIPMLP
// bias-free: fc1, hidden_act (relu2 by default), fc2. NanoChatForCausalLM is Gemma2ForCausalLM:
// an untied-by-default lm_head with final_logit_softcapping (15.0; null: none).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily NanoChat() {
  Names n;
  n.up = "fc1";
  n.down = "fc2";
  return {
      .model_type = "nanochat",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 2048, .act = "relu2", .eps = 1e-6},
      .names = n,
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", false));
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
        c.norm = Norm::kRmsNoWeight;
        c.qk_norm = QkNorm::kPerHeadRmsNoWeight;
        c.qk_norm_after_rope = true;
        c.rotate_half_negated = true;
        c.embed_norm = true;
        c.mlp = Mlp::kPlain;
        if (!r.IsNull("final_logit_softcapping")) {
          TS_ASSIGN_OR_RETURN(c.final_softcap, r.Double("final_logit_softcapping", 15.0));
          if (c.final_softcap <= 0) return r.Error("final_logit_softcapping", "must be positive");
        }
        return OkStatus();
      },
      .classes = {"NanoChatForCausalLM", "", "", "", "NanoChatModel"},
      // NanoChatConfig()'s defaults (the d12 sizes; karpathy/nanochat-d32 is 2048 wide, 32 deep)
      .example = R"({"model_type":"nanochat","hidden_size":768,"intermediate_size":8192,
         "num_attention_heads":6,"num_key_value_heads":6,"num_hidden_layers":12,
         "vocab_size":50304,"max_position_embeddings":2048,"rms_norm_eps":1e-6,
         "hidden_act":"relu2","attention_bias":false,"final_logit_softcapping":15.0,
         "rope_theta":10000.0,"tie_word_embeddings":false,"bos_token_id":0,"eos_token_id":1,
         "pad_token_id":1,"initializer_range":0.02})",
  };
}

TS_ZOO_DECODER_FAMILY(NanoChat);

}  // namespace ts::zoo::internal::decoder
