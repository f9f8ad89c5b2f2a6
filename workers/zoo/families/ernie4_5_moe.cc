// ernie4_5_moe (modular_ernie4_5_moe.py): ernie4_5's attention (interleaved rotary over the whole
// head, rope_theta 5e5; use_bias true is refused) with MoE layers where (i + 1) %
// moe_layer_interval == 0 and moe_layer_start_index <= i <= moe_layer_end_index (-1: the last):
// Ernie4_5_MoeTopKRouter (softmax; + mlp.gate.moe_statics.e_score_correction_bias [1, E] for the
// choice; the unbiased probabilities over max(their sum, moe_norm_min)), fused experts of
// moe_intermediate_size and moe_num_shared_experts ungated shared experts.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
DecoderFamily Ernie45Moe() {
  return {
      .model_type = "ernie4_5_moe",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 131072, .eps = 1e-5, .tie = true},
      .llama_biases = false,
      .classic = true,
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(RotaryWithTheta(r, config, 500000.0, "", 1.0, c));
        c.interleaved = true;
        TS_ASSIGN_OR_RETURN(bool bias, r.Bool("use_bias", false));
        if (bias) return r.Error("use_bias", "true is not supported by the zoo");
        return OkStatus();
      },
      .parse_layers = [](const ConfigReader& r, const json&, Recipe& c) -> Status {
        Moe& m = c.moe;
        m.router = Router::kErnie;
        m.deepseek_shared = true;
        m.score_bias_name = "gate.moe_statics.e_score_correction_bias";
        m.score_bias_row = true;
        TS_ASSIGN_OR_RETURN(m.experts, r.Int("moe_num_experts", 64));
        TS_RETURN_IF_ERROR(Positive(r, "moe_num_experts", m.experts));
        TS_ASSIGN_OR_RETURN(m.top_k, r.Int("moe_k", 6));
        TS_ASSIGN_OR_RETURN(m.inter, r.Int("moe_intermediate_size", 1536));
        TS_RETURN_IF_ERROR(Positive(r, "moe_intermediate_size", m.inter));
        TS_ASSIGN_OR_RETURN(int64_t shared, r.Int("moe_num_shared_experts", 2));
        if (shared < 0) return r.Error("moe_num_shared_experts", "must not be negative");
        m.shared_inter = shared * m.inter;
        TS_ASSIGN_OR_RETURN(m.norm_min, r.Double("moe_norm_min", 1e-12));
        TS_ASSIGN_OR_RETURN(int64_t start, r.Int("moe_layer_start_index", 1));
        TS_ASSIGN_OR_RETURN(int64_t end, r.Int("moe_layer_end_index", -1));
        if (end < 0) end = c.layers - 1;
        TS_ASSIGN_OR_RETURN(int64_t every, r.Int("moe_layer_interval", 1));
        TS_RETURN_IF_ERROR(Positive(r, "moe_layer_interval", every));
        m.sparse.clear();
        bool any_dense = false, any_sparse = false;
        for (int64_t i = 0; i < c.layers; ++i) {
          const bool sparse = (i + 1) % every == 0 && i >= start && i <= end;
          m.sparse.push_back(sparse);
          (sparse ? any_sparse : any_dense) = true;
        }
        m.pattern = any_dense && any_sparse;
        return CheckExperts(r, c);
      },
      .scale_extra =
          [](const json& real, const Recipe& rc, json& t) {
            ScaleExperts(rc, "moe_num_experts", t);
            t["moe_k"] = t["num_experts_per_tok"];
            t.erase("num_experts_per_tok");
            const int64_t hidden = t["hidden_size"].get<int64_t>();
            t["moe_intermediate_size"] = ScaleRatio(rc.moe.inter, rc.hidden, hidden, 8);
            const int64_t layers = t["num_hidden_layers"].get<int64_t>();
            const int64_t start = real.value("moe_layer_start_index", int64_t{1});
            t["moe_layer_start_index"] = std::min<int64_t>(start, layers - 1);
            t["moe_layer_end_index"] = -1;
            t["moe_layer_interval"] = 1;
          },
      .aliases = {{"num_experts", "moe_num_experts"}, {"num_experts_per_tok", "moe_k"}},
      .classes = {"Ernie4_5_MoeForCausalLM", "", "", "", "Ernie4_5_MoeModel"},
      // baidu/ERNIE-4.5-21B-A3B-PT
      .example = R"({"model_type":"ernie4_5_moe","vocab_size":103424,"hidden_size":2560,
           "intermediate_size":12288,"moe_intermediate_size":1536,"num_hidden_layers":28,
           "num_attention_heads":20,"num_key_value_heads":4,"head_dim":128,
           "moe_num_experts":64,"moe_k":6,"moe_num_shared_experts":2,
           "moe_layer_start_index":1,"moe_layer_end_index":27,"moe_layer_interval":1,
           "moe_use_aux_free":true,"hidden_act":"silu","max_position_embeddings":131072,
           "rms_norm_eps":1e-5,"rope_theta":500000,"use_bias":false,
           "tie_word_embeddings":true,"pad_token_id":0,"bos_token_id":1,"eos_token_id":2})",
  };
}

TS_ZOO_DECODER_FAMILY(Ernie45Moe);

}  // namespace ts::zoo::internal::decoder
