// cwm (modeling_cwm.py, Code World Model): llama's layers with bias-free q/k/v/o (no
// attention_bias field), sliding layers by layer_types, else full on every fourth layer starting
// at layer 0 (i % 4 == 0) and sliding elsewhere, window 8192; CwmConfig's RoPE when the config
// names none: llama3 scaling (factor 16, low 1, high 4, original 8192) on rope_theta 1e6.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

// The config with CwmConfig's defaults for the fields the window and RoPE readers need.
json WithCwmDefaults(const json& config, int64_t layers) {
  json c = config;
  if (!c.contains("sliding_window")) c["sliding_window"] = 8192;
  if (!c.contains("layer_types") || c["layer_types"].is_null()) {
    json types = json::array();
    for (int64_t i = 0; i < layers; ++i)
      types.push_back(i % 4 == 0 ? "full_attention" : "sliding_attention");
    c["layer_types"] = types;
  }
  if (!FindRopeParams(c)) {
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 16.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8192}};
  }
  return c;
}

}  // namespace

DecoderFamily Cwm() {
  return {
      .model_type = "cwm",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 131072, .eps = 1e-5, .theta = 1000000.0},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(c.mlp_bias, r.Bool("mlp_bias", false));  // CwmMLP is LlamaMLP
        const json cfg = WithCwmDefaults(config, c.layers);
        if (!FindRopeParams(config)) {
          json rc = cfg;
          if (!r.Has("rope_theta")) rc["rope_theta"] = 1000000.0;
          TS_ASSIGN_OR_RETURN(c.rope, ParseRope(rc, c.max_pos));
          c.rope_local = c.rope;
        }
        ConfigReader with_defaults(cfg);
        return MistralWindow(with_defaults, cfg, c);
      },
      .scale_extra = [](const json& real, const Recipe& rc,
                        json& t) { ScaleWindowPattern(WithCwmDefaults(real, rc.layers), rc, t); },
      .classes = {"CwmForCausalLM", "", "", "", "CwmModel"},
      // facebook/cwm
      .example = R"({"model_type":"cwm","hidden_size":6144,"intermediate_size":21504,
           "num_attention_heads":48,"num_key_value_heads":8,"head_dim":128,
           "num_hidden_layers":64,"vocab_size":128256,"max_position_embeddings":131072,
           "rms_norm_eps":1e-5,"rope_theta":1000000.0,"rope_scaling":{"rope_type":"llama3",
           "factor":16.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
           "original_max_position_embeddings":8192},"hidden_act":"silu","sliding_window":8192,
           "tie_word_embeddings":false,"bos_token_id":128000,
           "eos_token_id":[128001,128008,128009]})",
  };
}

TS_ZOO_DECODER_FAMILY(Cwm);

}  // namespace ts::zoo::internal::decoder
