// ctrl (modeling_ctrl.py): token embeddings (`w`) * sqrt(n_embd) plus the positional_encoding
// table ([sin | cos] halves at p / 10000^(2j/d), computed, not in the state_dict); pre-LN
// layers with LayerNorm eps 1e-6 hard-coded (layernorm1, layernorm2), biased Wq / Wk / Wv /
// dense, ffn.0 / relu / ffn.2; the final `layernorm` at layer_norm_epsilon. The LM head is tied
// to `w` with its own bias; the classifier has none and pools the last non-pad token.
#include <cmath>

#include "workers/zoo/families/decoder_families.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Ctrl() {
  return {
      .model_type = "ctrl",
      .fields = {.hidden = "n_embd",
                 .inter = "dff",
                 .layers = "n_layer",
                 .heads = "n_head",
                 .kv = "",
                 .max_pos = "n_positions",
                 .act = "",
                 .eps = "layer_norm_epsilon"},
      .defaults = {.max_pos = 256, .act = "relu", .eps = 1e-6, .tie = true},
      .names = {.head_base = "transformer.",
                .embed = "w",
                .layers = "h.",
                .ln1 = "layernorm1",
                .ln2 = "layernorm2",
                .attn = "multi_head_attention.",
                .q = "Wq",
                .k = "Wk",
                .v = "Wv",
                .o = "dense",
                .mlp = "ffn.",
                .up = "0",
                .down = "2",
                .final_norm = "layernorm",
                .seq_cls = "classifier"},
      .llama_biases = false,
      .reads_rope = false,
      .parse = [](const ConfigReader&, const json&, Recipe& c) -> Status {
        c.pos = Pos::kSinusoidHalves;
        c.norm = Norm::kLayerNorm;
        c.mlp = Mlp::kPlain;
        c.act.a = Activation::kRelu;
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = true;
        c.lm_head_bias = true;
        c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
        c.final_eps = c.eps;  // the final layernorm's, from the config
        c.eps = 1e-6;         // EncoderLayer's layernorm1 / layernorm2
        if (c.hidden % 2 != 0)
          return InvalidArgumentError("n_embd: must be even (got " + std::to_string(c.hidden) +
                                      ")");
        return OkStatus();
      },
      .classes = {"CTRLLMHeadModel", "CTRLForSequenceClassification", "", "", "CTRLModel"},
      // Salesforce/ctrl
      .example = R"({"model_type":"ctrl","n_embd":1280,"dff":8192,"n_head":16,"n_layer":48,
           "n_positions":50000,"n_ctx":512,"vocab_size":246534,"layer_norm_epsilon":1e-6,
           "initializer_range":0.02,"embd_pdrop":0.1,"resid_pdrop":0.1,"attn_pdrop":0.1})",
  };
}

}  // namespace ts::zoo::internal::decoder
