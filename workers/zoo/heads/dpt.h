// DPT's neck and heads (modeling_dpt.py) over the hidden states of a ViT trunk
// (families/dpt.cc): the reassemble stage (tokens to maps at four resolutions), the 3 x 3 neck
// convs, the feature fusion stage, and DPTDepthEstimationHead or DPTSemanticSegmentationHead
// (with DPTAuxiliaryHead in the loss). Declared apart from image_head.h so that adding them did
// not rebuild every vision family.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/heads/image_head.h"

namespace ts::zoo::internal {

enum class DptReadout { kIgnore, kAdd, kProject };

// The neck's config (DPTConfig, non-hybrid, no backbone_config). The head reads
// VisionFeatures::stages: the encoder's hidden states after the layers of backbone_out_indices,
// tokens [B, 1 + grid^2, hidden] (cls first), before the final layernorm.
struct DptNeckRecipe {
  int64_t hidden = 0;                      // the ViT's hidden_size
  int64_t grid = 0;                        // patches per side
  std::vector<int64_t> neck_hidden_sizes;  // one per stage
  std::vector<double> reassemble_factors;  // > 1: ConvTranspose2d; 1: none; < 1: strided conv
  DptReadout readout = DptReadout::kProject;
  Activation act = Activation::kGeluErf;  // readout_projects' hidden_act
  int64_t fusion_hidden = 256;
  bool fusion_batch_norm = false;  // use_batch_norm_in_fusion_residual
  bool fusion_bias = true;         // use_bias_in_fusion_residual (default: not batch norm)
  int64_t head_in_index = -1;      // the fused map the head reads
};

// Side of the map the fusion stage's output `head_in_index` has, for `recipe`'s grid.
int64_t DptFusedSide(const DptNeckRecipe& recipe);

// DPTForDepthEstimation: predicted_depth [B, 2 side, 2 side] = relu(conv 1x1 (relu(conv 3x3
// (upsample x2 (conv 3x3 (fused)))))). transformers raises NotImplementedError when given labels:
// the zoo trains it as it trains the classes without an HF loss, mean((depth - target)^2) onto
// "target" float [B, 2 side, 2 side].
std::unique_ptr<ImageHead> DptDepthHead(DptNeckRecipe neck);

// DPTForSemanticSegmentation: logits [B, L, 2 side, 2 side] = upsample x2 (align_corners) of
// head.head (3x3 conv without bias, BatchNorm, ReLU, 1x1 conv) over the fused map; with
// `auxiliary` DPTAuxiliaryHead (the same layers, no upsample) over the last fused map enters the
// loss: CE(up(logits)) + auxiliary_weight CE(up(auxiliary logits)), each resized bilinearly to the
// labels and ignoring `ignore_index`. Labels "labels" int64 [B, image, image] in [0, L), the
// first row of image 0 the ignore index.
struct DptSegmentationRecipe {
  DptNeckRecipe neck;
  int64_t num_labels = 2, ignore_index = 255, image_size = 384;
  bool auxiliary = true;
  double auxiliary_weight = 0.4;
};
std::unique_ptr<ImageHead> DptSegmentationHead(DptSegmentationRecipe recipe);

// The fusion stage's layer 0 residual_layer1, which transformers builds and never calls: its
// state_dict entries (conv weights, biases, BatchNorm parameters and buffers but the counter).
WeightList DptUnusedFusionEntries(const DptNeckRecipe& recipe);

}  // namespace ts::zoo::internal
