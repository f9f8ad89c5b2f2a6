// The vision-language kind (trunks/vision_language.h).
#include "workers/zoo/trunks/vision_language.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/decoder_model.h"

namespace ts::zoo::internal {
namespace {

class VisionLanguageModel : public Model {
 public:
  VisionLanguageModel(ModelSpec spec, VisionLanguageRecipe r)
      : Model(std::move(spec)), r_(std::move(r)) {
    r_.vision.prefix = r_.base + "vision_tower.";
    vision_.emplace(r_.vision);
    // Only what hidden_states[vision_feature_layer] reads: the layers after it and
    // post_layernorm get no gradient, so they are state_dict entries (llava.cc), not weights.
    for (const auto& [n, s] : vision_->Weights()) {
      if (VisionTowerReads(r_, n)) shapes_.emplace_back(n, s);
    }
    proj_ = r_.base + "multi_modal_projector.";
    const int64_t hv = r_.vision.hidden * static_cast<int64_t>(r_.FeatureIndices().size());
    const int64_t ht = r_.text.hidden;
    if (r_.projector_norm) {
      shapes_.emplace_back(proj_ + "projector_layernorm.weight", std::vector<int64_t>{hv});
      shapes_.emplace_back(proj_ + "projector_layernorm.bias", std::vector<int64_t>{hv});
    }
    shapes_.emplace_back(proj_ + "linear_1.weight", std::vector<int64_t>{ht, hv});
    if (r_.projector_bias) shapes_.emplace_back(proj_ + "linear_1.bias", std::vector<int64_t>{ht});
    shapes_.emplace_back(proj_ + "linear_2.weight", std::vector<int64_t>{ht, ht});
    if (r_.projector_bias) shapes_.emplace_back(proj_ + "linear_2.bias", std::vector<int64_t>{ht});
    if (r_.grid_h > 0) {
      newline_ = r_.base + "image_newline";
      shapes_.emplace_back(newline_, std::vector<int64_t>{ht});
    }
    decoder::Recipe text = r_.text;
    text.n.head_base = r_.base + "language_model.";
    text.n.model_base = "language_model.";
    text.image_token = r_.image_token;
    ModelSpec lm = this->spec();
    lm.tiny_config = this->spec().tiny_config.value("text_config", nlohmann::json::object());
    if (this->spec().tiny_config.contains("touchstone_tiny"))
      lm.tiny_config["touchstone_tiny"] = this->spec().tiny_config["touchstone_tiny"];
    lm_ = std::make_unique<decoder::DecoderModel>(std::move(lm), std::move(text), r_.head);
    for (const auto& [n, s] : lm_->WeightShapes()) shapes_.emplace_back(n, s);
  }

  WeightShapeList WeightShapes() const override { return shapes_; }

  std::vector<std::string> OutputNames() const override {
    std::vector<std::string> names = lm_->OutputNames();
    names.push_back("image_hidden_states");
    return names;
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor image = ImageFeatures(w, GetInput(inputs, "pixel_values"));
    // LLaVA-NeXT's image_hidden_states: the packed features of every image, concatenated.
    if (r_.grid_h > 0) image = image.reshape({-1, image.size(-1)});
    std::vector<at::Tensor> out = lm_->Forward(w, WithImage(inputs, image));
    out.push_back(image);
    return out;
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    const at::Tensor image = ImageFeatures(w, GetInput(batch.inputs, "pixel_values"));
    Batch lm_batch;
    lm_batch.inputs = WithImage(batch.inputs, image);
    lm_batch.labels = batch.labels;
    return lm_->Loss(w, lm_batch);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    Batch batch = lm_->MakeBatch(seed, batch_size);
    at::Tensor& ids = batch.inputs.at("input_ids");
    const int64_t b = ids.size(0), n = r_.ImageTokens(), vocab = r_.text.vocab;
    // Text tokens never hold the image id; the image's tokens follow token 0, as a processor
    // expands "<image>" after the bos token.
    ids = ids.masked_fill(ids.eq(r_.image_token), (r_.image_token + 1) % vocab);
    ids.narrow(1, 1, n).fill_(r_.image_token);
    auto labels = batch.labels.find("labels");
    if (labels != batch.labels.end() && labels->second.dim() == 2)
      labels->second.narrow(1, 1, n).fill_(-100);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x1a9e5ull);
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    if (r_.grid_h == 0) {
      batch.inputs["pixel_values"] =
          at::randn({b, r_.vision.channels, r_.vision.image, r_.vision.image}, gen, fopts);
      return batch;
    }
    batch.inputs["pixel_values"] = at::randn(
        {b, 1 + r_.grid_h * r_.grid_w, r_.vision.channels, r_.vision.image, r_.vision.image}, gen,
        fopts);
    batch.inputs["image_sizes"] =
        at::tensor({r_.image_h, r_.image_w}, at::TensorOptions().dtype(at::kLong)).repeat({b, 1});
    return batch;
  }

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (vision_->InitWeight(name, t, gen)) return;
    if (name.rfind(r_.base + "vision_tower.", 0) == 0 || name.rfind(proj_, 0) == 0 ||
        name == newline_) {
      Model::InitWeight(name, t, gen);
      return;
    }
    lm_->InitOwnWeight(name, t, gen);
  }

