// Masked image modeling (heads/masked_image_modeling.h).
#include "workers/zoo/heads/masked_image_modeling.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <utility>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

class MaskedImageModel final : public Model {
 public:
  MaskedImageModel(ModelSpec spec, std::unique_ptr<VisionTrunk> trunk, MaskedImageModelingRecipe r)
      : Model(std::move(spec)), trunk_(std::move(trunk)), r_(r) {}

  WeightList WeightShapes() const override {
    WeightList all = trunk_->Weights();
    const int64_t r = r_.encoder_stride;
    all.emplace_back("decoder.0.weight", std::vector<int64_t>{r * r * r_.channels, r_.width, 1, 1});
    all.emplace_back("decoder.0.bias", std::vector<int64_t>{r * r * r_.channels});
    return all;
  }

  std::vector<std::string> OutputNames() const override { return {"reconstruction"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& px = GetInput(inputs, "pixel_values");
    at::Tensor seq =
        trunk_->ForwardMasked(w, px, GetOptionalInput(inputs, "bool_masked_pos")).last_hidden_state;
    seq = seq.narrow(1, r_.drop_front, seq.size(1) - r_.drop_front - r_.drop_back);
    const int64_t b = seq.size(0), n = seq.size(1), c = seq.size(2);
    const auto side = static_cast<int64_t>(std::floor(std::sqrt(static_cast<double>(n))));
    at::Tensor map = seq.permute({0, 2, 1}).reshape({b, c, side, side});
    at::Tensor y = nn::Conv2d(map, GetWeight(w, "decoder.0.weight"), GetWeight(w, "decoder.0.bias"),
                              /*stride=*/1);
    // nn.PixelShuffle(r) as its definition: [B, C r^2, H, W] -> [B, C, H r, W r].
    const int64_t r = r_.encoder_stride, ch = y.size(1) / (r * r);
    y = y.view({b, ch, r, r, side, side}).permute({0, 1, 4, 2, 5, 3});
    return {y.reshape({b, ch, side * r, side * r})};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    const at::Tensor rec = Forward(w, batch.inputs)[0];
    const at::Tensor& px = GetInput(batch.inputs, "pixel_values");
    const at::Tensor& pos = GetInput(batch.inputs, "bool_masked_pos");
    // bool_masked_pos.reshape(-1, size, size).repeat_interleave(p, 1).repeat_interleave(p, 2)
    // .unsqueeze(1), written as a broadcast.
    const int64_t size = r_.image_size / r_.patch_size, p = r_.patch_size, b = pos.size(0);
    at::Tensor mask = pos.reshape({b, size, 1, size, 1})
                          .to(rec.scalar_type())
                          .expand({b, size, p, size, p})
                          .reshape({b, 1, size * p, size * p});
    at::Tensor l1 = (px.to(rec.scalar_type()) - rec).abs();
    // num_channels as a float tensor, not a Python scalar: the simulated device loses a scalar's
    // wrapped-number flag in the backward, and a 0-dim loss times a 0-dim float64 promotes.
    return (l1 * mask).sum() / (mask.sum() + 1e-5) /
           at::scalar_tensor(static_cast<double>(r_.channels), rec.options());
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const int64_t image = r_.image_size, grid = r_.image_size / r_.patch_size;
    Batch batch;
    batch.inputs["pixel_values"] = at::randn({batch_size, r_.channels, image, image}, gen,
                                             at::TensorOptions().dtype(at::kFloat));
    batch.inputs["bool_masked_pos"] =
        at::randint(0, 2, {batch_size, grid * grid}, gen, at::TensorOptions().dtype(at::kLong))
            .to(at::kBool);
    return batch;
  }

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (!trunk_->InitWeight(name, t, gen)) Model::InitWeight(name, t, gen);
  }

 private:
  std::unique_ptr<VisionTrunk> trunk_;
  MaskedImageModelingRecipe r_;
};

}  // namespace

StatusOr<std::unique_ptr<Model>> MakeMaskedImageModel(ModelSpec spec,
                                                      std::unique_ptr<VisionTrunk> trunk,
                                                      MaskedImageModelingRecipe recipe) {
  return std::unique_ptr<Model>(
      std::make_unique<MaskedImageModel>(std::move(spec), std::move(trunk), recipe));
}

Status CheckEncoderStride(const nlohmann::json& config, int64_t patch_size) {
  ConfigReader r(config);
  TS_ASSIGN_OR_RETURN(int64_t stride, r.Int("encoder_stride", 16));
  if (stride != patch_size)
    return r.Error("encoder_stride", "must equal patch_size for masked image modeling (" +
                                         std::to_string(stride) +
                                         " != " + std::to_string(patch_size) + ")");
  return OkStatus();
}

}  // namespace ts::zoo::internal
