// falcon: fused qkv `view(kv, heads/kv + 2, hd)` (MQA, GQA in `new_decoder_architecture`), parallel
// attention with one or two norms, rotary or ALiBi.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

namespace {

Status FalconLayers(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(bool new_arch, r.Bool("new_decoder_architecture", false));
  TS_ASSIGN_OR_RETURN(bool mq, r.Bool("multi_query", true));
  TS_ASSIGN_OR_RETURN(bool parallel, r.Bool("parallel_attn", true));
  TS_ASSIGN_OR_RETURN(bool alibi, r.Bool("alibi", false));
  TS_ASSIGN_OR_RETURN(bool bias, r.Bool("bias", false));
  TS_RETURN_IF_ERROR(RejectPostLnResidual(r));
  if (!new_arch) c.kv = mq ? 1 : c.heads;
  c.qkv = new_arch || mq ? Qkv::kGrouped : Qkv::kPerHead;
  c.norm = Norm::kLayerNorm;
  c.mlp = Mlp::kPlain;
  c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = bias;
  c.embed_padding_idx = false;
  if (alibi) {
    c.pos = Pos::kNone;
    c.alibi = Alibi::kFalcon;
  }
  if (!parallel) {
    c.block = Block::kPre;
  } else if (new_arch) {
    TS_ASSIGN_OR_RETURN(int64_t lns, r.Int("num_ln_in_parallel_attn", 2));
    if (lns == 2) {
      c.block = Block::kParallel2;
      c.n.ln1 = "ln_attn";
      c.n.ln2 = "ln_mlp";
    } else {
      c.block = Block::kParallel1;
    }
  } else {
    c.block = Block::kParallel1;
  }
  return OkStatus();
}

}  // namespace

DecoderFamily Falcon() {
  return {
      .model_type = "falcon",
      .fields = {.inter = "ffn_hidden_size",
                 .kv = "num_kv_heads",
                 .act = "activation",
                 .eps = "layer_norm_epsilon"},
      .defaults = {.inter_mult = 4, .act = "gelu", .eps = 1e-5, .tie = true},
      .names = BloomNames(/*emb_ln=*/false),
      .llama_biases = false,
      .parse = FalconLayers,
      .aliases = {{"n_head", "num_attention_heads"}, {"n_layer", "num_hidden_layers"}},
      .classes = {"FalconForCausalLM",
                  "FalconForSequenceClassification",
                  "FalconForTokenClassification",
                  "FalconForQuestionAnswering",
                  "FalconModel"},
      // tiiuae/falcon-7b (multi-query, parallel attention, rotary)
      .example = R"({"hidden_size":4544,"num_attention_heads":71,"num_hidden_layers":32,"vocab_size":65024,
         "layer_norm_epsilon":1e-5,"multi_query":true,"parallel_attn":true,"new_decoder_architecture":false,
         "alibi":false,"bias":false,"apply_residual_connection_post_layernorm":false,"bos_token_id":11,
         "eos_token_id":11})",
  };
}

TS_ZOO_DECODER_FAMILY(Falcon);

}  // namespace ts::zoo::internal::decoder
