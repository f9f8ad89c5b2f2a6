// lfm2 (modular_lfm2.py): LlamaModel's embeddings and rotary with LFM2's hybrid layers. Each
// layer is `full_attention` (Lfm2Attention: bias-free q / k / v, per-head RMSNorm q_layernorm /
// k_layernorm before the rotary, `out_proj`) or `conv` (Lfm2ShortConv, Recipe::conv_layers:
// `conv.in_proj` into B, C, x, C * the causal depthwise `conv.conv` of B * x, `conv.out_proj`,
// padded positions zeroed first), by layer_types, else full_attn_idxs, else every layer
// attends. Pre-norm blocks with `operator_norm` / `ffn_norm`, the SwiGLU `feed_forward.w1 / w3 /
// w2` whose width block_auto_adjust_ff_dim adjusts (2/3 of intermediate_size, times
// block_ffn_dim_multiplier, rounded up to block_multiple_of), and the final `embedding_norm`.
// Lfm2Config's original keys (theta, block_ff_dim, tie_embedding) are read as its __init__ does.
// The tiny model keeps one layer of each kind the real one has, in the real order of first
// appearance, and block_multiple_of 8.
#include <algorithm>
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

// Conv layers by layer_types, else by full_attn_idxs (the others are conv), else none.
Status ReadLfm2Layers(const ConfigReader& r, const json& config, Recipe& c) {
  c.conv_layers.assign(static_cast<size_t>(c.layers), false);
  if (r.Has("layer_types")) {
    const json& t = config["layer_types"];
    if (!t.is_array() || static_cast<int64_t>(t.size()) != c.layers)
      return r.Error("layer_types", "expected a list of num_hidden_layers strings");
    for (size_t i = 0; i < t.size(); ++i) {
      const std::string kind = t[i].is_string() ? t[i].get<std::string>() : "";
      if (kind != "conv" && kind != "full_attention")
        return r.Error("layer_types", "expected 'conv' or 'full_attention', got " + t[i].dump());
      c.conv_layers[i] = kind == "conv";
    }
    return OkStatus();
  }
  if (!r.Has("full_attn_idxs")) return OkStatus();
  const json& idx = config["full_attn_idxs"];
  if (!idx.is_array()) return r.Error("full_attn_idxs", "expected a list of layer indices");
  c.conv_layers.assign(static_cast<size_t>(c.layers), true);
  for (const json& i : idx) {
    if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= c.layers)
      return r.Error("full_attn_idxs", "expected indices below num_hidden_layers");
    c.conv_layers[static_cast<size_t>(i.get<int64_t>())] = false;
  }
  return OkStatus();
}

// Lfm2MLP's width.
Status ReadLfm2Width(const ConfigReader& r, Recipe& c) {
  TS_ASSIGN_OR_RETURN(bool adjust, r.Bool("block_auto_adjust_ff_dim", true));
  if (!adjust) return OkStatus();
  c.inter = static_cast<int64_t>(2.0 * static_cast<double>(c.inter) / 3.0);
  if (r.IsNull("block_ffn_dim_multiplier")) return OkStatus();
  TS_ASSIGN_OR_RETURN(double mult, r.Double("block_ffn_dim_multiplier", 1.0));
  TS_ASSIGN_OR_RETURN(int64_t multiple, r.Int("block_multiple_of", 256));
  TS_RETURN_IF_ERROR(Positive(r, "block_multiple_of", multiple));
  if (!(mult > 0)) return r.Error("block_ffn_dim_multiplier", "must be positive");
  c.inter = static_cast<int64_t>(mult * static_cast<double>(c.inter));
  c.inter = multiple * ((c.inter + multiple - 1) / multiple);
  return Positive(r, "intermediate_size", c.inter);
}

}  // namespace

DecoderFamily Lfm2() {
  Names n;
  n.ln1 = "operator_norm";
  n.ln2 = "ffn_norm";
  n.o = "out_proj";
  n.qn = "q_layernorm";
  n.kn = "k_layernorm";
  n.mlp = "feed_forward.";
  n.gate = "w1";
  n.up = "w3";
  n.down = "w2";
  n.final_norm = "embedding_norm";
  return {
      .model_type = "lfm2",
      .fields = {.act = "", .eps = "norm_eps"},
      .defaults = {.max_pos = 128000, .eps = 1e-5, .tie = true, .theta = 1000000.0, .kv = 8},
      .names = n,
      .llama_biases = false,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        c.qk_norm = QkNorm::kPerHeadRms;
        TS_RETURN_IF_ERROR(ReadLfm2Width(r, c));
        TS_RETURN_IF_ERROR(ReadLfm2Layers(r, config, c));
        TS_ASSIGN_OR_RETURN(c.conv_kernel, r.Int("conv_L_cache", 3));
        TS_RETURN_IF_ERROR(Positive(r, "conv_L_cache", c.conv_kernel));
        TS_ASSIGN_OR_RETURN(c.conv_bias, r.Bool("conv_bias", false));
        return OkStatus();
      },
      .scale_extra =
          [](const json&, const Recipe& rc, json& t) {
            std::vector<bool> kinds;  // conv or not, in order of first appearance
            for (bool conv : rc.conv_layers)
              if (std::find(kinds.begin(), kinds.end(), conv) == kinds.end()) kinds.push_back(conv);
            if (kinds.empty()) kinds.push_back(false);
            json types = json::array();
            for (bool conv : kinds) types.push_back(conv ? "conv" : "full_attention");
            t["num_hidden_layers"] = static_cast<int64_t>(kinds.size());
            t["layer_types"] = types;
            t.erase("full_attn_idxs");
            t["block_multiple_of"] = 8;
          },
      .aliases = {{"theta", "rope_theta"},
                  {"block_ff_dim", "intermediate_size"},
                  {"tie_embedding", "tie_word_embeddings"}},
      .classes = {"Lfm2ForCausalLM", "", "", "", "Lfm2Model"},
      // modelled on LiquidAI/LFM2-1.2B
      .example = R"({"model_type":"lfm2","hidden_size":2048,"intermediate_size":12288,
         "num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":16,
         "vocab_size":65536,"max_position_embeddings":128000,"norm_eps":1e-5,
         "rope_theta":1000000.0,"conv_bias":false,"conv_L_cache":3,"block_multiple_of":256,
         "block_ffn_dim_multiplier":1.0,"block_auto_adjust_ff_dim":true,
         "layer_types":["conv","conv","full_attention","conv","conv","full_attention","conv",
           "conv","full_attention","conv","full_attention","conv","full_attention","conv",
           "full_attention","conv"],
         "tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":1,"eos_token_id":7,
         "initializer_range":0.02})",
  };
}

TS_ZOO_DECODER_FAMILY(Lfm2);

}  // namespace ts::zoo::internal::decoder
