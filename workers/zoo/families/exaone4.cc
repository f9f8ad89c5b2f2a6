// exaone4: post-norm block `x + norm(attn(x))`, per-head q/k RMSNorm, sliding layers with rotary
// and NoPE full layers.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Exaone4() {
  return {
      .model_type = "exaone4",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.eps = 1e-5, .tie = true},
      .names = {.ln1 = "",
                .ln2 = "",
                .post1 = "post_attention_layernorm",
                .post2 = "post_feedforward_layernorm"},
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        c.block = Block::kPost;
        c.qk_norm = QkNorm::kPerHeadRms;
        // With a window, sliding layers use rotary and full layers are NoPE.
        return SlidingWithPattern(r, config, /*pattern_default=*/0, /*rope_local=*/false, c);
      },
      .scale_extra = [](const json& real, const Recipe& rc, json& t) {
        if (!real.contains("sliding_window") || real["sliding_window"].is_null()) return;
        ScaleSlidingPattern(rc.rope_on, real, rc, t);
      },
      .classes = {"Exaone4ForCausalLM",
                  "Exaone4ForSequenceClassification",
                  "Exaone4ForTokenClassification",
                  "Exaone4ForQuestionAnswering",
                  "Exaone4Model"},
      .qa_base = "transformer.",
      // LGAI-EXAONE/EXAONE-4.0-32B (3 sliding layers, then a NoPE full layer)
      .example = R"({"hidden_size":5120,"intermediate_size":27392,"num_attention_heads":40,"num_key_value_heads":8,
         "head_dim":128,"num_hidden_layers":64,"vocab_size":102400,"max_position_embeddings":131072,
         "rms_norm_eps":1e-5,"rope_theta":1000000.0,"hidden_act":"silu",
         "rope_scaling":{"rope_type":"llama3","factor":16.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
           "original_max_position_embeddings":8192},
         "sliding_window":4096,"sliding_window_pattern":"LLLG","tie_word_embeddings":false,
         "pad_token_id":0,"bos_token_id":1,"eos_token_id":361})",
  };
}

TS_ZOO_DECODER_FAMILY(Exaone4);

}  // namespace ts::zoo::internal::decoder
