// The x-vector head over wav2vec2's encoder (Wav2Vec2ForXVector, modeling_wav2vec2.py; also its
// siblings' *ForXVector): `projector` to tdnn_dim[0], the TDNN layers (TDNNLayer: conv1d of
// kernel tdnn_kernel[i] and dilation tdnn_dilation[i] stored as the Linear `kernel` of
// [out, k * in], then ReLU), statistic pooling (the mean and the unbiased std over frames,
// concatenated), `feature_extractor` to xvector_output_dim (the embeddings) and `classifier`
// (the logits). The loss is AMSoftmaxLoss(scale 30, margin 0.4) over the logits with its own
// `objective.weight` [xvector_output_dim, num_labels]: cross entropy of scale * (cos - margin at
// the label, cos elsewhere), cos between the L2-normalised logits and weight columns.
#include <ATen/CPUGeneratorImpl.h>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/audio_heads.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

constexpr double kAmScale = 30.0;
constexpr double kAmMargin = 0.4;

at::Tensor XvLinear(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::Linear(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"));
}

class Wav2Vec2XVector : public Wav2Vec2Classifier {
 public:
  Wav2Vec2XVector(ModelSpec spec, Wav2Vec2Recipe recipe)
      : Wav2Vec2Classifier(std::move(spec), std::move(recipe)) {
    const std::vector<int64_t>& dims = r_.tdnn_dim;
    AddLinear("projector", dims[0], r_.hidden);
    for (size_t i = 0; i < dims.size(); ++i) {
      const int64_t in = i == 0 ? dims[0] : dims[i - 1];
      AddLinear("tdnn." + std::to_string(i) + ".kernel", dims[i], in * r_.tdnn_kernel[i]);
    }
    AddLinear("feature_extractor", r_.xvector_dim, dims.back() * 2);
    AddLinear("classifier", r_.xvector_dim, r_.xvector_dim);
    Add("objective.weight", {r_.xvector_dim, r_.num_labels});
  }

  std::vector<std::string> OutputNames() const override { return {"logits", "embeddings"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor hs = XvLinear(w, "projector", States(w, inputs));
    for (size_t i = 0; i < r_.tdnn_dim.size(); ++i) hs = Tdnn(w, i, hs);
    // Statistic pooling without an attention mask: mean and std (unbiased) over the frames.
    at::Tensor stats = at::cat({hs.mean(1), hs.std(1, /*unbiased=*/true)}, -1);
    at::Tensor embeddings = XvLinear(w, "feature_extractor", stats);
    return {XvLinear(w, "classifier", embeddings), embeddings};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    at::Tensor logits = Forward(w, batch.inputs)[0];
    const at::Tensor labels = GetInput(batch.labels, "labels").flatten();
    at::Tensor weight = Normalize(GetWeight(w, "objective.weight"), 0);
    at::Tensor cos = nn::Matmul(Normalize(logits, 1), weight);
    at::Tensor onehot = at::one_hot(labels, r_.num_labels).to(at::kBool);
    return CrossEntropy(kAmScale * at::where(onehot, cos - kAmMargin, cos), labels);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    Batch batch;
    batch.inputs[InputName()] = InputValues(gen, batch_size);
    batch.labels["labels"] =
        at::randint(0, r_.num_labels, {batch_size}, gen, at::TensorOptions().dtype(at::kLong));
    return batch;
  }

 protected:
  // objective.weight is torch.randn (AMSoftmaxLoss.__init__), which post_init leaves as drawn.
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (name == "objective.weight") {
      t.normal_(0.0, 1.0, gen);
      return;
    }
    Wav2Vec2Classifier::InitWeight(name, t, gen);
  }

 private:
  // TDNNLayer i on [B, T, in]: frames t, t + d, ..., t + (k - 1) d concatenated (kernel-major, as
  // the Linear's weight viewed [out, k, in]), the kernel Linear, ReLU -> [B, T - (k - 1) d, out].
  at::Tensor Tdnn(const WeightMap& w, size_t i, const at::Tensor& x) const {
    const int64_t k = r_.tdnn_kernel[i], d = r_.tdnn_dilation[i];
    const int64_t out_len = x.size(1) - (k - 1) * d;
    std::vector<at::Tensor> taps;
    for (int64_t j = 0; j < k; ++j) taps.push_back(x.narrow(1, j * d, out_len));
    at::Tensor windows = k == 1 ? taps[0] : at::cat(taps, -1);
    return at::relu(XvLinear(w, "tdnn." + std::to_string(i) + ".kernel", windows));
  }

  // nn.functional.normalize(x, dim): x / max(||x||_2, 1e-12).
  static at::Tensor Normalize(const at::Tensor& x, int64_t dim) {
    return x / x.norm(2, at::IntArrayRef{dim}, /*keepdim=*/true).clamp_min(1e-12);
  }
};

}  // namespace

std::unique_ptr<Model> MakeWav2Vec2XVector(ModelSpec spec, Wav2Vec2Recipe recipe) {
  return std::make_unique<Wav2Vec2XVector>(std::move(spec), std::move(recipe));
}

}  // namespace ts::zoo::internal
