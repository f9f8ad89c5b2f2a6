// DPT's neck, depth head and segmentation heads (heads/dpt.h), as modeling_dpt.py builds them
// for a non-hybrid DPTConfig: DPTNeck (DPTReassembleStage, convs, DPTFeatureFusionStage),
// DPTDepthEstimationHead, DPTSemanticSegmentationHead and DPTAuxiliaryHead.
#include "workers/zoo/heads/dpt.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/nn_convolutions.h"
#include "workers/zoo/trunks/vision_conv.h"

namespace ts::zoo::internal {
namespace {

const std::string kDptReassemble = "neck.reassemble_stage.";
const std::string kDptFusion = "neck.fusion_stage.layers.";

// nn.Upsample / interpolate(scale_factor=2, mode="bilinear", align_corners=True).
at::Tensor DptUpsample2x(const at::Tensor& x) {
  const std::vector<double> scale = {2.0, 2.0};
  return at::upsample_bilinear2d(x, c10::nullopt, /*align_corners=*/true, scale);
}

int64_t DptResizeStride(double factor) { return static_cast<int64_t>(1.0 / factor); }

// Side of stage i's map after DPTReassembleLayer's resize.
int64_t DptStageSide(const DptNeckRecipe& r, size_t i) {
  const double f = r.reassemble_factors[i];
  if (f > 1) return r.grid * static_cast<int64_t>(f);
  if (f == 1) return r.grid;
  return (r.grid + 2 - 3) / DptResizeStride(f) + 1;  // 3 x 3 conv, padding 1
}

// DPTPreActResidualLayer's parameters under `p` (".residual_layerK.").
void DptResidualWeights(const DptNeckRecipe& r, const std::string& p, WeightList& out) {
  const int64_t f = r.fusion_hidden;
  for (const char* k : {"1", "2"}) {
    out.emplace_back(p + "convolution" + k + ".weight", std::vector<int64_t>{f, f, 3, 3});
    if (r.fusion_bias) out.emplace_back(p + "convolution" + k + ".bias", std::vector<int64_t>{f});
  }
  if (!r.fusion_batch_norm) return;
  for (const char* k : {"1", "2"}) {
    for (const char* s : {"weight", "bias", "running_mean", "running_var"})
      out.emplace_back(p + "batch_norm" + k + "." + s, std::vector<int64_t>{f});
  }
}

// DPTNeck over the hidden states of backbone_out_indices.
class DptNeck {
 public:
  explicit DptNeck(DptNeckRecipe r) : r_(std::move(r)) {
    const size_t n = r_.neck_hidden_sizes.size();
    for (size_t i = 0; i < n; ++i) {
      const std::string p = kDptReassemble + "layers." + std::to_string(i) + ".";
      const int64_t c = r_.neck_hidden_sizes[i];
      const double f = r_.reassemble_factors[i];
      Add(p + "projection.weight", {c, r_.hidden, 1, 1});
      Add(p + "projection.bias", {c});
      if (f > 1) {
        const auto k = static_cast<int64_t>(f);
        Add(p + "resize.weight", {c, c, k, k});  // ConvTranspose2d: [in, out, k, k]
        Add(p + "resize.bias", {c});
      } else if (f < 1) {
        Add(p + "resize.weight", {c, c, 3, 3});
        Add(p + "resize.bias", {c});
      }
    }
    if (r_.readout == DptReadout::kProject) {
      for (size_t i = 0; i < n; ++i) {
        const std::string p = kDptReassemble + "readout_projects." + std::to_string(i) + ".0.";
        Add(p + "weight", {r_.hidden, 2 * r_.hidden});
        Add(p + "bias", {r_.hidden});
      }
    }
    for (size_t i = 0; i < n; ++i)
      Add("neck.convs." + std::to_string(i) + ".weight",
          {r_.fusion_hidden, r_.neck_hidden_sizes[i], 3, 3});
    for (size_t i = 0; i < n; ++i) {
      const std::string p = kDptFusion + std::to_string(i) + ".";
      Add(p + "projection.weight", {r_.fusion_hidden, r_.fusion_hidden, 1, 1});
      Add(p + "projection.bias", {r_.fusion_hidden});
      // Layer 0 fuses nothing: its residual_layer1 is never called (DptUnusedFusionEntries).
      if (i > 0) DptResidualWeights(r_, p + "residual_layer1.", weights_);
      DptResidualWeights(r_, p + "residual_layer2.", weights_);
    }
  }

