// vaultgemma (modular_vaultgemma.py): gemma2 (families/gemma2.cc) without its two post-norms:
// pre-norm blocks with input_layernorm and pre_feedforward_layernorm, Gemma (1 + w) RMSNorm,
// sqrt(hidden) embedding scale, query_pre_attn_scalar, attention (50) and final (30) logit
// soft-capping, hidden_activation; sliding layers by layer_types, else alternating (layer 0
// slides), window 4096.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily VaultGemma() {
  DecoderFamily f = Gemma2();
  f.model_type = "vaultgemma";
  f.names.post1 = "";
  f.names.post2 = "";
  f.parse = [gemma2 = f.parse](const ConfigReader& r, const json& config, Recipe& c) -> Status {
    TS_RETURN_IF_ERROR(gemma2(r, config, c));
    c.block = Block::kPre;
    c.sandwich_post_first = false;
    return OkStatus();
  };
  // VaultGemmaConfig.layer_types, when given, decides which layers slide (gemma2's alternating
  // windows otherwise).
  f.parse_layers = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
    if (!r.Has("layer_types") || !c.window_size) return OkStatus();
    TS_ASSIGN_OR_RETURN(std::vector<bool> sl, SlidingLayers(config, c.layers, true));
    for (int64_t i = 0; i < c.layers; ++i) {
      const size_t u = static_cast<size_t>(i);
      c.window[u] = sl[u] ? c.window_size : std::nullopt;
    }
    return OkStatus();
  };
  f.scale_extra = [gemma2 = f.scale_extra](const json& real, const Recipe& rc, json& t) {
    gemma2(real, rc, t);
    if (!real.contains("layer_types")) return;
    std::vector<bool> sl;
    for (const auto& w : rc.window) sl.push_back(w.has_value());
    t["layer_types"] = LayerTypes(TinyPattern(sl, rc));
  };
  f.classes = {"VaultGemmaForCausalLM", "", "", "", "VaultGemmaModel"};
  // modelled on google/vaultgemma-1b (26 layers, width 1152, 1024-token context)
  f.example = R"({"model_type":"vaultgemma","hidden_size":1152,"intermediate_size":6912,
       "num_attention_heads":4,"num_key_value_heads":4,"head_dim":256,"num_hidden_layers":26,
       "vocab_size":256000,"max_position_embeddings":1024,"rms_norm_eps":1e-6,
       "rope_theta":10000.0,"hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":256,
       "sliding_window":512,"attn_logit_softcapping":50.0,"final_logit_softcapping":30.0,
       "attention_bias":false,"tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":2,
       "eos_token_id":1})";
  return f;
}

TS_ZOO_DECODER_FAMILY(VaultGemma);

}  // namespace ts::zoo::internal::decoder
