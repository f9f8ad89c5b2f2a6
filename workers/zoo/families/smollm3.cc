// smollm3: llama layout; every `no_rope_layer_interval`-th layer NoPE (`no_rope_layers`).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily SmolLm3() {
  return {
      .model_type = "smollm3",
      .defaults = {.max_pos = 32768, .tie = true, .theta = 2000000.0},
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        // no_rope_layers[i] == 1: layer i uses rotary; default every no_rope_layer_interval-th
        // layer is NoPE.
        TS_ASSIGN_OR_RETURN(int64_t interval, r.Int("no_rope_layer_interval", 4));
        TS_RETURN_IF_ERROR(Positive(r, "no_rope_layer_interval", interval));
        for (int64_t i = 0; i < c.layers; ++i)
          c.rope_on[static_cast<size_t>(i)] = (i + 1) % interval != 0;
        if (r.Has("no_rope_layers")) {
          const json& l = config["no_rope_layers"];
          if (!l.is_array() || static_cast<int64_t>(l.size()) != c.layers) {
            return r.Error("no_rope_layers", "expected num_hidden_layers integers");
          }
          for (size_t i = 0; i < l.size(); ++i) {
            if (!l[i].is_number_integer()) return r.Error("no_rope_layers", "expected integers");
            c.rope_on[i] = l[i].get<int64_t>() != 0;
          }
        }
        TS_ASSIGN_OR_RETURN(bool sw, r.Bool("use_sliding_window", false));
        if (sw) return r.Error("use_sliding_window", "true is not supported by the zoo");
        return OkStatus();
      },
      .scale_extra = [](const json&, const Recipe& rc, json& t) {
        json l = json::array();
        for (bool b : TinyPattern(rc.rope_on, rc)) l.push_back(b ? 1 : 0);
        t["no_rope_layers"] = l;
        t["no_rope_layer_interval"] = 2;
      },
      .classes = {"SmolLM3ForCausalLM",
                  "SmolLM3ForSequenceClassification",
                  "SmolLM3ForTokenClassification",
                  "SmolLM3ForQuestionAnswering",
                  "SmolLM3Model"},
      .qa_base = "transformer.",
      // HuggingFaceTB/SmolLM3-3B (every fourth layer NoPE)
      .example = R"({"hidden_size":2048,"intermediate_size":11008,"num_attention_heads":16,"num_key_value_heads":4,
         "num_hidden_layers":36,"vocab_size":128256,"max_position_embeddings":65536,"rms_norm_eps":1e-6,
         "rope_theta":5000000.0,"hidden_act":"silu","no_rope_layer_interval":4,"use_sliding_window":false,
         "attention_bias":false,"mlp_bias":false,"tie_word_embeddings":true,"pad_token_id":128004,
         "bos_token_id":128000,"eos_token_id":128012})",
  };
}

TS_ZOO_DECODER_FAMILY(SmolLm3);

}  // namespace ts::zoo::internal::decoder
