// ctrl (modeling_ctrl.py): CTRLModel `transformer.`: the token table `w` scaled by sqrt(n_embd)
// plus positional_encoding (sines of the even dims, cosines of the odd ones; not a weight),
// pre-LN EncoderLayers `h.N` (layernorm1 / layernorm2, MultiHeadAttention Wq / Wk / Wv / dense
// with biases, causal, ffn.0 / ReLU / ffn.2 with biases), the final `layernorm`. CTRLLMHeadModel's
// lm_head is tied to `w` and has a bias; CTRLForSequenceClassification's `classifier` has none.
// The layers' norms use eps 1e-6 whatever layer_norm_epsilon (the final norm's) says: a config
// with another value is refused naming the field.
#include <cmath>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

DecoderFamily Ctrl() {
  Names n;
  n.head_base = "transformer.";
  n.embed = "w";
  n.layers = "h.";
  n.ln1 = "layernorm1";
  n.ln2 = "layernorm2";
  n.attn = "multi_head_attention.";
  n.q = "Wq";
  n.k = "Wk";
  n.v = "Wv";
  n.o = "dense";
  n.mlp = "ffn.";
  n.up = "0";
  n.down = "2";
  n.final_norm = "layernorm";
  n.seq_cls = "classifier";
  return {
      .model_type = "ctrl",
      .fields = {.vocab = "vocab_size",
                 .hidden = "n_embd",
                 .inter = "dff",
                 .layers = "n_layer",
                 .heads = "n_head",
                 .kv = "",
                 .max_pos = "n_positions",
                 .act = "activation_function",  // not a CTRLConfig field: ReLU
                 .eps = "layer_norm_epsilon"},
      .defaults = {.max_pos = 256, .act = "relu", .eps = 1e-6, .tie = true},
      .names = n,
      .llama_biases = false,
      .reads_rope = false,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        if (c.eps != 1e-6) {
          return r.Error("layer_norm_epsilon",
                         "only 1e-6 is supported by the zoo (EncoderLayer's norms fix it)");
        }
        if (c.hidden % 2 != 0) return r.Error("n_embd", "must be even");
        c.act = Act{.a = Activation::kRelu};
        c.norm = Norm::kLayerNorm;
        c.pos = Pos::kSinusoidal;
        c.sinusoid_halves = true;
        c.mlp = Mlp::kPlain;
        c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = true;
        c.lm_head_bias = true;
        c.seq_cls_bias = false;
        c.embed_padding_idx = false;
        c.embed_scale = std::sqrt(static_cast<double>(c.hidden));
        return OkStatus();
      },
      .classes = {"CTRLLMHeadModel", "CTRLForSequenceClassification", "", "", "CTRLModel"},
      // Salesforce/ctrl
      .example = R"({"vocab_size":246534,"n_positions":256,"n_embd":1280,"dff":8192,"n_layer":48,
         "n_head":16,"resid_pdrop":0.1,"embd_pdrop":0.1,"layer_norm_epsilon":1e-6,
         "initializer_range":0.02,"use_cache":true})",
  };
}

TS_ZOO_DECODER_FAMILY(Ctrl);

}  // namespace ts::zoo::internal::decoder
