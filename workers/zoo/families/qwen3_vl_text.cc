// qwen3_vl_text (modeling_qwen3_vl.py Qwen3VLTextModel): Qwen3-VL's language model: qwen3's
// attention (per-head q / k RMSNorm before the rotary, attention_bias) with the interleaved
// multimodal rotary, equal to the 1D one over text (qwen2_vl_text.cc); the deepstack visual
// features it adds to its first layers come only with images, which the class alone never has.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

DecoderFamily Qwen3VlText() {
  return MropeTextFamily({
      .model_type = "qwen3_vl_text",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 128000, .eps = 1e-6, .theta = 5000000.0, .head_dim = 128},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", false));
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
        c.qk_norm = QkNorm::kPerHeadRms;
        return OkStatus();
      },
      .scale_extra = ScaleMropeSection,
      .classes = {"", "", "", "", "Qwen3VLTextModel"},
      // Qwen/Qwen3-VL-2B-Instruct's language model
      .example =
          R"({"hidden_size":2048,"intermediate_size":6144,"num_attention_heads":16,"num_key_value_heads":8,
         "head_dim":128,"num_hidden_layers":28,"vocab_size":151936,"max_position_embeddings":262144,
         "rms_norm_eps":1e-6,"rope_theta":5000000,"hidden_act":"silu","attention_bias":false,
         "rope_scaling":{"rope_type":"default","mrope_section":[24,20,20],"mrope_interleaved":true},
         "tie_word_embeddings":true,"bos_token_id":151643,"eos_token_id":151645,
         "initializer_range":0.02})",
  });
}

}  // namespace

TS_ZOO_DECODER_FAMILY(Qwen3VlText);

}  // namespace ts::zoo::internal::decoder
