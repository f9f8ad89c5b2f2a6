// falcon_mamba (modeling_falcon_mamba.py): Mamba's model (families/mamba.cc) with
// FalconMambaMixer's weight-free RMS norm (rms_forward, mixer_rms_eps) on the time step, B and C
// after x_proj; FalconMambaModel / FalconMambaForCausalLM keep Mamba's state_dict names.
#include "workers/zoo/families/mamba.h"

namespace ts::zoo::internal::mamba {
namespace {

std::vector<ArchEntry> FalconMamba() {
  // modelled on tiiuae/falcon-mamba-7b (its config stores expand 16 beside intermediate_size
  // 8192, which transformers reads).
  const nlohmann::json example = nlohmann::json::parse(R"({"model_type":"falcon_mamba",
      "vocab_size":65024,"hidden_size":4096,"state_size":16,"num_hidden_layers":64,
      "layer_norm_epsilon":1e-5,"pad_token_id":11,"bos_token_id":0,"eos_token_id":11,
      "expand":16,"intermediate_size":8192,"conv_kernel":4,"use_bias":false,
      "use_conv_bias":true,"hidden_act":"silu","initializer_range":0.1,"residual_in_fp32":true,
      "time_step_rank":256,"time_step_scale":1.0,"time_step_min":0.001,"time_step_max":0.1,
      "time_step_init_scheme":"random","time_step_floor":0.0001,
      "rescale_prenorm_residual":false,"use_cache":true,"mixer_rms_eps":1e-6,
      "tie_word_embeddings":false})");
  return MambaArchs("falcon_mamba", "FalconMamba", /*falcon=*/true, example);
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(FalconMamba, FalconMamba);

}  // namespace ts::zoo::internal::mamba
