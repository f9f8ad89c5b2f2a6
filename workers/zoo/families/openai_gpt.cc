// openai-gpt (modeling_openai.py): GPT-2's Conv1D weights and fused biased c_attn, learned
// positions at arange(S) (tokens_embed, positions_embed), but post-LN blocks
// (n = ln_1(x + a); h = ln_2(n + m)) and no final norm; the MLP is 4 * n_embd wide (no n_inner
// field) with ACT_FNS[afn]: "gelu" is gelu_new, "relu", "silu" / "swish"; any other name is
// refused naming afn (transformers raises a KeyError). LM head tied, no bias; score no bias.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

// GPT-2's module names (gpt2.cc) but for the embeddings and the missing final norm.
Names OpenAiGptNames() {
  Names n = Gpt2Names();
  n.embed = "tokens_embed";
  n.pos = "positions_embed";
  n.final_norm = "";
  return n;
}

}  // namespace

DecoderFamily OpenAiGpt() {
  return {
      .model_type = "openai-gpt",
      .fields = {.hidden = "n_embd",
                 .inter = "",
                 .layers = "n_layer",
                 .heads = "n_head",
                 .kv = "",
                 .max_pos = "n_positions",
                 .act = "",
                 .eps = "layer_norm_epsilon"},
      .defaults = {.inter_mult = 4, .max_pos = 512, .eps = 1e-5, .tie = true},
      .names = OpenAiGptNames(),
      .llama_biases = false,
      .reads_rope = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        GptLayers(c);
        c.conv1d = true;
        c.qkv = Qkv::kFused;
        c.block = Block::kPostLn;
        TS_ASSIGN_OR_RETURN(std::string afn, r.String("afn", "gelu"));
        if (afn == "gelu") {
          c.act.a = Activation::kGeluTanh;  // ACT_FNS["gelu"] is gelu_new
        } else if (afn == "relu") {
          c.act.a = Activation::kRelu;
        } else if (afn == "silu" || afn == "swish") {
          c.act.a = Activation::kSilu;
        } else {
          return r.Error("afn", "'" + afn +
                                    "' is not one of OpenAI GPT's ACT_FNS (gelu, relu, "
                                    "silu, swish)");
        }
        return OkStatus();
      },
      .classes = {"OpenAIGPTLMHeadModel", "OpenAIGPTForSequenceClassification", "", "",
                  "OpenAIGPTModel"},
      // openai-community/openai-gpt
      .example = R"({"model_type":"openai-gpt","afn":"gelu","n_embd":768,"n_head":12,
           "n_layer":12,"n_positions":512,"vocab_size":40478,"layer_norm_epsilon":1e-5,
           "initializer_range":0.02,"attn_pdrop":0.1,"embd_pdrop":0.1,"resid_pdrop":0.1,
           "predict_special_tokens":true})",
  };
}

TS_ZOO_DECODER_FAMILY(OpenAiGpt);

}  // namespace ts::zoo::internal::decoder
