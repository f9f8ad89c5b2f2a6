// DeepLabV3 (MobileViTDeepLabV3, MobileViTV2DeepLabV3 in modeling_mobilevit.py /
// modeling_mobilevitv2.py) over the last map of a trunk (VisionFeatures::stages.back()).
// Declared apart from image_head.h so that adding it did not rebuild every vision family. Also
// the registration of the families that use it (DeepLabV3Archs).
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
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

// What a DeepLabV3 family (mobilevit, mobilevitv2) builds from a tiny config: its trunk, with
// weight names under `prefix` and, when `segmentation`, without what the segmentation model
// leaves out (MobileViT's conv_1x1_exp), and the DeepLabV3 head's recipe, whose num_labels is
// also the classifier's.
struct DeepLabV3Trunk {
  std::unique_ptr<VisionTrunk> trunk;
  DeepLabV3Recipe head;
};
using MakeDeepLabV3Trunk = std::function<StatusOr<DeepLabV3Trunk>(
    const nlohmann::json& tiny_config, const std::string& prefix, bool segmentation)>;

// The family's three classes: `<name>Model` (weights unprefixed, `example` without num_labels)
// and `<name>ForImageClassification` (PooledImageHead), and `<name>ForSemanticSegmentation`
// (DeepLabV3Head; num_labels under 2 refused, as transformers' loss raises) on `example` as
// apple's deeplabv3-mobilevit* checkpoints set it: PASCAL VOC's 21 labels, output stride 16, 512
// pixels, atrous rates 6, 12, 18 and `aspp_out_channels`.
std::vector<ArchEntry> DeepLabV3Archs(const PooledVisionFamily& family,
                                      const nlohmann::json& example, int64_t aspp_out_channels,
                                      decltype(ArchEntry::scale) scale,
                                      MakeDeepLabV3Trunk make_trunk);

}  // namespace ts::zoo::internal
