// The decoder families (README.md "Decoder families"), one file each: families/<model_type>.cc
// defines its DecoderFamily (config -> recipe, example config, head classes), and
// decoder_families.cc lists them. Adding a family: its file, its line below and in the list, and
// its source line in CMakeLists.txt. Private to the zoo.
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

DecoderFamily Helium();
DecoderFamily Olmo3();
DecoderFamily VaultGemma();
DecoderFamily Cwm();
DecoderFamily Olmoe();
DecoderFamily FlexOlmo();
DecoderFamily OpenAiGpt();
DecoderFamily DeepseekV2();
DecoderFamily DeepseekV3();
DecoderFamily Glm4Moe();
DecoderFamily Glm4MoeLite();
DecoderFamily Dots1();
DecoderFamily SolarOpen();
DecoderFamily ExaoneMoe();
DecoderFamily Youtu();
DecoderFamily MiniMaxM2();
DecoderFamily Ernie45Moe();
DecoderFamily Ministral();
DecoderFamily Ministral3();
DecoderFamily Arcee();
DecoderFamily SeedOss();
DecoderFamily SmolLm3();
DecoderFamily Glm();
DecoderFamily Glm4();
DecoderFamily Ernie45();
DecoderFamily Granite();
DecoderFamily Olmo();
DecoderFamily Nemotron();
DecoderFamily Exaone4();
DecoderFamily Gemma3Text();
DecoderFamily Cohere();
DecoderFamily Cohere2();
DecoderFamily Persimmon();
DecoderFamily Gptj();
DecoderFamily CodeGen();
DecoderFamily Falcon();
DecoderFamily Bloom();
DecoderFamily Mpt();
DecoderFamily Opt();
DecoderFamily GptNeo();
DecoderFamily Xglm();
DecoderFamily BioGpt();
DecoderFamily Gemma();
DecoderFamily Gemma2();
DecoderFamily Qwen3();
DecoderFamily Olmo2();
DecoderFamily Phi();
DecoderFamily Phi3();
DecoderFamily StableLm();
DecoderFamily Starcoder2();
DecoderFamily Gpt2();
DecoderFamily GptBigCode();
DecoderFamily GptNeoX();
DecoderFamily Mixtral();
DecoderFamily Qwen2Moe();
DecoderFamily Qwen3Moe();
DecoderFamily Llama();
DecoderFamily LlamaLm();
DecoderFamily Mistral();
DecoderFamily MistralLm();
DecoderFamily Qwen2();
DecoderFamily Qwen2Lm();

// Layouts a family shares with those derived from it.
Status GlmLayers(const ConfigReader& r, const json& config, Recipe& c);     // glm.cc: glm4
Status CohereLayers(const ConfigReader& r, const json& config, Recipe& c);  // cohere.cc: cohere2
Status GptjLayers(const ConfigReader& r, const json& config, Recipe& c);    // gptj.cc: codegen
void ScaleRotaryDim(const json& real, const Recipe& rc, json& t);           // gptj.cc: codegen
void GptLayers(Recipe& c);  // gpt2.cc: gpt_bigcode
void ScaleExperts(const Recipe& rc, const std::string& experts_field,
                  json& t);  // mixtral.cc: qwen2_moe

}  // namespace ts::zoo::internal::decoder
