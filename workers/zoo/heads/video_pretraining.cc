// VideoMAEForPreTraining (heads/video_pretraining.h).
#include "workers/zoo/heads/video_pretraining.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <optional>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

class VideoMaePretraining final : public Model {
 public:
  VideoMaePretraining(ModelSpec spec, std::unique_ptr<VideoMaeTrunk> trunk,
                      VideoPretrainingRecipe r)
      : Model(std::move(spec)), trunk_(std::move(trunk)), r_(std::move(r)) {
    const VideoMaeRecipe& v = trunk_->recipe();
    const int64_t d = r_.decoder.hidden;
    out_ = v.tubelet * v.patch_size * v.patch_size * v.channels;
    weights_ = trunk_->Weights();
    weights_.emplace_back("encoder_to_decoder.weight", std::vector<int64_t>{d, v.encoder.hidden});
    weights_.emplace_back("mask_token", std::vector<int64_t>{1, 1, d});
    decoder_.emplace(r_.decoder, "", weights_);
    weights_.emplace_back("decoder.norm.weight", std::vector<int64_t>{d});
    weights_.emplace_back("decoder.norm.bias", std::vector<int64_t>{d});
    weights_.emplace_back("decoder.head.weight", std::vector<int64_t>{out_, d});
    weights_.emplace_back("decoder.head.bias", std::vector<int64_t>{out_});
  }

  WeightList WeightShapes() const override { return weights_; }
  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& pos = GetInput(inputs, "bool_masked_pos");
    at::Tensor seq =
        trunk_->ForwardMasked(w, GetInput(inputs, "pixel_values"), pos).last_hidden_state;
    seq = nn::Linear(seq, GetWeight(w, "encoder_to_decoder.weight"));
    const int64_t b = seq.size(0), d = seq.size(2), n = pos.size(1);
    const auto table_type = seq.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor table = InterleavedSinusoidTable(n, d, seq.options().dtype(table_type))
                           .unsqueeze(0)
                           .expand({b, n, d})
                           .to(seq.scalar_type());
    // The positions of the visible and of the masked tubelets (boolean indexing in transformers,
    // masked_select here: the same elements in the same order).
    at::Tensor masked = pos.unsqueeze(-1);
    at::Tensor vis = at::masked_select(table, masked.logical_not()).reshape({b, -1, d});
    at::Tensor msk = at::masked_select(table, masked).reshape({b, -1, d});
    at::Tensor x = at::cat({seq + vis, GetWeight(w, "mask_token") + msk}, 1);
    x = decoder_->Forward(w, x, at::Tensor());
    const int64_t shown = msk.size(1);
    if (shown > 0) x = x.slice(1, x.size(1) - shown);  // hidden_states[:, -return_token_num:]
    x = nn::LayerNorm(x, GetWeight(w, "decoder.norm.weight"), GetWeight(w, "decoder.norm.bias"),
                      1e-5);
    return {nn::Linear(x, GetWeight(w, "decoder.head.weight"), GetWeight(w, "decoder.head.bias"))};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    const at::Tensor logits = Forward(w, batch.inputs)[0];
    at::Tensor labels;
    {
      at::NoGradGuard no_grad;
      labels = Labels(GetInput(batch.inputs, "pixel_values").to(logits.scalar_type()),
                      GetInput(batch.inputs, "bool_masked_pos"));
    }
    return at::mse_loss(logits, labels);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const VideoMaeRecipe& v = trunk_->recipe();
    std::vector<int64_t> shape = trunk_->PixelValuesShape();
    shape.insert(shape.begin(), batch_size);
    Batch batch;
    batch.inputs["pixel_values"] = at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat));
    // Every video masks as many tubelets (transformers requires it): half, at random places.
    const int64_t n = v.Tokens();
    std::vector<at::Tensor> rows;
    for (int64_t i = 0; i < batch_size; ++i)
      rows.push_back(at::randperm(n, gen, at::TensorOptions().dtype(at::kLong)).lt(n / 2));
    batch.inputs["bool_masked_pos"] = at::stack(rows);
    return batch;
  }

 private:
  // The masked tubelets' pixels [B, masked, tubelet * patch^2 * channels], as transformers
  // builds its labels.
  at::Tensor Labels(const at::Tensor& px, const at::Tensor& pos) const {
    const VideoMaeRecipe& v = trunk_->recipe();
    at::Tensor frames = px;
    if (v.channels == 3) {
      auto channel = [&](std::vector<float> values) {
        return at::tensor(values, at::TensorOptions().dtype(at::kFloat))
            .to(px.options())
            .view({1, 1, 3, 1, 1});
      };
      frames = px * channel({0.229f, 0.224f, 0.225f}) + channel({0.485f, 0.456f, 0.406f});
    }
    const int64_t b = px.size(0), t = px.size(1), c = px.size(2), hh = px.size(3), ww = px.size(4);
    const int64_t ts = v.tubelet, p = v.patch_size, n = (t / ts) * (hh / p) * (ww / p);
    frames = frames.view({b, t / ts, ts, c, hh / p, p, ww / p, p})
                 .permute({0, 1, 4, 6, 2, 5, 7, 3})
                 .contiguous();
    at::Tensor patches;
    if (r_.norm_pix_loss) {
      frames = frames.view({b, n, ts * p * p, c});
      frames = (frames - frames.mean(-2, /*keepdim=*/true)) /
               (frames.var(-2, /*unbiased=*/true, /*keepdim=*/true).sqrt() + 1e-6);
      patches = frames.view({b, n, ts * p * p * c});
    } else {
      patches = frames.view({b, n, ts * p * p * c});
    }
    return at::masked_select(patches, pos.unsqueeze(-1)).reshape({b, -1, out_});
  }

  std::unique_ptr<VideoMaeTrunk> trunk_;
  VideoPretrainingRecipe r_;
  int64_t out_ = 0;
  WeightList weights_;
  std::optional<PreLnEncoder> decoder_;
};

}  // namespace

StatusOr<std::unique_ptr<Model>> MakeVideoMaePretraining(ModelSpec spec,
                                                         std::unique_ptr<VideoMaeTrunk> trunk,
                                                         VideoPretrainingRecipe recipe) {
  return std::unique_ptr<Model>(
      std::make_unique<VideoMaePretraining>(std::move(spec), std::move(trunk), std::move(recipe)));
}

}  // namespace ts::zoo::internal
