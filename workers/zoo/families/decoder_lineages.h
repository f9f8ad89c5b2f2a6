// The pieces a decoder family shares with the families derived from it (as transformers' modular
// files derive one family from another), grouped by the family file that defines them. A decoder
// family is one file, families/<model_type>.cc, that defines its DecoderFamily and registers it
// (TS_ZOO_DECODER_FAMILY, trunks/decoder_family.h); adding one takes that file and its line in
// CMakeLists.txt. Private to the zoo.
#pragma once

#include <string>

#include "workers/zoo/config.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/decoder_family.h"

namespace ts::zoo::internal::decoder {

// Pieces a family shares with the one it derives from (as transformers' modular files do).
// gpt2.cc: GPT-2's size fields (n_embd, n_inner, n_layer, n_head, n_positions,
// activation_function, layer_norm_epsilon; also gptj's) and HF names (transformer.wte / wpe,
// h.i.ln_1 / attn.c_attn / c_proj / ln_2 / mlp.c_fc / c_proj, ln_f; gpt_neo's base).
Fields Gpt2Fields();
Names Gpt2Names();
// bloom.cc: BLOOM's HF names (transformer.word_embeddings, h.i.self_attention.query_key_value /
// dense, mlp.dense_h_to_4h / dense_4h_to_h, ln_f; also falcon's), with BLOOM's
// word_embeddings_layernorm when `emb_ln`.
Names BloomNames(bool emb_ln);
// apply_residual_connection_post_layernorm: true is rejected (bloom, falcon).
Status RejectPostLnResidual(const ConfigReader& r);
// qwen2.cc: rotary over the whole head and q/k/v biases (qwen2, qwen2_moe).
Status ReadQwen2Attention(const ConfigReader& r, const json& config, Recipe& c);
// qwen3.cc: rotary over the whole head, attention_bias, per-head q/k RMSNorm (qwen3, qwen3_moe).
Status ReadQwen3Attention(const ConfigReader& r, const json& config, Recipe& c);
// qwen2_moe.cc: the Qwen MoE layers (qwen2_moe, qwen3_moe): softmax router, top-k, optional
// renormalisation (norm_topk_prob), dense layers by decoder_sparse_step / mlp_only_layers, and
// qwen2_moe's gated shared expert (shared_inter > 0); the config class's defaults.
struct QwenMoeDefaults {
  int64_t experts = 0, top_k = 0, inter = 0, shared_inter = 0;
  // The field of the expert width ("": none, the width is `inter`: olmoe, flex_olmo).
  std::string inter_field = "moe_intermediate_size";
};
Status ReadQwenMoe(const ConfigReader& r, const json& config, const QwenMoeDefaults& d,
                   Recipe& c);
void ScaleQwenMoe(const json& real, const Recipe& rc, json& t);

// olmo2.cc: OLMo-2's attention (rotary over the whole head, attention_bias, q/k RMSNorm over
// the whole projection; also olmoe's).
Status ReadOlmo2Attention(const ConfigReader& r, const json& config, Recipe& c);

// deepseek_readers.cc: the DeepSeek lineage's pieces (deepseek_v2, deepseek_v3, glm4_moe,
// glm4_moe_lite, dots1, solar_open, exaone_moe, minimax_m2, ernie4_5_moe and youtu use them).
// A config class's multi-head latent attention defaults.
struct MlaSpec {
  int64_t q_lora = 1536, kv_lora = 512, nope = 128, rope = 64, v = 128;
  double ln_eps = 0.0;  // q_a_layernorm / kv_a_layernorm eps; 0: rms_norm_eps
};

// A DeepSeek-lineage config class's MoE defaults and field names.
struct DeepseekMoeSpec {
  bool sigmoid = true;  // DeepseekV3TopkRouter (else DeepseekV2Moe's softmax router)
  std::string experts_field = "n_routed_experts", shared_field = "n_shared_experts";
  int64_t experts = 256, top_k = 8, inter = 2048, shared = 1;  // < 0: the config must name it
  // The experts' width field ("": intermediate_size, minimax_m2).
  std::string inter_field = "moe_intermediate_size";
  double scaling = 2.5;
  int64_t n_group = 8, topk_group = 4;
  bool norm_topk = true;
  // Dense layers before the MoE ones: `dense` of them, read from `dense_field` when the config
  // class has it ("" = not a field); an explicit `mlp_layer_types` ("dense" / "sparse") list
  // wins when `layer_types_field`.
  std::string dense_field = "first_k_dense_replace";
  int64_t dense = 3;
  bool layer_types_field = false;
};

// The DeepSeek MoE layers (decoder.h Router kDeepseekV2 / kDeepseekV3) under `d`'s defaults.
Status ReadDeepseekMoe(const ConfigReader& r, const json& config, const DeepseekMoeSpec& d,
                       Recipe& c);
// Tiny fields: 4 experts (two groups of two when the real config groups them), MLA widths
// 32 / 8, the dense-first layers kept.
void ScaleDeepseekLike(const DeepseekMoeSpec& d, const json& real, const Recipe& rc, json& t);
// The MLA families' attention parse: the classic rotary, then MLA; adjacent-pair rotary unless
// the class reads rope_interleave and it is false; mlp_bias when the class reads it.
ParseFn MlaParse(const MlaSpec& md, bool reads_interleave, bool reads_mlp_bias);
ParseFn DeepseekMoeParse(const DeepseekMoeSpec& d);
ScaleFn DeepseekMoeScale(const DeepseekMoeSpec& d);
// `rope_theta` defaulted to the config class's value, then the classic rotary.
Status RotaryWithTheta(const ConfigReader& r, const json& config, double theta,
                       const std::string& partial_field, double partial, Recipe& c);

// olmoe.cc: the OLMoE experts of intermediate_size (Qwen MoE router; also flex_olmo's).
ParseFn OlmoeExperts(int64_t experts, int64_t top_k);
void ScaleOlmoeExperts(const json& real, const Recipe& rc, json& t);

// qwen2_vl_text.cc: the language models of the Qwen VL families (qwen2_vl_text, qwen2_5_vl_text,
// qwen3_vl_text): over text their multimodal rotary is the 1D one. The family parsed with the
// legacy rope type "mrope" read as "default" (MropeAsDefault); mrope_section scaled to the tiny
// head (ScaleMropeSection, a scale_extra).
json MropeAsDefault(const json& config);
void ScaleMropeSection(const json& real, const Recipe& rc, json& t);
DecoderFamily MropeTextFamily(DecoderFamily f);

// Families that others start from (a derived family edits a copy).
DecoderFamily Gemma2();  // gemma2.cc: vaultgemma
DecoderFamily Granite();     // granite.cc: granitemoe
DecoderFamily GraniteMoe();  // granitemoe.cc: granitemoeshared
DecoderFamily Gpt2();    // gpt2.cc: gpt_bigcode
DecoderFamily LlamaLm();  // llama.cc: llava's language model
DecoderFamily MistralLm();  // mistral.cc: the LLaVA lineage's mistral language model
DecoderFamily Gptj();    // gptj.cc: codegen
DecoderFamily HunYuanDenseV1();  // hunyuan_v1_dense.cc: hunyuan_v1_moe
DecoderFamily Olmo2();   // olmo2.cc: flex_olmo
DecoderFamily Qwen3();   // qwen3.cc: qwen3_moe, dots1

// Layouts a family shares with those derived from it.
Status GlmLayers(const ConfigReader& r, const json& config, Recipe& c);     // glm.cc: glm4
Status CohereLayers(const ConfigReader& r, const json& config, Recipe& c);  // cohere.cc: cohere2
Status GptjLayers(const ConfigReader& r, const json& config, Recipe& c);    // gptj.cc: codegen
void ScaleRotaryDim(const json& real, const Recipe& rc, json& t);           // gptj.cc: codegen
void GptLayers(Recipe& c);  // gpt2.cc: gpt_bigcode
void ScaleExperts(const Recipe& rc, const std::string& experts_field,
                  json& t);  // mixtral.cc: qwen2_moe

}  // namespace ts::zoo::internal::decoder