  const WeightList& Weights() const { return weights_; }

  // The fused maps, coarsest first (DPTFeatureFusionStage's output).
  std::vector<at::Tensor> Forward(const WeightMap& w, const std::vector<at::Tensor>& stages) const {
    TORCH_CHECK(stages.size() == r_.neck_hidden_sizes.size(), "DPT neck: expected ",
                r_.neck_hidden_sizes.size(), " hidden states, got ", stages.size());
    std::vector<at::Tensor> features;
    for (size_t i = 0; i < stages.size(); ++i) {
      at::Tensor x = Reassemble(w, i, stages[i]);
      features.push_back(nn::Conv2d(x, GetWeight(w, "neck.convs." + std::to_string(i) + ".weight"),
                                    at::Tensor(), 1, 1));
    }
    std::vector<at::Tensor> fused;
    for (size_t k = 0; k < features.size(); ++k) {
      const at::Tensor& feature = features[features.size() - 1 - k];
      fused.push_back(k == 0 ? Fuse(w, k, feature, at::Tensor())
                             : Fuse(w, k, fused.back(), feature));
    }
    return fused;
  }

 private:
  void Add(const std::string& name, std::vector<int64_t> shape) {
    weights_.emplace_back(name, std::move(shape));
  }

  // DPTReassembleStage for hidden state i, then DPTReassembleLayer i.
  at::Tensor Reassemble(const WeightMap& w, size_t i, const at::Tensor& h) const {
    const int64_t b = h.size(0), c = h.size(2), g = r_.grid;
    at::Tensor cls = h.select(1, 0);
    at::Tensor x = h.narrow(1, 1, h.size(1) - 1);
    x = x.reshape({b, g, g, c}).permute({0, 3, 1, 2}).contiguous();
    const std::vector<int64_t> shape = {b, c, g, g};
    if (r_.readout == DptReadout::kProject) {
      const std::string p = kDptReassemble + "readout_projects." + std::to_string(i) + ".0.";
      x = x.flatten(2).permute({0, 2, 1});
      at::Tensor readout = cls.unsqueeze(1).expand_as(x);
      x = nn::Activate(nn::Linear(at::cat({x, readout}, -1), GetWeight(w, p + "weight"),
                                  GetWeight(w, p + "bias")),
                       r_.act);
      x = x.permute({0, 2, 1}).reshape(shape);
    } else if (r_.readout == DptReadout::kAdd) {
      x = (x.flatten(2) + cls.unsqueeze(-1)).reshape(shape);
    }
    const std::string p = kDptReassemble + "layers." + std::to_string(i) + ".";
    x = nn::Conv2d(x, GetWeight(w, p + "projection.weight"), GetWeight(w, p + "projection.bias"),
                   1);
    const double f = r_.reassemble_factors[i];
    if (f > 1) {
      return nn::ConvTranspose2d(x, GetWeight(w, p + "resize.weight"),
                                 GetWeight(w, p + "resize.bias"), static_cast<int64_t>(f));
    }
    if (f < 1) {
      return nn::Conv2d(x, GetWeight(w, p + "resize.weight"), GetWeight(w, p + "resize.bias"),
                        DptResizeStride(f), 1);
    }
    return x;
  }

  // DPTPreActResidualLayer under `p`.
  at::Tensor Residual(const WeightMap& w, const std::string& p, const at::Tensor& in) const {
    at::Tensor x = in;
    for (const char* k : {"1", "2"}) {
      x = at::relu(x);
      const std::string conv = p + "convolution" + k + ".";
      x = nn::Conv2d(x, GetWeight(w, conv + "weight"),
                     r_.fusion_bias ? GetWeight(w, conv + "bias") : at::Tensor(), 1, 1);
      if (r_.fusion_batch_norm) x = BatchNorm2d(w, p + "batch_norm" + k + ".", x, 1e-5);
    }
    return x + in;
  }

