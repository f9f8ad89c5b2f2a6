// qwen2_vl_text (modeling_qwen2_vl.py Qwen2VLTextModel): the language model of Qwen2-VL as its
// own class: qwen2's layers (q / k / v biased, o_proj not) with the multimodal rotary. Over text
// alone its three position rows (temporal, height, width) are the same arange, so each
// mrope_section of cos / sin equals the 1D rotary's: the zoo runs the 1D rotary; the legacy
// rope type "mrope" reads as "default" (as Qwen2VLTextConfig rewrites it), and the tiny config
// scales mrope_section to the tiny head (transformers splits cos / sin by it).
#include <cmath>
#include <memory>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

json MropeAsDefault(const json& config) {
  json c = config;
  const std::optional<RopeParamsRef> ref = FindRopeParams(c);
  if (!ref) return c;
  json& p = RopeParams(c, *ref);
  for (const char* key : {"rope_type", "type"}) {
    if (p.contains(key) && p[key].is_string() && p[key].get<std::string>() == "mrope")
      p[key] = "default";
  }
  return c;
}

void ScaleMropeSection(const json&, const Recipe&, json& t) {
  const std::optional<RopeParamsRef> ref = FindRopeParams(t);
  if (!ref) return;
  json& p = RopeParams(t, *ref);
  if (!p.contains("mrope_section") || !p["mrope_section"].is_array()) return;
  const int64_t hd =
      t.contains("head_dim") && t["head_dim"].is_number_integer()
          ? t["head_dim"].get<int64_t>()
          : t["hidden_size"].get<int64_t>() / t["num_attention_heads"].get<int64_t>();
  const int64_t half = hd / 2;
  int64_t total = 0;
  for (const json& v : p["mrope_section"]) total += v.is_number_integer() ? v.get<int64_t>() : 0;
  if (total <= 0) return;
  json out = json::array();
  int64_t used = 0;
  const size_t n = p["mrope_section"].size();
  for (size_t i = 0; i < n; ++i) {
    int64_t v = i + 1 == n ? half - used
                           : static_cast<int64_t>(std::llround(
                                 static_cast<double>(p["mrope_section"][i].get<int64_t>()) *
                                 static_cast<double>(half) / static_cast<double>(total)));
    out.push_back(v);
    used += v;
  }
  p["mrope_section"] = out;
}

DecoderFamily MropeTextFamily(DecoderFamily f) {
  auto base = std::make_shared<DecoderFamily>(f);  // without `recipe`: parsed as a recipe family
  f.recipe = [base](const json& config) { return ParseRecipe(*base, MropeAsDefault(config)); };
  return f;
}

namespace {

DecoderFamily Qwen2VlText() {
  return MropeTextFamily({
      .model_type = "qwen2_vl_text",
      .defaults = {.max_pos = 32768, .eps = 1e-5, .theta = 1000000.0},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        c.q_bias = c.k_bias = c.v_bias = true;  // Qwen2VLAttention: o_proj has none
        TS_ASSIGN_OR_RETURN(bool sliding, r.Bool("use_sliding_window", false));
        if (sliding) return r.Error("use_sliding_window", "true is not supported by the zoo");
        return OkStatus();
      },
      .scale_extra = ScaleMropeSection,
      .classes = {"", "", "", "", "Qwen2VLTextModel"},
      // Qwen/Qwen2-VL-2B-Instruct's language model
      .example =
          R"({"hidden_size":1536,"intermediate_size":8960,"num_attention_heads":12,"num_key_value_heads":2,
         "num_hidden_layers":28,"vocab_size":151936,"max_position_embeddings":32768,
         "rms_norm_eps":1e-6,"rope_theta":1000000.0,"hidden_act":"silu",
         "rope_scaling":{"type":"mrope","mrope_section":[16,24,24]},"use_sliding_window":false,
         "sliding_window":32768,"max_window_layers":28,"tie_word_embeddings":true,
         "bos_token_id":151643,"eos_token_id":151645,"initializer_range":0.02})",
  });
}

}  // namespace

TS_ZOO_DECODER_FAMILY(Qwen2VlText);

}  // namespace ts::zoo::internal::decoder
