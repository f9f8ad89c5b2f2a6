// VisionModel: one vision trunk and one image head (trunks/vision.h).
#include "workers/zoo/trunks/vision.h"

#include <ATen/CPUGeneratorImpl.h>

#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {

at::Tensor Activate(const at::Tensor& x, const VisionActivation& a) {
  return a.relu6 ? at::clamp(x, 0.0, 6.0) : nn::Activate(x, a.act);
}

VisionFeatures VisionTrunk::ForwardMasked(const WeightMap& w, const at::Tensor& pixel_values,
                                          const at::Tensor& bool_masked_pos) const {
  TORCH_CHECK(!bool_masked_pos.defined(), "this vision trunk has no mask token");
  return Forward(w, pixel_values);
}

VisionModel::VisionModel(ModelSpec spec, std::unique_ptr<VisionTrunk> trunk,
                         std::unique_ptr<ImageHead> head)
    : Model(std::move(spec)), trunk_(std::move(trunk)), head_(std::move(head)) {}

VisionModel::~VisionModel() = default;

WeightList VisionModel::WeightShapes() const {
  WeightList all = trunk_->Weights();
  all.insert(all.end(), head_->Weights().begin(), head_->Weights().end());
  return all;
}

std::vector<std::string> VisionModel::OutputNames() const { return head_->OutputNames(); }

std::vector<at::Tensor> VisionModel::Forward(const WeightMap& w, const TensorMap& inputs) const {
  return head_->Forward(w, trunk_->Forward(w, GetInput(inputs, "pixel_values")));
}

at::Tensor VisionModel::Loss(const WeightMap& w, const Batch& batch) const {
  return head_->FeaturesLoss(w, trunk_->Forward(w, GetInput(batch.inputs, "pixel_values")),
                             batch.labels);
}

Batch VisionModel::MakeBatch(uint64_t seed, int64_t batch_size) const {
  if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<int64_t> shape = trunk_->PixelValuesShape();
  shape.insert(shape.begin(), batch_size);
  Batch batch;
  batch.inputs["pixel_values"] = at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat));
  head_->AddLabels(gen, batch_size, batch.labels);
  return batch;
}

StatusOr<std::unique_ptr<Model>> MakeVisionModel(ModelSpec spec, std::unique_ptr<VisionTrunk> trunk,
                                                 std::unique_ptr<ImageHead> head) {
  return std::unique_ptr<Model>(
      std::make_unique<VisionModel>(std::move(spec), std::move(trunk), std::move(head)));
}

std::vector<ArchEntry> PooledVisionArchs(const PooledVisionFamily& family,
                                         const nlohmann::json& example,
                                         decltype(ArchEntry::scale) scale,
                                         MakePooledVisionTrunk make_trunk) {
  auto build = [family, make_trunk](bool base) -> decltype(ArchEntry::build) {
    return [family, make_trunk, base](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
      TS_ASSIGN_OR_RETURN(PooledVisionTrunk t,
                          make_trunk(spec.tiny_config, base ? "" : family.prefix));
      auto head = PooledImageHead(base, *t.trunk, t.num_labels, family.classifier);
      return MakeVisionModel(std::move(spec), std::move(t.trunk), std::move(head));
    };
  };
  const std::string model = family.name + "Model";
  const std::string classifier = family.name + "ForImageClassification";
  return {{{model, family.model_type, "image-feature-extraction"},
           WithArchitecture(example, model),
           scale,
           build(true)},
          {{classifier, family.model_type, "image-classification"},
           WithArchitecture(example, classifier),
           scale,
           build(false)}};
}

void VisionModel::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (trunk_->InitWeight(name, t, gen)) return;
  if (head_->InitWeight(name, t, gen)) return;
  if (ends("running_var") || ends("layer_scale_parameter")) {
    t.uniform_(0.5, 1.5, gen);
  } else if (ends("running_mean")) {
    t.normal_(0.0, 0.1, gen);
  } else if (trunk_->BatchNormWeights().count(name)) {
    t.fill_(1.0);
  } else {
    Model::InitWeight(name, t, gen);
  }
}

}  // namespace ts::zoo::internal
