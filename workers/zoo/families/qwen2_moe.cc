// qwen2_moe: sparse MoE with a gated shared expert, dense layers by `decoder_sparse_step` /
// `mlp_only_layers`, q/k/v bias, Qwen sliding layers.
#include <algorithm>
#include <vector>

#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {

Status ReadQwenMoe(const ConfigReader& r, const json& config, const QwenMoeDefaults& d,
                   Recipe& c) {
  Moe& m = c.moe;
  TS_ASSIGN_OR_RETURN(m.experts, r.Int("num_experts", d.experts));
  TS_RETURN_IF_ERROR(Positive(r, "num_experts", m.experts));
  TS_ASSIGN_OR_RETURN(m.top_k, r.Int("num_experts_per_tok", d.top_k));
  m.inter = d.inter;
  if (!d.inter_field.empty()) {
    TS_ASSIGN_OR_RETURN(m.inter, r.Int(d.inter_field, d.inter));
    TS_RETURN_IF_ERROR(Positive(r, d.inter_field, m.inter));
  }
  if (d.shared_inter > 0) {
    TS_ASSIGN_OR_RETURN(m.shared_inter, r.Int("shared_expert_intermediate_size", d.shared_inter));
    TS_RETURN_IF_ERROR(Positive(r, "shared_expert_intermediate_size", m.shared_inter));
  }
  TS_ASSIGN_OR_RETURN(m.norm_topk, r.Bool("norm_topk_prob", false));
  TS_ASSIGN_OR_RETURN(int64_t step, r.Int("decoder_sparse_step", 1));
  TS_RETURN_IF_ERROR(Positive(r, "decoder_sparse_step", step));
  std::vector<int64_t> mlp_only;
  if (r.Has("mlp_only_layers")) {
    const json& l = config["mlp_only_layers"];
    if (!l.is_array()) return r.Error("mlp_only_layers", "expected array");
    for (const auto& v : l) {
      if (!v.is_number_integer()) return r.Error("mlp_only_layers", "expected integers");
      mlp_only.push_back(v.get<int64_t>());
    }
  }
  TS_RETURN_IF_ERROR(CheckExperts(r, c));
  for (int64_t i = 0; i < c.layers; ++i) {
    const bool dense = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
    m.sparse.push_back(!dense && (i + 1) % step == 0);
  }
  m.pattern = step > 1 || !mlp_only.empty();
  return OkStatus();
}

void ScaleQwenMoe(const json& real, const Recipe& rc, json& t) {
  ScaleExperts(rc, "num_experts", t);
  const int64_t hidden = t["hidden_size"].get<int64_t>();
  const int64_t layers = t["num_hidden_layers"].get<int64_t>();
  t["moe_intermediate_size"] = ScaleRatio(rc.moe.inter, rc.hidden, hidden, 8);
  if (rc.moe.shared_inter > 0) {
    t["shared_expert_intermediate_size"] = ScaleRatio(rc.moe.shared_inter, rc.hidden, hidden, 8);
  }
  t["decoder_sparse_step"] =
      std::min<int64_t>(real.value("decoder_sparse_step", int64_t{1}), layers);
  json only = json::array();
  if (real.contains("mlp_only_layers") && real["mlp_only_layers"].is_array()) {
    for (const auto& v : real["mlp_only_layers"])
      if (v.get<int64_t>() < layers) only.push_back(v.get<int64_t>());
  }
  t["mlp_only_layers"] = only;
}

DecoderFamily Qwen2Moe() {
  return {
      .model_type = "qwen2_moe",
      .defaults = {.eps = 1e-6},
      .llama_biases = false,
      .classic = true,
      .windows = WindowPattern::kQwen,
      .parse = ReadQwen2Attention,
      .parse_layers = [](const ConfigReader& r, const json& config, Recipe& c) {
        return ReadQwenMoe(r, config, {.experts = 60, .top_k = 4, .inter = 1408,
                                       .shared_inter = 5632}, c);
      },
      .scale_extra = ScaleQwenMoe,
      .classes = {"Qwen2MoeForCausalLM",
                  "Qwen2MoeForSequenceClassification",
                  "Qwen2MoeForTokenClassification",
                  "Qwen2MoeForQuestionAnswering",
                  "Qwen2MoeModel"},
      // Qwen/Qwen1.5-MoE-A2.7B
      .example = R"({"model_type":"qwen2_moe","hidden_size":2048,"intermediate_size":5632,
           "num_attention_heads":16,"num_key_value_heads":16,"num_hidden_layers":24,
           "vocab_size":151936,"max_position_embeddings":8192,"rms_norm_eps":1e-6,
           "rope_theta":1000000.0,"hidden_act":"silu","use_sliding_window":false,
           "sliding_window":32768,"max_window_layers":21,"decoder_sparse_step":1,
           "moe_intermediate_size":1408,"shared_expert_intermediate_size":5632,
           "num_experts_per_tok":4,"num_experts":60,"norm_topk_prob":false,
           "tie_word_embeddings":false,"bos_token_id":151643,"eos_token_id":151643})",
  };
}

TS_ZOO_DECODER_FAMILY(Qwen2Moe);

}  // namespace ts::zoo::internal::decoder