 private:
  // LlavaModel.get_image_features: hidden_states[vision_feature_layer] of the tower, without
  // the cls token under "default", through the projector (linear_1, act, linear_2); one row per
  // image token, [B * tokens, text hidden] flattened as masked_scatter reads them.
  at::Tensor ImageFeatures(const WeightMap& w, const at::Tensor& pixels) const {
    if (r_.grid_h > 0) return Pack(w, Project(w, TowerFeatures(w, pixels.flatten(0, 1))),
                                   pixels.size(0));
    return Project(w, TowerFeatures(w, pixels));
  }

  // LlavaNextModel.pack_image_features over f [B * (1 + tiles), N, D] (unpad_image a no-op at
  // the batches' image size): per image the base view's N rows, then the tiles' features as
  // [D, grid_h * side, grid_w * side] with image_newline appended to each row, row-major.
  at::Tensor Pack(const WeightMap& w, const at::Tensor& f, int64_t b) const {
    const int64_t side = r_.vision.image / r_.vision.patch, d = f.size(-1);
    const int64_t tiles = r_.grid_h * r_.grid_w, rows = r_.grid_h * side;
    const at::Tensor all = f.reshape({b, 1 + tiles, side * side, d});
    at::Tensor grid = all.narrow(1, 1, tiles)
                          .reshape({b, r_.grid_h, r_.grid_w, side, side, d})
                          .permute({0, 5, 1, 3, 2, 4})
                          .reshape({b, d, rows, r_.grid_w * side});
    const at::Tensor nl = GetWeight(w, newline_).view({1, d, 1, 1}).expand({b, d, rows, 1});
    grid = at::cat({grid, nl.to(grid.scalar_type())}, -1);
    return at::cat({all.select(1, 0), grid.flatten(2).transpose(1, 2)}, 1);
  }

  // The projector over the tower's features (projector_layernorm first under VipLLaVA).
  at::Tensor Project(const WeightMap& w, at::Tensor f) const {
    if (r_.projector_norm) {
      f = nn::LayerNorm(f, GetWeight(w, proj_ + "projector_layernorm.weight"),
                        GetWeight(w, proj_ + "projector_layernorm.bias"), r_.projector_norm_eps);
    }
    f = nn::Linear(f, GetWeight(w, proj_ + "linear_1.weight"),
                   GetOptionalWeight(w, r_.projector_bias ? proj_ + "linear_1.bias" : ""));
    f = nn::Activate(f, r_.projector_act);
    return nn::Linear(f, GetWeight(w, proj_ + "linear_2.weight"),
                      GetOptionalWeight(w, r_.projector_bias ? proj_ + "linear_2.bias" : ""));
  }

  // The selected hidden state(s) without the cls token under "default"; VipLLaVA's several
  // layers concatenated on the feature axis, the tower run once.
  at::Tensor TowerFeatures(const WeightMap& w, const at::Tensor& pixels) const {
    auto cut = [&](at::Tensor f) { return r_.drop_cls ? f.narrow(1, 1, f.size(1) - 1) : f; };
    if (r_.feature_layers.empty()) return cut(vision_->HiddenState(w, pixels, r_.feature_layer));
    const std::vector<at::Tensor> states =
        vision_->HiddenStates(w, pixels, r_.TowerLayersRun());
    std::vector<at::Tensor> picked;
    for (int64_t i : r_.FeatureIndices()) picked.push_back(cut(states[static_cast<size_t>(i)]));
    return at::cat(picked, -1);
  }

  static TensorMap WithImage(const TensorMap& inputs, const at::Tensor& image) {
    TensorMap lm;
    for (const char* k : {"input_ids", "attention_mask"}) {
      auto it = inputs.find(k);
      if (it != inputs.end()) lm[k] = it->second;
    }
    lm["image_embeds"] = image.reshape({-1, image.size(-1)});
    return lm;
  }

  VisionLanguageRecipe r_;
  std::optional<ClipVisionTrunk> vision_;
  std::string proj_, newline_;
  std::unique_ptr<decoder::DecoderModel> lm_;
  WeightShapeList shapes_;
};

}  // namespace

std::vector<int64_t> VisionLanguageRecipe::FeatureIndices() const {
  std::vector<int64_t> out;
  for (int64_t l : feature_layers.empty() ? std::vector<int64_t>{feature_layer} : feature_layers)
    out.push_back(l < 0 ? vision.layers + 1 + l : l);
  return out;
}

int64_t VisionLanguageRecipe::TowerLayersRun() const {
  const std::vector<int64_t> indices = FeatureIndices();
  return *std::max_element(indices.begin(), indices.end());
}

bool VisionTowerReads(const VisionLanguageRecipe& r, const std::string& name) {
  const std::string& p = r.vision.prefix;
  if (name.rfind(p, 0) != 0) return true;
  const std::string rest = name.substr(p.size());
  if (rest.rfind("post_layernorm.", 0) == 0) return false;
  const std::string layers = "encoder.layers.";
  if (rest.rfind(layers, 0) != 0) return true;
  return std::stoll(rest.substr(layers.size())) < r.TowerLayersRun();
}

int64_t VisionLanguageRecipe::ImageTokens() const {
  const int64_t side = vision.image / vision.patch;
  const int64_t view = side * side + (drop_cls ? 0 : 1);
  if (grid_h == 0) return view;
  return view + grid_h * side * (grid_w * side + 1);
}

StatusOr<std::unique_ptr<Model>> BuildVisionLanguageModel(ModelSpec spec,
                                                          VisionLanguageRecipe recipe) {
  return std::unique_ptr<Model>(
      std::make_unique<VisionLanguageModel>(std::move(spec), std::move(recipe)));
}

}  // namespace ts::zoo::internal
