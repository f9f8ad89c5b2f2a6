// apertus (modular_apertus.py): llama's attention with per-head q / k RMSNorm before the rotary
// (ApertusAttention: q_norm / k_norm), the layer norms renamed attention_layernorm /
// feedforward_layernorm (ApertusDecoderLayer), NemotronMLP's plain bias-free up / down MLP with
// hidden_act xielu (XIELUActivation: learnable act_fn.alpha_p / alpha_n, Act::xielu). Without
// rope fields ApertusConfig defaults to a llama3 rotary at theta 12e6 (factor 8, original 8192,
// low 1, high 4).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Apertus() {
  Names n;
  n.ln1 = "attention_layernorm";
  n.ln2 = "feedforward_layernorm";
  return {
      .model_type = "apertus",
      .defaults = {.max_pos = 65536, .act = "xielu", .eps = 1e-5, .theta = 12000000.0},
      .names = n,
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        // ApertusConfig has attention_bias (q / k / v / o); its MLP has no bias.
        TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", false));
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
        c.qk_norm = QkNorm::kPerHeadRms;
        c.mlp = Mlp::kPlain;
        if (!FindRopeParams(config)) {  // ApertusConfig.__post_init__'s rope_parameters
          json rc = config;
          rc["rope_parameters"] = {
              {"rope_type", "llama3"},
              {"rope_theta", r.Has("rope_theta") ? config["rope_theta"] : json(12000000.0)},
              {"factor", 8.0},
              {"original_max_position_embeddings", 8192},
              {"low_freq_factor", 1.0},
              {"high_freq_factor", 4.0}};
          TS_ASSIGN_OR_RETURN(c.rope, ParseRope(rc, c.max_pos));
          c.rope_local = c.rope;
        }
        return OkStatus();
      },
      .classes = {"ApertusForCausalLM", "", "ApertusForTokenClassification", "", "ApertusModel"},
      // swiss-ai/Apertus-8B-Instruct-2509
      .example =
          R"({"hidden_size":4096,"intermediate_size":21504,"num_attention_heads":32,"num_key_value_heads":8,
         "num_hidden_layers":32,"vocab_size":131072,"max_position_embeddings":65536,
         "rms_norm_eps":1e-5,"hidden_act":"xielu","attention_bias":false,
         "rope_scaling":{"rope_type":"llama3","factor":8.0,"original_max_position_embeddings":8192,
           "low_freq_factor":1.0,"high_freq_factor":4.0},"rope_theta":12000000.0,
         "tie_word_embeddings":false,"pad_token_id":3,"bos_token_id":1,"eos_token_id":68,
         "initializer_range":0.02})",
  };
}

TS_ZOO_DECODER_FAMILY(Apertus);

}  // namespace ts::zoo::internal::decoder
