// phi3: fused `qkv_proj` and `gate_up_proj`, longrope (short/long factors), partial rotary, sliding
// window.
#include <string>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Phi3() {
  return {
      .model_type = "phi3",
      .defaults = {.eps = 1e-5},
      .names = {.qkv = "qkv_proj"},
      .llama_biases = false,
      .classic = true,
      .windows = WindowPattern::kAll,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        json rc = config;
        if (const std::optional<RopeParamsRef> ref = FindRopeParams(rc)) {
          const json& rs = RopeParams(rc, *ref);
          ConfigReader s(rs, ref->Prefix());
          std::string key = s.Has("rope_type") ? "rope_type" : "type";
          TS_ASSIGN_OR_RETURN(std::string kind, s.String(key, "default"));
          if (kind == "longrope" || kind == "su") {
            c.longrope.on = true;
            // The base stays the dict's rope_theta when it has one (transformers 5).
            const json theta = s.Has("rope_theta") ? rs.at("rope_theta") : json();
            rc.erase("rope_scaling");
            rc.erase("rope_parameters");
            if (!theta.is_null()) rc["rope_theta"] = theta;
          }
        }
        TS_RETURN_IF_ERROR(ReadClassicRotary(r, rc, "partial_rotary_factor", 1.0, false, c));
        if (c.longrope.on) TS_RETURN_IF_ERROR(ReadLongRope(r, config, c));
        c.qkv = Qkv::kFused;
        c.mlp = Mlp::kFusedGateUp;
        return OkStatus();
      },
      .classes = {"Phi3ForCausalLM",
                  "Phi3ForSequenceClassification",
                  "Phi3ForTokenClassification",
                  "",
                  "Phi3Model"},
      // microsoft/Phi-3-mini-4k-instruct
      .example = R"({"model_type":"phi3","hidden_size":3072,"intermediate_size":8192,
           "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
           "vocab_size":32064,"max_position_embeddings":4096,
           "original_max_position_embeddings":4096,"rms_norm_eps":1e-5,"rope_theta":10000.0,
           "rope_scaling":null,"hidden_act":"silu","sliding_window":2047,
           "tie_word_embeddings":false,"pad_token_id":32000,"bos_token_id":1,
           "eos_token_id":32000})",
  };
}

TS_ZOO_DECODER_FAMILY(Phi3);

}  // namespace ts::zoo::internal::decoder
