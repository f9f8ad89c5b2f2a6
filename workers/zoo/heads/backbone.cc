// The backbone head (heads/image_head.h): a trunk's last stage as a feature map.
#include <ATen/CPUGeneratorImpl.h>

#include <string>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

class Backbone : public ImageHead {
 public:
  explicit Backbone(BackboneRecipe r) : r_(std::move(r)) {
    if (!r_.norm.empty()) {
      Add(r_.norm + ".weight", {r_.map_shape[0]});
      Add(r_.norm + ".bias", {r_.map_shape[0]});
    }
  }

  std::vector<std::string> OutputNames() const override { return {"feature_maps"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const VisionFeatures& f) const override {
    const at::Tensor& h = f.last_hidden_state;
    if (r_.prefix_tokens < 0 && !r_.norm.empty()) {  // LayerNorm over the channels of NCHW
      return {nn::LayerNorm(h.permute({0, 2, 3, 1}), GetWeight(w, r_.norm + ".weight"),
                            GetWeight(w, r_.norm + ".bias"), 1e-6)
                  .permute({0, 3, 1, 2})};
    }
    if (r_.prefix_tokens < 0) return {h};
    // hidden_state[:, prefix:].reshape(B, grid, grid, C).permute(0, 3, 1, 2)
    at::Tensor patches = h.narrow(1, r_.prefix_tokens, h.size(1) - r_.prefix_tokens);
    return {patches.reshape({h.size(0), r_.grid, r_.grid, h.size(2)}).permute({0, 3, 1, 2})};
  }

  at::Tensor Loss(const std::vector<at::Tensor>& out, const TensorMap& labels) const override {
    return (out[0] - GetInput(labels, "target").to(out[0].scalar_type())).pow(2).mean();
  }

  void AddLabels(at::Generator& gen, int64_t batch_size, TensorMap& labels) const override {
    std::vector<int64_t> shape = {batch_size};
    shape.insert(shape.end(), r_.map_shape.begin(), r_.map_shape.end());
    labels["target"] = at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat));
  }

 private:
  BackboneRecipe r_;
};

}  // namespace

std::unique_ptr<ImageHead> BackboneHead(BackboneRecipe recipe) {
  return std::make_unique<Backbone>(std::move(recipe));
}

Status CheckLastStageBackbone(const nlohmann::json& config, int64_t stages) {
  ConfigReader r(config);
  const std::string last = "stage" + std::to_string(stages);
  if (r.Has("out_features")) {
    const nlohmann::json& f = config["out_features"];
    if (!f.is_array() || f.size() != 1 || f[0] != last)
      return r.Error("out_features", "only [\"" + last + "\"] (the last stage) is supported");
  }
  if (r.Has("out_indices")) {
    const nlohmann::json& f = config["out_indices"];
    if (!f.is_array() || f.size() != 1 || !f[0].is_number_integer() ||
        (f[0].get<int64_t>() != stages && f[0].get<int64_t>() != -1))
      return r.Error("out_indices", "only the last stage is supported");
  }
  return OkStatus();
}

}  // namespace ts::zoo::internal
