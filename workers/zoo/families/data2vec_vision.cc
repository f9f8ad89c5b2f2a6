// data2vec-vision (modeling_data2vec_vision.py, BEiT's modules under data2vec_vision.):
// Data2VecVisionModel and Data2VecVisionForImageClassification on the BEiT lineage
// (families/beit.h). Data2VecVisionForSemanticSegmentation (BEiT's UperNet head) is not built.
#include "workers/zoo/families/beit.h"

namespace ts::zoo::internal {
namespace {

std::vector<ArchEntry> Data2VecVisionArchs() {
  // facebook/data2vec-vision-base-ft1k.
  const nlohmann::json example = {{"hidden_size", 768},
                                  {"intermediate_size", 3072},
                                  {"num_attention_heads", 12},
                                  {"num_hidden_layers", 12},
                                  {"hidden_act", "gelu"},
                                  {"layer_norm_eps", 1e-12},
                                  {"image_size", 224},
                                  {"patch_size", 16},
                                  {"num_channels", 3},
                                  {"use_mask_token", false},
                                  {"use_absolute_position_embeddings", false},
                                  {"use_relative_position_bias", true},
                                  {"use_shared_relative_position_bias", false},
                                  {"layer_scale_init_value", 0.1},
                                  {"use_mean_pooling", true},
                                  {"initializer_range", 0.02},
                                  {"num_labels", 1000}};
  return BeitArchs({"data2vec-vision", "Data2VecVision", "data2vec_vision."}, example);
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Data2VecVision, Data2VecVisionArchs);

}  // namespace ts::zoo::internal
