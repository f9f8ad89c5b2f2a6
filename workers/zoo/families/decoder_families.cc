// The table of decoder families (decoder_families.h).
#include "workers/zoo/families/decoder_families.h"

namespace ts::zoo::internal::decoder {

const std::vector<DecoderFamily>& DecoderFamilies() {
  static const std::vector<DecoderFamily> kFamilies = {
      Helium(),
      Ministral(),
      Ministral3(),
      Arcee(),
      SeedOss(),
      SmolLm3(),
      Glm(),
      Glm4(),
      Ernie45(),
      Granite(),
      Olmo(),
      Nemotron(),
      Exaone4(),
      Gemma3Text(),
      Cohere(),
      Cohere2(),
      Persimmon(),
      Gptj(),
      CodeGen(),
      Falcon(),
      Bloom(),
      Mpt(),
      Opt(),
      GptNeo(),
      Xglm(),
      BioGpt(),
      Gemma(),
      Gemma2(),
      Qwen3(),
      Olmo2(),
      Phi(),
      Phi3(),
      StableLm(),
      Starcoder2(),
      Gpt2(),
      GptBigCode(),
      GptNeoX(),
      Mixtral(),
      Qwen2Moe(),
      Qwen3Moe(),
      Llama(),
      LlamaLm(),
      Mistral(),
      MistralLm(),
      Qwen2(),
      Qwen2Lm(),
  };
  return kFamilies;
}

}  // namespace ts::zoo::internal::decoder
