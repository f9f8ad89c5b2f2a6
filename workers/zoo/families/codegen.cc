// codegen: gptj with `qkv_proj` in mp_num = 4 blocks of [q, v, k].
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily CodeGen() {
  DecoderFamily f = Gptj();
  f.model_type = "codegen";
  f.names.qkv = "qkv_proj";
  f.parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
    TS_RETURN_IF_ERROR(GptjLayers(r, config, c));
    c.qkv = Qkv::kCodeGen;
    if (c.heads % 4 != 0) return r.Error("n_head", "must be a multiple of mp_num = 4");
    return OkStatus();
  };
  f.classes = {"CodeGenForCausalLM", "", "", "", "CodeGenModel"};
  // Salesforce/codegen-350M-mono
  f.example = R"({"n_embd":1024,"n_head":16,"n_layer":20,"n_positions":2048,"n_ctx":2048,"rotary_dim":32,
         "n_inner":null,"activation_function":"gelu_new","vocab_size":51200,"layer_norm_epsilon":1e-5,
         "tie_word_embeddings":false,"bos_token_id":1,"eos_token_id":50256})";
  return f;
}

TS_ZOO_DECODER_FAMILY(CodeGen);

}  // namespace ts::zoo::internal::decoder
