// gpt_neo: learned positions, unscaled attention scores, `attention_types` global/local with
// `window_size`.
#include <algorithm>
#include <string>
#include <vector>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

namespace {

// attention_types: [[["global", "local"], 12]] -> per-layer kinds (default alternating).
StatusOr<std::vector<bool>> LocalLayers(const ConfigReader& r, const json& config, int64_t n) {
  std::vector<bool> local;
  if (!r.Has("attention_types")) {
    for (int64_t i = 0; i < n; ++i) local.push_back(i % 2 == 1);
    return local;
  }
  for (const auto& item : config["attention_types"]) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_array() ||
        !item[1].is_number_integer()) {
      return r.Error("attention_types", "expected [[kinds, repeat], ...]");
    }
    for (int64_t k = 0; k < item[1].get<int64_t>(); ++k) {
      for (const auto& kind : item[0]) {
        if (!kind.is_string() || (kind != "global" && kind != "local")) {
          return r.Error("attention_types", "kinds must be 'global' or 'local'");
        }
        local.push_back(kind == "local");
      }
    }
  }
  return local;
}

Status GptNeoLayers(const ConfigReader& r, const json& config, Recipe& c) {
  c.norm = Norm::kLayerNorm;
  c.pos = Pos::kLearned;
  c.attn_scale = 1.0;  // GPT-Neo does not scale attention scores
  c.o_bias = c.mlp_bias = true;
  c.mlp = Mlp::kPlain;
  c.embed_padding_idx = false;
  TS_ASSIGN_OR_RETURN(int64_t window, r.Int("window_size", 256));
  TS_RETURN_IF_ERROR(Positive(r, "window_size", window));
  TS_ASSIGN_OR_RETURN(std::vector<bool> local, LocalLayers(r, config, c.layers));
  if (static_cast<int64_t>(local.size()) != c.layers) {
    return r.Error("attention_types", "expands to " + std::to_string(local.size()) +
                                          " layers, num_layers is " + std::to_string(c.layers));
  }
  for (int64_t i = 0; i < c.layers; ++i)
    if (local[static_cast<size_t>(i)]) c.window[static_cast<size_t>(i)] = window;
  return OkStatus();
}

}  // namespace

// GPT-2's names with attn.attention.{q,k,v,out}_proj.
Names GptNeoNames() {
  Names n = Gpt2Names();
  n.attn = "attn.attention.";
  n.qkv = "";
  n.o = "out_proj";
  return n;
}

DecoderFamily GptNeo() {
  return {
      .model_type = "gpt_neo",
      .fields = {.layers = "num_layers",
                 .heads = "num_heads",
                 .kv = "",
                 .act = "activation_function",
                 .eps = "layer_norm_epsilon"},
      .defaults = {.inter_mult = 4, .act = "gelu_new", .eps = 1e-5, .tie = true},
      .names = GptNeoNames(),
      .llama_biases = false,
      .reads_rope = false,
      .parse = GptNeoLayers,
      .scale_extra = [](const json& real, const Recipe& rc, json& t) {
        std::vector<bool> local;
        for (const auto& w : rc.window) local.push_back(w.has_value());
        json kinds = json::array();
        for (bool l : TinyPattern(local, rc)) kinds.push_back(l ? "local" : "global");
        t["attention_types"] = json::array({json::array({kinds, 1})});
        t["window_size"] =
            std::min<int64_t>(real.value("window_size", int64_t{256}), TinyProfile::kWindow);
      },
      .classes = {"GPTNeoForCausalLM",
                  "GPTNeoForSequenceClassification",
                  "GPTNeoForTokenClassification",
                  "GPTNeoForQuestionAnswering",
                  "GPTNeoModel"},
      // EleutherAI/gpt-neo-125m
      .example = R"({"hidden_size":768,"num_heads":12,"num_layers":12,"attention_types":[[["global","local"],6]],
         "window_size":256,"max_position_embeddings":2048,"vocab_size":50257,"intermediate_size":null,
         "activation_function":"gelu_new","layer_norm_epsilon":1e-5,"bos_token_id":50256,
         "eos_token_id":50256})",
  };
}

TS_ZOO_DECODER_FAMILY(GptNeo);

}  // namespace ts::zoo::internal::decoder
