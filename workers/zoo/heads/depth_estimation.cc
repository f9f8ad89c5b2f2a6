// GLPN's decoder and depth head (heads/image_head.h).
#include <ATen/CPUGeneratorImpl.h>

#include <set>
#include <string>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/vision_conv.h"

namespace ts::zoo::internal {
namespace {

// nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False).
at::Tensor GlpnUpsample2x(const at::Tensor& x) {
  const std::vector<double> scale = {2.0, 2.0};
  return at::upsample_bilinear2d(x, c10::nullopt, /*align_corners=*/false, scale);
}

class GlpnDepth : public ImageHead {
 public:
  explicit GlpnDepth(DepthHeadRecipe r) : r_(std::move(r)) {
    const int64_t d = r_.decoder_hidden, n = static_cast<int64_t>(r_.stage_widths.size());
    for (int64_t k = 0; k < n; ++k) {
      const std::string p = Stage(k);
      const int64_t in = r_.stage_widths[n - 1 - k];
      if (in != d) {
        Add(p + "convolution.weight", {d, in, 1, 1});
        Add(p + "convolution.bias", {d});
      }
      if (k == 0) continue;  // stages[0].fusion = None
      const std::string f = p + "fusion.";
      Add(f + "convolutional_layer1.0.weight", {d, 2 * d, 3, 3});
      Add(f + "convolutional_layer1.0.bias", {d});
      AddBn(f + "convolutional_layer1.1.", d);
      Add(f + "convolutional_layer2.0.weight", {d / 2, d, 3, 3});
      Add(f + "convolutional_layer2.0.bias", {d / 2});
      AddBn(f + "convolutional_layer2.1.", d / 2);
      Add(f + "convolutional_layer3.weight", {2, d / 2, 3, 3});
      Add(f + "convolutional_layer3.bias", {2});
    }
    Add("head.head.0.weight", {d, d, 3, 3});
    Add("head.head.0.bias", {d});
    Add("head.head.2.weight", {1, d, 3, 3});
    Add("head.head.2.bias", {1});
  }

  std::vector<std::string> OutputNames() const override { return {"predicted_depth"}; }

  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& /*gen*/) const override {
    if (!bn_weights_.count(name)) return false;
    t.fill_(1.0);
    return true;
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    const int64_t n = static_cast<int64_t>(f.stages.size());
    std::vector<at::Tensor> outs;
    at::Tensor prev;
    for (int64_t k = 0; k < n; ++k) {
      const std::string p = Stage(k);
      at::Tensor x = f.stages[n - 1 - k];
      if (r_.stage_widths[n - 1 - k] != r_.decoder_hidden)
        x = nn::Conv2d(x, GetWeight(w, p + "convolution.weight"),
                       GetWeight(w, p + "convolution.bias"), 1);
      if (prev.defined()) x = Fuse(w, p + "fusion.", x, prev);
      prev = GlpnUpsample2x(x);
      outs.push_back(prev);
    }
    outs.back() = GlpnUpsample2x(outs.back());
    const int64_t idx = r_.head_in_index < 0 ? n + r_.head_in_index : r_.head_in_index;
    at::Tensor x = nn::Conv2d(outs[idx], GetWeight(w, "head.head.0.weight"),
                              GetWeight(w, "head.head.0.bias"), 1, 1);
    x = nn::Conv2d(at::relu(x), GetWeight(w, "head.head.2.weight"),
                   GetWeight(w, "head.head.2.bias"), 1, 1);
    return {(at::sigmoid(x) * r_.max_depth).squeeze(1)};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    const at::Tensor& pred = out[0];
    at::Tensor target = GetInput(labels, "labels").to(pred.scalar_type());
    at::Tensor valid = target > 0;
    // target[valid_mask] as masked_select: the same elements in the same order (transformers'
    // boolean indexing dispatches aten::index, whose index list the simulated device's CPU
    // fallback does not move).
    at::Tensor d =
        at::log(at::masked_select(target, valid)) - at::log(at::masked_select(pred, valid));
    // sqrt(mean(d^2) - lambd * mean(d)^2), lambd 0.5. The 0-dim terms avoid Python-scalar
    // operands and run the sqrt on a 1-element vector: the simulated device loses a scalar's
    // wrapped-number flag in the backward (pow's, sqrt's 2 * result), and a 0-dim float times a
    // 0-dim float64 promotes to a dtype it has no kernel for. Same values.
    at::Tensor m = d.mean();
    at::Tensor var = d.pow(2).mean() - at::scalar_tensor(0.5, m.options()) * (m * m);
    return at::sqrt(var.reshape({1})).reshape({});
  }

  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    // The prediction's side: the last stage's map doubled once per stage and once more.
    int64_t side = r_.stage_sides.back();
    for (size_t k = 0; k <= r_.stage_sides.size(); ++k) side *= 2;
    at::Tensor y = at::empty({batch_size, side, side}, at::TensorOptions().dtype(at::kFloat))
                       .uniform_(0.1 * r_.max_depth, r_.max_depth, gen);
    y[0][0].fill_(0.0);
    labels["labels"] = y;
  }

 private:
  static std::string Stage(int64_t k) { return "decoder.stages." + std::to_string(k) + "."; }

  void AddBn(const std::string& p, int64_t c) {
    bn_weights_.insert(p + "weight");
    for (const char* s : {"weight", "bias", "running_mean", "running_var"}) Add(p + s, {c});
  }

  // GLPNSelectiveFeatureFusion(local, global).
  at::Tensor Fuse(const WeightMap& w, const std::string& f, const at::Tensor& local,
                  const at::Tensor& global) const {
    auto conv_bn_relu = [&](const at::Tensor& x, const std::string& p) {
      at::Tensor y = nn::Conv2d(x, GetWeight(w, p + "0.weight"), GetWeight(w, p + "0.bias"), 1, 1);
      return at::relu(BatchNorm2d(w, p + "1.", y, 1e-5));
    };
    at::Tensor x = conv_bn_relu(at::cat({local, global}, 1), f + "convolutional_layer1.");
    x = conv_bn_relu(x, f + "convolutional_layer2.");
    x = nn::Conv2d(x, GetWeight(w, f + "convolutional_layer3.weight"),
                   GetWeight(w, f + "convolutional_layer3.bias"), 1, 1);
    at::Tensor attn = at::sigmoid(x);
    return local * attn.select(1, 0).unsqueeze(1) + global * attn.select(1, 1).unsqueeze(1);
  }

  DepthHeadRecipe r_;
  std::set<std::string> bn_weights_;
};

}  // namespace

std::unique_ptr<ImageHead> GlpnDepthHead(DepthHeadRecipe recipe) {
  return std::make_unique<GlpnDepth>(std::move(recipe));
}

}  // namespace ts::zoo::internal
