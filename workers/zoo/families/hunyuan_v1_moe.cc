// hunyuan_v1_moe (modular_hunyuan_v1_moe.py): hunyuan_v1_dense's layers (q / k RMSNorm after the
// NTK-alpha rotary) with HunYuanMoEV1Moe on every layer: the router `mlp.gate.wg` (softmax, top
// moe_topk, renormalised to sum to one), MixtralExperts fused (`mlp.experts.gate_up_proj`
// [E, 2I, H], `down_proj` [E, H, I], I = intermediate_size) and the shared LlamaMLP
// `mlp.shared_mlp` of intermediate_size, added to the routed output. num_experts and moe_topk may
// be per-layer lists in the config class; the zoo takes uniform lists and refuses others naming
// the field. transformers keeps the router's weight in float32 (HunYuanMoEV1Gate); the zoo runs
// it in the model's dtype like the other routers.
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

// An int field, or a list of one repeated value (one per layer).
StatusOr<int64_t> UniformInt(const ConfigReader& r, const json& config, const std::string& field,
                             int64_t def) {
  if (!config.contains(field) || !config[field].is_array()) return r.Int(field, def);
  const json& l = config[field];
  if (l.empty() || !l[0].is_number_integer()) return r.Error(field, "expected integers");
  for (const json& v : l) {
    if (v != l[0]) return r.Error(field, "per-layer values that differ are not supported");
  }
  return l[0].get<int64_t>();
}

}  // namespace

DecoderFamily HunYuanMoEV1() {
  DecoderFamily f = HunYuanDenseV1();
  f.model_type = "hunyuan_v1_moe";
  f.llama_biases = false;  // HunYuanMoEV1Config has attention_bias; its MLPs have no bias
  f.parse = [dense = f.parse](const ConfigReader& r, const json& config, Recipe& c) -> Status {
    TS_ASSIGN_OR_RETURN(bool ab, r.Bool("attention_bias", false));
    c.q_bias = c.k_bias = c.v_bias = c.o_bias = ab;
    TS_RETURN_IF_ERROR(dense(r, config, c));
    Moe& m = c.moe;
    TS_ASSIGN_OR_RETURN(m.experts, UniformInt(r, config, "num_experts", 1));
    TS_RETURN_IF_ERROR(Positive(r, "num_experts", m.experts));
    TS_ASSIGN_OR_RETURN(m.top_k, UniformInt(r, config, "moe_topk", 1));
    TS_RETURN_IF_ERROR(Positive(r, "moe_topk", m.top_k));
    if (m.top_k > m.experts) {
      return r.Error("moe_topk", "must not exceed num_experts (" + std::to_string(m.top_k) + " > " +
                                     std::to_string(m.experts) + ")");
    }
    m.inter = c.inter;
    m.norm_topk = true;
    m.router_name = "gate.wg.weight";
    m.deepseek_shared = true;  // an ungated LlamaMLP added to the routed output
    m.shared_name = "shared_mlp";
    m.shared_inter = c.inter;
    m.sparse.assign(static_cast<size_t>(c.layers), true);
    return OkStatus();
  };
  f.scale_extra = [dense = f.scale_extra](const json& real, const Recipe& rc, json& t) {
    if (dense) dense(real, rc, t);
    const int64_t experts = std::min<int64_t>(rc.moe.experts, 4);
    t["num_experts"] = experts;
    t["moe_topk"] = std::max<int64_t>(1, std::min(rc.moe.top_k, std::max<int64_t>(1, experts / 2)));
  };
  f.classes = {"HunYuanMoEV1ForCausalLM", "HunYuanMoEV1ForSequenceClassification", "", "",
               "HunYuanMoEV1Model"};
  // tencent/Hunyuan-A13B-Instruct (moe_topk one value per layer there; 8 of 64 experts)
  f.example = R"({"model_type":"hunyuan_v1_moe","hidden_size":4096,"intermediate_size":3072,
         "num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"num_hidden_layers":32,
         "vocab_size":128167,"max_position_embeddings":32768,"rms_norm_eps":1e-5,
         "rope_theta":10000.0,"rope_scaling":{"alpha":1000.0,"beta_fast":32,"beta_slow":1,
         "factor":1.0,"mscale":1.0,"mscale_all_dim":1.0,"type":"dynamic"},"hidden_act":"silu",
         "attention_bias":false,"num_experts":64,
         "moe_topk":[8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8],
         "tie_word_embeddings":true,"pad_token_id":127961,"bos_token_id":1,"eos_token_id":127960})";
  return f;
}

TS_ZOO_DECODER_FAMILY(HunYuanMoEV1);

}  // namespace ts::zoo::internal::decoder
