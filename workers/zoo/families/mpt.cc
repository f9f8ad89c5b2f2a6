// mpt: ALiBi (`alibi_bias_max`), bias-free LayerNorm and projections, `clip_qkv`, `softmax_scale`.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

namespace {

Status MptLayers(const ConfigReader& r, const json& config, Recipe& c) {
  TS_ASSIGN_OR_RETURN(bool no_bias, r.Bool("no_bias", true));
  if (!no_bias) return r.Error("no_bias", "false is not supported by the zoo");
  json ac = config.contains("attn_config") && config["attn_config"].is_object()
                ? config["attn_config"]
                : json::object();
  ConfigReader a(ac, "attn_config.");
  TS_ASSIGN_OR_RETURN(bool alibi, a.Bool("alibi", true));
  if (!alibi) return a.Error("alibi", "false is not supported by the zoo");
  TS_ASSIGN_OR_RETURN(c.alibi_bias_max, a.Double("alibi_bias_max", 8.0));
  TS_ASSIGN_OR_RETURN(bool qk_ln, a.Bool("qk_ln", false));
  if (qk_ln) return a.Error("qk_ln", "true is not supported by the zoo");
  if (a.Has("clip_qkv")) {
    TS_ASSIGN_OR_RETURN(c.clip_qkv, a.Double("clip_qkv"));
    if (!(c.clip_qkv > 0)) return a.Error("clip_qkv", "must be positive");
  }
  if (a.Has("softmax_scale")) {
    TS_ASSIGN_OR_RETURN(c.attn_scale, a.Double("softmax_scale"));
    if (!(c.attn_scale > 0)) return a.Error("softmax_scale", "must be positive");
  }
  c.norm = Norm::kLayerNormNoBias;
  c.pos = Pos::kNone;
  c.alibi = Alibi::kMpt;
  c.qkv = Qkv::kFused;
  c.mlp = Mlp::kPlain;
  c.embed_padding_idx = false;
  return OkStatus();
}

}  // namespace

DecoderFamily Mpt() {
  return {
      .model_type = "mpt",
      .fields = {.hidden = "d_model",
                 .inter = "",
                 .layers = "n_layers",
                 .heads = "n_heads",
                 .kv = "",
                 .max_pos = "max_seq_len",
                 .act = "",
                 .eps = "layer_norm_epsilon"},
      .defaults = {.inter_mult = 4,
                   .act = "gelu",
                   .eps = 1e-5,
                   .tie = true,
                   .inter_mult_field = "expansion_ratio"},
      .names = {.head_base = "transformer.",
                .embed = "wte",
                .layers = "blocks.",
                .ln1 = "norm_1",
                .ln2 = "norm_2",
                .attn = "attn.",
                .qkv = "Wqkv",
                .o = "out_proj",
                .mlp = "ffn.",
                .final_norm = "norm_f",
                .token_cls = "classifier"},
      .llama_biases = false,
      .reads_rope = false,
      .parse = MptLayers,
      .classes = {"MptForCausalLM",
                  "MptForSequenceClassification",
                  "MptForTokenClassification",
                  "MptForQuestionAnswering",
                  "MptModel"},
      // mosaicml/mpt-7b
      .example = R"({"d_model":4096,"n_heads":32,"n_layers":32,"expansion_ratio":4,"max_seq_len":2048,"vocab_size":50432,
         "layer_norm_epsilon":1e-5,"no_bias":true,"norm_type":"low_precision_layernorm",
         "attn_config":{"alibi":true,"alibi_bias_max":8,"attn_type":"multihead_attention","clip_qkv":null,
           "qk_ln":false,"softmax_scale":null},
         "tie_word_embeddings":true,"eos_token_id":0})",
  };
}

TS_ZOO_DECODER_FAMILY(Mpt);

}  // namespace ts::zoo::internal::decoder
