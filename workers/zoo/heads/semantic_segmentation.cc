// SegFormer's decode head (heads/image_head.h).
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <string>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/vision_conv.h"

namespace ts::zoo::internal {
namespace {

const std::string kSegformerHead = "decode_head.";

class SegformerDecode : public ImageHead {
 public:
  explicit SegformerDecode(SegmentationHeadRecipe r) : r_(std::move(r)) {
    const int64_t d = r_.decoder_hidden, n = static_cast<int64_t>(r_.stage_widths.size());
    for (int64_t i = 0; i < n; ++i) {
      const std::string p = kSegformerHead + "linear_c." + std::to_string(i) + ".proj.";
      Add(p + "weight", {d, r_.stage_widths[i]});
      Add(p + "bias", {d});
    }
    Add(kSegformerHead + "linear_fuse.weight", {d, d * n, 1, 1});
    for (const char* s : {"weight", "bias", "running_mean", "running_var"})
      Add(kSegformerHead + "batch_norm." + s, {d});
    Add(kSegformerHead + "classifier.weight", {r_.num_labels, d, 1, 1});
    Add(kSegformerHead + "classifier.bias", {r_.num_labels});
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    const int64_t b = f.stages.back().size(0);
    const std::vector<int64_t> size = {f.stages[0].size(2), f.stages[0].size(3)};
    std::vector<at::Tensor> maps;
    for (size_t i = 0; i < f.stages.size(); ++i) {
      const std::string p = kSegformerHead + "linear_c." + std::to_string(i) + ".proj.";
      const at::Tensor& s = f.stages[i];
      const int64_t height = s.size(2), width = s.size(3);
      at::Tensor x = nn::Linear(s.flatten(2).transpose(1, 2), GetWeight(w, p + "weight"),
                                GetWeight(w, p + "bias"));
      x = x.permute({0, 2, 1}).reshape({b, -1, height, width});
      maps.push_back(at::upsample_bilinear2d(x, size, /*align_corners=*/false));
    }
    std::reverse(maps.begin(), maps.end());
    at::Tensor x = nn::Conv2d(at::cat(maps, 1), GetWeight(w, kSegformerHead + "linear_fuse.weight"),
                              at::Tensor(), /*stride=*/1);
    x = at::relu(BatchNorm2d(w, kSegformerHead + "batch_norm.", x, 1e-5));
    return {nn::Conv2d(x, GetWeight(w, kSegformerHead + "classifier.weight"),
                       GetWeight(w, kSegformerHead + "classifier.bias"), /*stride=*/1)};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    const at::Tensor& y = GetInput(labels, "labels");
    at::Tensor up = at::upsample_bilinear2d(out[0], {y.size(1), y.size(2)}, false);
    if (r_.num_labels > 1)
      return at::cross_entropy_loss(up, y, /*weight=*/{}, at::Reduction::Mean, r_.ignore_index);
    at::Tensor valid = ((y >= 0) & (y != r_.ignore_index)).to(up.scalar_type());
    at::Tensor bce = at::binary_cross_entropy_with_logits(up.squeeze(1), y.to(up.scalar_type()), {},
                                                          {}, at::Reduction::None);
    return (bce * valid).mean();
  }

  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    const int64_t image = r_.image_size;
    at::Tensor y = at::randint(0, r_.num_labels, {batch_size, image, image}, gen,
                               at::TensorOptions().dtype(at::kLong));
    y[0][0].fill_(r_.ignore_index);  // ignored pixels, as an annotation's void label
    labels["labels"] = y;
  }

 private:
  SegmentationHeadRecipe r_;
};

}  // namespace

std::unique_ptr<ImageHead> SegformerDecodeHead(SegmentationHeadRecipe recipe) {
  return std::make_unique<SegformerDecode>(std::move(recipe));
}

}  // namespace ts::zoo::internal
