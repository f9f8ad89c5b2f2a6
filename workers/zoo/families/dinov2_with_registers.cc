// dinov2_with_registers (modular_dinov2_with_registers.py): DINOv2 (dinov2.cc) with
// num_register_tokens learned `embeddings.register_tokens` inserted after the cls token once the
// position embeddings are added; the classifier's mean and the backbone's map skip them. The
// classes hold the model as `dinov2_with_registers.`.
#include "workers/zoo/families/dinov2.h"

namespace ts::zoo::internal {
namespace {

std::vector<ArchEntry> Dinov2WithRegistersArchs() {
  // facebook/dinov2-with-registers-base
  const nlohmann::json example = {{"model_type", "dinov2_with_registers"},
                                  {"hidden_size", 768},
                                  {"num_hidden_layers", 12},
                                  {"num_attention_heads", 12},
                                  {"mlp_ratio", 4},
                                  {"hidden_act", "gelu"},
                                  {"layer_norm_eps", 1e-6},
                                  {"image_size", 518},
                                  {"patch_size", 14},
                                  {"num_channels", 3},
                                  {"qkv_bias", true},
                                  {"layerscale_value", 1.0},
                                  {"drop_path_rate", 0.0},
                                  {"use_swiglu_ffn", false},
                                  {"num_register_tokens", 4},
                                  {"num_labels", 1000}};
  return Dinov2Archs(
      {"dinov2_with_registers", "Dinov2WithRegisters", "dinov2_with_registers.", true}, example);
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Dinov2WithRegisters, Dinov2WithRegistersArchs);

}  // namespace ts::zoo::internal
