// glm4v_text (modeling_glm4v.py Glm4vTextModel): GLM-4.1V's language model as its own class:
// glm4's sandwich layers (post_self_attn_layernorm, post_mlp_layernorm, fused gate_up_proj) with
// Glm4vTextAttention's q / k / v biases always on (o_proj none) and head_dim = hidden_size /
// num_attention_heads. Its rotary: the default rope over head_dim * partial_rotary_factor (1.0 when
// the config has none, as the rope init reads it), laid out interleaved (cos[..., :d/2]
// .repeat_interleave(2), rotate_half_llm); over text the three mrope position rows are one arange,
// so each mrope_section picks the 1D rotary's dims (qwen2_vl_text.cc).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

DecoderFamily Glm4vText() {
  return MropeTextFamily({
      .model_type = "glm4v_text",
      .defaults = {.max_pos = 32768, .eps = 1e-5},
      .names = {.post1 = "post_self_attn_layernorm", .post2 = "post_mlp_layernorm"},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        c.mlp = Mlp::kFusedGateUp;
        c.interleaved = true;
        c.block = Block::kSandwich;
        TS_RETURN_IF_ERROR(ReadPartial(r, "partial_rotary_factor", 1.0, c));
        c.q_bias = c.k_bias = c.v_bias = true;
        return OkStatus();
      },
      .scale_extra =
          [](const json& real, const Recipe& rc, json& t) {
            ScaleMropeSection(real, rc, t);
            // The sections split the rotated dims, not the head: halve them again with the factor.
            const std::optional<RopeParamsRef> ref = FindRopeParams(t);
            if (!ref || rc.rotary_dim == rc.head_dim) return;
            json& p = RopeParams(t, *ref);
            if (!p.contains("mrope_section")) return;
            const int64_t hd =
                t["hidden_size"].get<int64_t>() / t["num_attention_heads"].get<int64_t>();
            const int64_t half = hd * rc.rotary_dim / rc.head_dim / 2;
            json out = json::array();
            int64_t used = 0;
            const size_t n = p["mrope_section"].size();
            for (size_t i = 0; i < n; ++i) {
              const int64_t v = i + 1 == n ? half - used : half / static_cast<int64_t>(n);
              out.push_back(v);
              used += v;
            }
            p["mrope_section"] = out;
          },
      .classes = {"", "", "", "", "Glm4vTextModel"},
      // zai-org/GLM-4.1V-9B-Thinking's language model
      .example =
          R"({"hidden_size":4096,"intermediate_size":13696,"num_attention_heads":32,"num_key_value_heads":2,
         "num_hidden_layers":40,"vocab_size":151552,"max_position_embeddings":65536,
         "rms_norm_eps":1e-5,"rope_theta":10000.0,"partial_rotary_factor":0.5,"hidden_act":"silu",
         "rope_scaling":{"rope_type":"default","mrope_section":[8,12,12]},"attention_bias":true,
         "tie_word_embeddings":false,"pad_token_id":151329,"eos_token_id":151329,
         "initializer_range":0.02})",
  });
}

}  // namespace

TS_ZOO_DECODER_FAMILY(Glm4vText);

}  // namespace ts::zoo::internal::decoder
