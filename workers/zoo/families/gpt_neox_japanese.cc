// gpt_neox_japanese (modeling_gpt_neox_japanese.py): GPT-NeoX's per-head fused `query_key_value`
// (view [B, S, heads, 3 * head], q / k / v narrowed) with PaLM-style bias-free projections, the
// partial rotary (rotary_pct of the head, base rotary_emb_base), sequential pre-LN blocks
// (GPTNeoXJapaneseLayer: x + dense(attn(ln1(x))) [+ dense_bias], then + mlp(ln2(.))), a plain
// bias-free MLP of int(hidden * intermediate_multiple_size), LayerNorms, `final_layer_norm`.
// Only the last layer's attention has a bias, the parameter `attention.dense_bias`
// (Recipe::o_bias_last_layer). GPTNeoXJapaneseForCausalLM's `embed_out`, tied to `embed_in` as
// PretrainedConfig's tie_word_embeddings (true) leaves it. The tiny model keeps two layers, so
// that a bias on every layer, or on none, shows.
#include <algorithm>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily GptNeoXJapanese() {
  return {
      .model_type = "gpt_neox_japanese",
      .fields = {.inter = "", .kv = "", .eps = "layer_norm_eps"},
      .defaults = {.inter_mult = 4,
                   .act = "gelu",
                   .eps = 1e-5,
                   .tie = true,
                   .inter_mult_field = "intermediate_multiple_size"},
      .names = {.head_base = "gpt_neox_japanese.",
                .embed = "embed_in",
                .attn = "attention.",
                .qkv = "query_key_value",
                .o = "dense",
                .up = "dense_h_to_4h",
                .down = "dense_4h_to_h",
                .final_norm = "final_layer_norm",
                .lm_head = "embed_out"},
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(ReadPartial(r, "rotary_pct", 1.0, c));
        c.norm = Norm::kLayerNorm;
        c.qkv = Qkv::kPerHeadNarrow;
        c.mlp = Mlp::kPlain;
        c.o_bias_last_layer = true;
        return OkStatus();
      },
      .scale_extra =
          [](const json& real, const Recipe&, json& t) {
            t["num_hidden_layers"] =
                std::min<int64_t>(real.value("num_hidden_layers", int64_t{2}), 2);
          },
      .aliases = {{"rotary_emb_base", "rope_theta"}},
      .classes = {"GPTNeoXJapaneseForCausalLM", "", "", "", "GPTNeoXJapaneseModel"},
      // abeja/gpt-neox-japanese-2.7b
      .example = R"({"model_type":"gpt_neox_japanese","hidden_size":2560,
         "num_attention_heads":32,"num_hidden_layers":32,"vocab_size":32000,
         "intermediate_multiple_size":4,"hidden_act":"gelu","rotary_pct":1.0,
         "rotary_emb_base":10000,"max_position_embeddings":2048,"layer_norm_eps":1e-5,
         "initializer_range":0.02,"bos_token_id":31996,"eos_token_id":31999})",
  };
}

TS_ZOO_DECODER_FAMILY(GptNeoXJapanese);

}  // namespace ts::zoo::internal::decoder
