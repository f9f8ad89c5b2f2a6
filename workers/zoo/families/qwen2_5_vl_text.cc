// qwen2_5_vl_text (modeling_qwen2_5_vl.py Qwen2_5_VLTextModel): Qwen2.5-VL's language model, laid
// out as Qwen2VLTextModel (qwen2_vl_text.cc: q / k / v biased, the multimodal rotary equal to the
// 1D one over text).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

DecoderFamily Qwen25VlText() {
  return MropeTextFamily({
      .model_type = "qwen2_5_vl_text",
      .defaults = {.max_pos = 128000, .eps = 1e-6, .theta = 1000000.0},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        c.q_bias = c.k_bias = c.v_bias = true;
        TS_ASSIGN_OR_RETURN(bool sliding, r.Bool("use_sliding_window", false));
        if (sliding) return r.Error("use_sliding_window", "true is not supported by the zoo");
        return OkStatus();
      },
      .scale_extra = ScaleMropeSection,
      .classes = {"", "", "", "", "Qwen2_5_VLTextModel"},
      // Qwen/Qwen2.5-VL-3B-Instruct's language model
      .example =
          R"({"hidden_size":2048,"intermediate_size":11008,"num_attention_heads":16,"num_key_value_heads":2,
         "num_hidden_layers":36,"vocab_size":151936,"max_position_embeddings":128000,
         "rms_norm_eps":1e-6,"rope_theta":1000000.0,"hidden_act":"silu",
         "rope_scaling":{"type":"mrope","mrope_section":[16,24,24]},"use_sliding_window":false,
         "sliding_window":32768,"max_window_layers":70,"tie_word_embeddings":true,
         "bos_token_id":151643,"eos_token_id":151645,"initializer_range":0.02})",
  });
}

}  // namespace

TS_ZOO_DECODER_FAMILY(Qwen25VlText);

}  // namespace ts::zoo::internal::decoder