  // DPTFeatureFusionLayer k (align_corners True) on `hidden`, fused with `residual` if defined.
  at::Tensor Fuse(const WeightMap& w, size_t k, at::Tensor hidden, at::Tensor residual) const {
    const std::string p = kDptFusion + std::to_string(k) + ".";
    if (residual.defined()) {
      if (!hidden.sizes().equals(residual.sizes())) {
        residual = at::upsample_bilinear2d(residual, {hidden.size(2), hidden.size(3)},
                                           /*align_corners=*/false);
      }
      hidden = hidden + Residual(w, p + "residual_layer1.", residual);
    }
    hidden = DptUpsample2x(Residual(w, p + "residual_layer2.", hidden));
    return nn::Conv2d(hidden, GetWeight(w, p + "projection.weight"),
                      GetWeight(w, p + "projection.bias"), 1);
  }

  DptNeckRecipe r_;
  WeightList weights_;
};

size_t DptHeadIndex(const DptNeckRecipe& r) {
  const auto n = static_cast<int64_t>(r.neck_hidden_sizes.size());
  return static_cast<size_t>(r.head_in_index < 0 ? n + r.head_in_index : r.head_in_index);
}

// A head over the neck: the neck's weights first, then the head's; BatchNorm scales start at 1.
class DptHeadBase : public ImageHead {
 public:
  explicit DptHeadBase(const DptNeckRecipe& r) : neck_(r) {
    for (const auto& [name, shape] : neck_.Weights()) Add(name, shape);
  }

  // BatchNorm scales 1. The fusion stage's projections (four 1x1 convs in a chain without
  // normalisation, each after a residual pair and an upsample) at half the model's fan-in std:
  // at the full std the tiny neck amplifies so that the engine's 5 SGD steps at lr 0.05 diverge
  // (the segmentation loss reached NaN for 3 of 4 seeds; the depth head's ReLU died).
  bool InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (bn_weights_.count(name)) {
      t.fill_(1.0);
      return true;
    }
    const std::string suffix = ".projection.weight";
    if (name.rfind(kDptFusion, 0) != 0 || name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      return false;
    }
    const double fan_in = static_cast<double>(t.numel() / t.size(0));
    t.normal_(0.0, 0.5 / std::sqrt(fan_in), gen);
    return true;
  }

 protected:
  void AddBn(const std::string& p, int64_t c) {
    bn_weights_.insert(p + "weight");
    for (const char* s : {"weight", "bias", "running_mean", "running_var"}) Add(p + s, {c});
  }

  DptNeck neck_;
  std::set<std::string> bn_weights_;
};

class DptDepth : public DptHeadBase {
 public:
  explicit DptDepth(DptNeckRecipe r) : DptHeadBase(r), r_(std::move(r)) {
    const int64_t f = r_.fusion_hidden;
    Add("head.head.0.weight", {f / 2, f, 3, 3});
    Add("head.head.0.bias", {f / 2});
    Add("head.head.2.weight", {32, f / 2, 3, 3});
    Add("head.head.2.bias", {32});
    Add("head.head.4.weight", {1, 32, 1, 1});
    Add("head.head.4.bias", {1});
  }

  std::vector<std::string> OutputNames() const override { return {"predicted_depth"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    at::Tensor x = neck_.Forward(w, f.stages)[DptHeadIndex(r_)];
    x = nn::Conv2d(x, GetWeight(w, "head.head.0.weight"), GetWeight(w, "head.head.0.bias"), 1, 1);
    x = DptUpsample2x(x);
    x = nn::Conv2d(x, GetWeight(w, "head.head.2.weight"), GetWeight(w, "head.head.2.bias"), 1, 1);
    x = nn::Conv2d(at::relu(x), GetWeight(w, "head.head.4.weight"),
                   GetWeight(w, "head.head.4.bias"), 1);
    return {at::relu(x).squeeze(1)};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return (out[0] - GetInput(labels, "target").to(out[0].scalar_type())).pow(2).mean();
  }

  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    const int64_t side = 2 * DptFusedSide(r_);
    labels["target"] = at::empty({batch_size, side, side}, at::TensorOptions().dtype(at::kFloat))
                           .uniform_(0.0, 1.0, gen);
  }

