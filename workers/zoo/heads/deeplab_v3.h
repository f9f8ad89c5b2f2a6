// DeepLabV3 (MobileViTDeepLabV3, MobileViTV2DeepLabV3 in modeling_mobilevit.py /
// modeling_mobilevitv2.py) over the last map of a trunk (VisionFeatures::stages.back()).
// Declared apart from image_head.h so that adding it did not rebuild every vision family.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "workers/zoo/heads/image_head.h"

namespace ts::zoo::internal {

// segmentation_head.aspp: convs.0 (1x1), convs.1-3 (3x3 with dilation atrous_rates[i], padding
// the same), convs.4.conv_1x1 over the global mean resized back bilinearly, each conv + eval
// BatchNorm + ReLU; cat, project (1x1 + BatchNorm + ReLU); segmentation_head.classifier (1x1 with
// bias). Outputs logits [B, L, h, w] at the map's size. Loss: cross entropy of the logits resized
// bilinearly to the labels, ignoring ignore_index. Labels "labels" int64 [B, image, image] in [0,
// L), the first row of image 0 the ignore index.
struct DeepLabV3Recipe {
  int64_t in_channels = 0, aspp_out = 256;
  std::vector<int64_t> atrous_rates = {6, 12, 18};
  int64_t num_labels = 2, ignore_index = 255, image_size = 512;
};
std::unique_ptr<ImageHead> DeepLabV3Head(DeepLabV3Recipe recipe);

}  // namespace ts::zoo::internal
