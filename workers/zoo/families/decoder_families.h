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

DecoderFamily Helium();
DecoderFamily Ministral();
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
