// gptj: parallel block over `ln_1`, partial interleaved rotary on `rotary_dim`, `lm_head` bias.
#include <algorithm>
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

// GPT-J's block (shared by codegen): parallel attention and MLP over one LayerNorm, interleaved
// rotary on rotary_dim with a fixed base, biased MLP and lm_head.
Status GptjLayers(const ConfigReader& r, const json&, Recipe& c) {
  TS_RETURN_IF_ERROR(ReadRotaryDim(r, c));
  c.rope = RopeConfig();  // fixed base 10000 (create_sinusoidal_positions)
  c.rope.max_position_embeddings = c.max_pos;
  c.norm = Norm::kLayerNorm;
  c.block = Block::kParallel1;
  c.interleaved = true;
  c.mlp = Mlp::kPlain;
  c.mlp_bias = c.lm_head_bias = true;
  c.embed_padding_idx = false;
  return OkStatus();
}

void ScaleRotaryDim(const json& real, const Recipe& rc, json& t) {
  t["n_ctx"] = t["n_positions"];
  if (!real.contains("rotary_dim") || real["rotary_dim"].is_null()) return;
  const int64_t hd = t["n_embd"].get<int64_t>() / t["n_head"].get<int64_t>();
  const double frac = static_cast<double>(rc.rotary_dim) / static_cast<double>(rc.head_dim);
  t["rotary_dim"] = std::max<int64_t>(2, std::lround(frac * static_cast<double>(hd)) / 2 * 2);
}

DecoderFamily Gptj() {
  return {
      .model_type = "gptj",
      .fields = Gpt2Fields(),
      .defaults = {.inter_mult = 4, .act = "gelu_new", .eps = 1e-5},
      .names = {.head_base = "transformer.",
                .embed = "wte",
                .layers = "h.",
                .ln1 = "ln_1",
                .attn = "attn.",
                .o = "out_proj",
                .up = "fc_in",
                .down = "fc_out",
                .final_norm = "ln_f"},
      .llama_biases = false,
      .reads_rope = false,
      .parse = GptjLayers,
      .scale_extra = ScaleRotaryDim,
      .classes = {"GPTJForCausalLM",
                  "GPTJForSequenceClassification",
                  "",
                  "GPTJForQuestionAnswering",
                  "GPTJModel"},
      // EleutherAI/gpt-j-6b
      .example = R"({"n_embd":4096,"n_head":16,"n_layer":28,"n_positions":2048,"rotary_dim":64,"n_inner":null,
         "activation_function":"gelu_new","vocab_size":50400,"layer_norm_epsilon":1e-5,
         "tie_word_embeddings":false,"bos_token_id":50256,"eos_token_id":50256})",
  };
}

TS_ZOO_DECODER_FAMILY(Gptj);

}  // namespace ts::zoo::internal::decoder