 private:
  DptNeckRecipe r_;
};

class DptSegmentation : public DptHeadBase {
 public:
  explicit DptSegmentation(DptSegmentationRecipe r) : DptHeadBase(r.neck), r_(std::move(r)) {
    const int64_t f = r_.neck.fusion_hidden;
    for (const std::string p : {"head.head.", "auxiliary_head.head."}) {
      if (p == "auxiliary_head.head." && !r_.auxiliary) break;
      Add(p + "0.weight", {f, f, 3, 3});
      AddBn(p + "1.", f);
      Add(p + "4.weight", {r_.num_labels, f, 1, 1});
      Add(p + "4.bias", {r_.num_labels});
    }
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    std::vector<at::Tensor> fused = neck_.Forward(w, f.stages);
    return {Logits(w, fused)};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    TORCH_CHECK(!r_.auxiliary, "DPT segmentation: the auxiliary loss needs the features");
    return CrossEntropy2d(out[0], GetInput(labels, "labels"));
  }

  // transformers' loss: main + auxiliary_loss_weight * auxiliary, the auxiliary logits (not an
  // output of SemanticSegmenterOutput) from DPTAuxiliaryHead over the last fused map.
  at::Tensor FeaturesLoss(const WeightMap& w, const VisionFeatures& f,
                          const TensorMap& labels) const override {
    std::vector<at::Tensor> fused = neck_.Forward(w, f.stages);
    const at::Tensor& y = GetInput(labels, "labels");
    at::Tensor loss = CrossEntropy2d(Logits(w, fused), y);
    if (!r_.auxiliary) return loss;
    at::Tensor aux = CrossEntropy2d(Classify(w, "auxiliary_head.head.", fused.back()), y);
    // The Python-scalar weight as a 0-dim tensor of the loss's dtype (heads/depth_estimation.cc).
    return loss + at::scalar_tensor(r_.auxiliary_weight, loss.options()) * aux;
  }

  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    const int64_t image = r_.image_size;
    at::Tensor y = at::randint(0, r_.num_labels, {batch_size, image, image}, gen,
                               at::TensorOptions().dtype(at::kLong));
    y[0][0].fill_(r_.ignore_index);
    labels["labels"] = y;
  }

 private:
  at::Tensor Logits(const WeightMap& w, const std::vector<at::Tensor>& fused) const {
    return DptUpsample2x(Classify(w, "head.head.", fused[DptHeadIndex(r_.neck)]));
  }

  // Cross entropy of the logits resized bilinearly to the labels, ignoring ignore_index.
  at::Tensor CrossEntropy2d(const at::Tensor& logits, const at::Tensor& y) const {
    at::Tensor up = at::upsample_bilinear2d(logits, {y.size(1), y.size(2)}, false);
    return at::cross_entropy_loss(up, y, /*weight=*/{}, at::Reduction::Mean, r_.ignore_index);
  }

  // head.head / auxiliary_head.head: conv 3x3 (no bias), BatchNorm, ReLU, dropout, conv 1x1.
  at::Tensor Classify(const WeightMap& w, const std::string& p, const at::Tensor& in) const {
    at::Tensor x = nn::Conv2d(in, GetWeight(w, p + "0.weight"), at::Tensor(), 1, 1);
    x = at::relu(BatchNorm2d(w, p + "1.", x, 1e-5));
    return nn::Conv2d(x, GetWeight(w, p + "4.weight"), GetWeight(w, p + "4.bias"), 1);
  }

  DptSegmentationRecipe r_;
};

}  // namespace

int64_t DptFusedSide(const DptNeckRecipe& recipe) {
  // Each fusion layer keeps its input's size (the residual is resized to it) and doubles it;
  // layer 0's input is the last stage.
  const int64_t last = DptStageSide(recipe, recipe.reassemble_factors.size() - 1);
  return last << (DptHeadIndex(recipe) + 1);
}

std::unique_ptr<ImageHead> DptDepthHead(DptNeckRecipe neck) {
  return std::make_unique<DptDepth>(std::move(neck));
}

std::unique_ptr<ImageHead> DptSegmentationHead(DptSegmentationRecipe recipe) {
  return std::make_unique<DptSegmentation>(std::move(recipe));
}

WeightList DptUnusedFusionEntries(const DptNeckRecipe& recipe) {
  WeightList out;
  DptResidualWeights(recipe, kDptFusion + "0.residual_layer1.", out);
  return out;
}

}  // namespace ts::zoo::internal
