// olmo3 (modular_olmo3.py): olmo2's post-norm block (post_attention_layernorm and
// post_feedforward_layernorm after each sublayer, no input norm) and q/k RMSNorm over the whole
// projection before the rotary, with sliding layers: layer_types, else sliding on every layer but
// each fourth ((i + 1) % 4 != 0), window 4096. The rotary is per layer type: the full layers run
// the configured RoPE (a flat rope_scaling is theirs alone), the sliding layers default RoPE on
// the same rope_theta (or their own entry of a rope_parameters nested by layer type).
// Olmo3Config: rope_theta 500000, rms_norm_eps 1e-5, no tie.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Olmo3() {
  return {
      .model_type = "olmo3",
      .defaults = {.eps = 1e-5, .theta = 500000.0},
      .names = {.ln1 = "",
                .ln2 = "",
                .post1 = "post_attention_layernorm",
                .post2 = "post_feedforward_layernorm"},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ReadAttentionBias(r, c));
        c.qk_norm = QkNorm::kFullRms;
        c.block = Block::kPost;
        const std::optional<RopeParamsRef> ref = FindRopeParams(config, "sliding_attention");
        if (ref && ref->sub == "sliding_attention") {
          json lc = config;
          if (!r.Has("rope_theta")) lc["rope_theta"] = c.rope.theta;
          TS_ASSIGN_OR_RETURN(c.rope_local, ParseRope(lc, c.max_pos, "sliding_attention"));
        } else {
          c.rope_local = RopeConfig();
          c.rope_local.theta = c.rope.theta;
          c.rope_local.max_position_embeddings = c.max_pos;
          c.rope_local.original_max_position_embeddings = c.max_pos;
        }
        return SlidingWithPattern(r, config, /*pattern_default=*/4, /*rope_local=*/true, c);
      },
      .scale_extra = [](const json& real, const Recipe& rc,
                        json& t) { ScaleSlidingPattern(rc.rope_local_on, real, rc, t); },
      .classes = {"Olmo3ForCausalLM", "", "", "", "Olmo3Model"},
      // modelled on allenai/Olmo-3-1025-7B (YaRN on the full layers)
      .example = R"({"model_type":"olmo3","hidden_size":4096,"intermediate_size":11008,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":100278,"max_position_embeddings":65536,"rms_norm_eps":1e-6,
           "rope_theta":500000,"rope_scaling":{"rope_type":"yarn","factor":8.0,
           "original_max_position_embeddings":8192,"beta_fast":32,"beta_slow":1,
           "attention_factor":1.2079441541679836},"hidden_act":"silu","attention_bias":false,
           "sliding_window":4096,"tie_word_embeddings":false,"pad_token_id":100277,
           "eos_token_id":100257})",
  };
}

TS_ZOO_DECODER_FAMILY(Olmo3);

}  // namespace ts::zoo::internal::decoder
