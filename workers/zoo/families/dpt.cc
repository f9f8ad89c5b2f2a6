// dpt (modeling_dpt.py, configuration_dpt.py; non-hybrid DPT on its own ViT): DPTModel
// (last_hidden_state after `layernorm`, pooler_output tanh(pooler.dense(token 0))),
// DPTForDepthEstimation and DPTForSemanticSegmentation (the ViT under `dpt.` without its pooler,
// the neck and heads of heads/dpt.h over the hidden states of backbone_out_indices). The trunk
// lives here (no other family uses it): ViT embeddings whose position table is resized
// bilinearly to the grid on every forward (DPTViTEmbeddings._resize_pos_embed), and DPTViTLayer,
// the ViT trunk's PreLnEncoder under transformers' 4.x names (encoder.layer.N.attention.attention
// .query ..., attention.output.dense, intermediate.dense, output.dense: VitV4EncoderNaming). The
// heads read the layers' outputs before the final layernorm, which transformers computes and drops:
// for them `dpt.layernorm` is a state_dict entry, not a weight, as is the fusion stage's
// never-called layer 0 residual_layer1.
//
// Refused, naming the field: is_hybrid (the BiT backbone), backbone_config / backbone (an
// AutoBackbone), add_projection (a fixed 256-channel conv), pooler_act other than tanh,
// pooler_output_size other than hidden_size, backbone_out_indices that are not distinct layers
// one per neck stage; for the segmentation class num_labels 1 and use_auxiliary_head false (each
// makes transformers' loss raise).
#include "workers/zoo/heads/dpt.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_transformer.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct DptConfig {
  VitConfig vit;
  std::vector<int64_t> out_indices;  // sorted
  DptNeckRecipe neck;
  int64_t ignore_index = 255;
  bool auxiliary = true;
  double auxiliary_weight = 0.4;
};

Status DptRefuseBackbones(const ConfigReader& r) {
  TS_ASSIGN_OR_RETURN(bool hybrid, r.Bool("is_hybrid", false));
  if (hybrid)
    return r.Error("is_hybrid", "DPT-hybrid (a BiT backbone) is not supported by the zoo");
  for (const char* f : {"backbone_config", "backbone"}) {
    if (r.Has(f)) return r.Error(f, "DPT over an AutoBackbone is not supported by the zoo");
  }
  TS_ASSIGN_OR_RETURN(bool projection, r.Bool("add_projection", false));
  if (projection) return r.Error("add_projection", "true is not supported by the zoo");
  return OkStatus();
}

StatusOr<std::vector<double>> DptFactors(const json& config, size_t n) {
  const std::string field = "reassemble_factors";
  std::vector<double> out = {4, 2, 1, 0.5};
  auto it = config.find(field);
  if (it != config.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgumentError(field + ": expected array of numbers");
    out.clear();
    for (const auto& v : *it) {
      if (!v.is_number() || !(v.get<double>() > 0))
        return InvalidArgumentError(field + ": expected positive numbers");
      out.push_back(v.get<double>());
    }
  }
  if (out.size() != n)
    return InvalidArgumentError(field + ": expected " + std::to_string(n) + " entries, got " +
                                std::to_string(out.size()));
  for (double f : out) {
    if (f > 1 && f != std::floor(f))
      return InvalidArgumentError(field + ": a factor above 1 must be an integer (a kernel size)");
  }
  return out;
}

StatusOr<DptConfig> ParseDpt(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  DptConfig c;
  json vit = config;
  if (!r.Has("image_size")) vit["image_size"] = 384;  // DPTConfig's default
  TS_ASSIGN_OR_RETURN(c.vit, ParseVitConfig(vit));
  TS_RETURN_IF_ERROR(DptRefuseBackbones(r));
  DptNeckRecipe& n = c.neck;
  n.hidden = c.vit.hidden_size;
  n.grid = c.vit.image_size / c.vit.patch_size;
  n.act = c.vit.hidden_act;
  TS_ASSIGN_OR_RETURN(n.neck_hidden_sizes,
                      IntList(config, "neck_hidden_sizes", {96, 192, 384, 768}));
  TS_RETURN_IF_ERROR(CheckAllPositive("neck_hidden_sizes", n.neck_hidden_sizes));
  const size_t stages = n.neck_hidden_sizes.size();
  if (stages == 0) return r.Error("neck_hidden_sizes", "must not be empty");
  TS_ASSIGN_OR_RETURN(n.reassemble_factors, DptFactors(config, stages));
  TS_ASSIGN_OR_RETURN(c.out_indices, IntList(config, "backbone_out_indices", {2, 5, 8, 11}));
  TS_RETURN_IF_ERROR(CheckLen("backbone_out_indices", c.out_indices, stages));
  std::sort(c.out_indices.begin(), c.out_indices.end());
  for (size_t i = 0; i < stages; ++i) {
    const int64_t v = c.out_indices[i];
    if (v < 0 || v >= c.vit.num_hidden_layers || (i > 0 && v == c.out_indices[i - 1]))
      return r.Error("backbone_out_indices", "expected distinct layers in [0, num_hidden_layers)");
  }
  TS_ASSIGN_OR_RETURN(std::string readout, r.String("readout_type", "project"));
  if (readout == "ignore") {
    n.readout = DptReadout::kIgnore;
  } else if (readout == "add") {
    n.readout = DptReadout::kAdd;
  } else if (readout == "project") {
    n.readout = DptReadout::kProject;
  } else {
    return r.Error("readout_type", "expected ignore, add or project, got '" + readout + "'");
  }
  TS_ASSIGN_OR_RETURN(n.fusion_hidden, PositiveInt(r, "fusion_hidden_size", 256));
  if (n.fusion_hidden < 2) return r.Error("fusion_hidden_size", "must be at least 2");
  TS_ASSIGN_OR_RETURN(n.head_in_index, r.Int("head_in_index", -1));
  const auto ns = static_cast<int64_t>(stages);
  if (n.head_in_index < -ns || n.head_in_index >= ns)
    return r.Error("head_in_index", "out of range for " + std::to_string(ns) + " fused maps");
  TS_ASSIGN_OR_RETURN(n.fusion_batch_norm, r.Bool("use_batch_norm_in_fusion_residual", false));
  TS_ASSIGN_OR_RETURN(n.fusion_bias, r.Bool("use_bias_in_fusion_residual", !n.fusion_batch_norm));
  TS_ASSIGN_OR_RETURN(c.auxiliary, r.Bool("use_auxiliary_head", true));
  TS_ASSIGN_OR_RETURN(c.auxiliary_weight, r.Double("auxiliary_loss_weight", 0.4));
  TS_ASSIGN_OR_RETURN(c.ignore_index, r.Int("semantic_loss_ignore_index", 255));
  TS_ASSIGN_OR_RETURN(int64_t pooler, r.Int("pooler_output_size", c.vit.hidden_size));
  if (pooler != c.vit.hidden_size)
    return r.Error("pooler_output_size", "only hidden_size is supported by the zoo");
  TS_ASSIGN_OR_RETURN(std::string pooler_act, r.String("pooler_act", "tanh"));
  if (pooler_act != "tanh") return r.Error("pooler_act", "only tanh is supported by the zoo");
  return c;
}

Status DptCheckSegmentation(const json& config, const DptConfig& c) {
  ConfigReader r(config);
  if (c.vit.num_labels < 2)
    return r.Error("num_labels", "DPTForSemanticSegmentation's loss needs at least 2 labels");
  if (!c.auxiliary)
    return r.Error("use_auxiliary_head",
                   "false is not supported: transformers' loss reads the auxiliary logits");
  return OkStatus();
}

// ViT's tiny width; one layer per neck stage, each read by the neck; neck widths / 16 (at least
// 8, multiples of 8); fusion 16 channels; the 32-pixel image of 8-pixel patches.
StatusOr<json> ScaleDpt(const json& config) {
  TS_ASSIGN_OR_RETURN(DptConfig c, ParseDpt(config));
  json vit = config;
  if (!vit.contains("image_size") || vit["image_size"].is_null()) vit["image_size"] = 384;
  TS_ASSIGN_OR_RETURN(json t, ScaleToTiny(vit, "vit"));
  const auto stages = static_cast<int64_t>(c.neck.neck_hidden_sizes.size());
  std::vector<int64_t> indices, widths;
  for (int64_t i = 0; i < stages; ++i) {
    indices.push_back(i);
    const int64_t w = (c.neck.neck_hidden_sizes[i] / 16 + 7) / 8 * 8;
    widths.push_back(std::max<int64_t>(w, 8));
  }
  t["num_hidden_layers"] = stages;
  t["backbone_out_indices"] = indices;
  t["neck_hidden_sizes"] = widths;
  t["fusion_hidden_size"] = 16;
  if (t.contains("pooler_output_size") && !t["pooler_output_size"].is_null())
    t["pooler_output_size"] = t["hidden_size"];
  TS_RETURN_IF_ERROR(ParseDpt(t).status());
  return t;
}

StatusOr<json> ScaleDptSegmentation(const json& config) {
  TS_ASSIGN_OR_RETURN(DptConfig c, ParseDpt(config));
  TS_RETURN_IF_ERROR(DptCheckSegmentation(config, c));
  return ScaleDpt(config);
}

// DPTViTEmbeddings, DPTViTEncoder and (for DPTModel) the final layernorm.
class DptTrunk : public VisionTrunk {
 public:
  DptTrunk(const DptConfig& c, std::string prefix, bool layernorm)
      : VisionTrunk(c.vit.num_channels, c.vit.image_size),
        c_(c),
        p_(std::move(prefix)),
        layernorm_(layernorm),
        grid_(c.vit.image_size / c.vit.patch_size) {
    const int64_t h = c.vit.hidden_size, im = c.vit.intermediate_size, ps = c.vit.patch_size;
    Add(p_ + "embeddings.cls_token", {1, 1, h});
    Add(p_ + "embeddings.position_embeddings", {1, grid_ * grid_ + 1, h});
    Add(p_ + "embeddings.patch_embeddings.projection.weight", {h, c.vit.num_channels, ps, ps});
    Add(p_ + "embeddings.patch_embeddings.projection.bias", {h});
    PreLnEncoderRecipe e{.hidden = h,
                         .intermediate = im,
                         .layers = c.vit.num_hidden_layers,
                         .heads = c.vit.num_attention_heads,
                         .act = c.vit.hidden_act,
                         .eps = c.vit.layer_norm_eps,
                         .qkv_bias = c.vit.qkv_bias,
                         .naming = VitV4EncoderNaming("encoder.layer.")};
    WeightList layers;
    encoder_.emplace(std::move(e), p_, layers);
    for (auto& [name, shape] : layers) Add(name, std::move(shape));
    if (layernorm_) {
      Add(p_ + "layernorm.weight", {h});
      Add(p_ + "layernorm.bias", {h});
    }
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    const int64_t b = pixel_values.size(0), h = c_.vit.hidden_size;
    // _resize_pos_embed: the grid's positions interpolated (bilinear, align_corners False) to the
    // image's grid, here the same size, as transformers runs it on every forward.
    const at::Tensor& pos = GetWeight(w, p_ + "embeddings.position_embeddings");
    at::Tensor grid = pos.select(0, 0).narrow(0, 1, grid_ * grid_);
    grid = grid.reshape({1, grid_, grid_, h}).permute({0, 3, 1, 2});
    grid = at::upsample_bilinear2d(grid, {grid_, grid_}, /*align_corners=*/false);
    grid = grid.permute({0, 2, 3, 1}).reshape({1, grid_ * grid_, h});
    at::Tensor positions = at::cat({pos.narrow(1, 0, 1), grid}, 1);
    at::Tensor x = nn::PatchEmbed(
        pixel_values, GetWeight(w, p_ + "embeddings.patch_embeddings.projection.weight"),
        GetWeight(w, p_ + "embeddings.patch_embeddings.projection.bias"), c_.vit.patch_size);
    x = at::cat({GetWeight(w, p_ + "embeddings.cls_token").expand({b, 1, h}), x}, 1) + positions;
    // hidden_states[i + 1] is layer i's output (DPTViTLayer: the 4.x ViTLayer).
    const std::vector<at::Tensor> states =
        encoder_->HiddenStates(w, x, at::Tensor(), c_.vit.num_hidden_layers);
    VisionFeatures f;
    for (int64_t i : c_.out_indices) f.stages.push_back(states[static_cast<size_t>(i) + 1]);
    x = states.back();
    if (layernorm_) {
      x = nn::LayerNorm(x, GetWeight(w, p_ + "layernorm.weight"),
                        GetWeight(w, p_ + "layernorm.bias"), c_.vit.layer_norm_eps);
    }
    f.last_hidden_state = x;
    f.pooled = x.select(1, 0);
    return f;
  }

  std::vector<int64_t> LastHiddenShape() const override {
    return {grid_ * grid_ + 1, c_.vit.hidden_size};
  }
  int64_t PooledWidth() const override { return c_.vit.hidden_size; }

 private:
  DptConfig c_;
  std::string p_;
  bool layernorm_;
  int64_t grid_;
  std::optional<PreLnEncoder> encoder_;  // built after the embeddings (weight order)
};

enum class DptHead { kModel, kDepth, kSegmentation };

decltype(ArchEntry::build) BuildDpt(DptHead head) {
  return [head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(DptConfig c, ParseDpt(spec.tiny_config));
    if (head == DptHead::kSegmentation)
      TS_RETURN_IF_ERROR(DptCheckSegmentation(spec.tiny_config, c));
    const bool base = head == DptHead::kModel;
    auto trunk = std::make_unique<DptTrunk>(c, base ? "" : "dpt.", base);
    std::unique_ptr<ImageHead> h;
    if (base) {
      h = ImageFeaturesHead({.tanh_pooler = true,
                             .width = c.vit.hidden_size,
                             .loss = FeatureLoss::kTargetAndZeroPooled,
                             .last_hidden_shape = trunk->LastHiddenShape()});
    } else if (head == DptHead::kDepth) {
      h = DptDepthHead(c.neck);
    } else {
      h = DptSegmentationHead({.neck = c.neck,
                               .num_labels = c.vit.num_labels,
                               .ignore_index = c.ignore_index,
                               .image_size = c.vit.image_size,
                               .auxiliary = c.auxiliary,
                               .auxiliary_weight = c.auxiliary_weight});
    }
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(h));
  };
}

// The heads' state_dict beyond their weights: dpt.layernorm (computed by transformers, read by
// nothing) and the fusion stage's layer 0 residual_layer1 (never called), with the BatchNorm
// counters of the latter.
void DptUnusedEntries(StateDictBuilder& sd) {
  const json& t = sd.model().spec().tiny_config;
  auto c = ParseDpt(t);
  if (!c.ok()) return;
  const int64_t h = c->vit.hidden_size;
  sd.AddUnused("dpt.layernorm.weight", {h});
  sd.AddUnused("dpt.layernorm.bias", {h});
  for (auto& [name, shape] : DptUnusedFusionEntries(c->neck)) {
    sd.AddUnused(name, shape);
    const std::string var = "running_var";
    if (name.size() > var.size() && name.compare(name.size() - var.size(), var.size(), var) == 0)
      sd.Add({name.substr(0, name.size() - var.size()) + "num_batches_tracked", {}, at::kLong, ""});
  }
}

std::vector<ArchEntry> DptArchs() {
  // Intel/dpt-large (the MiDaS v3 ViT-L/16 at 384 pixels).
  const json example = {{"model_type", "dpt"},
                        {"hidden_size", 1024},
                        {"num_hidden_layers", 24},
                        {"num_attention_heads", 16},
                        {"intermediate_size", 4096},
                        {"hidden_act", "gelu"},
                        {"hidden_dropout_prob", 0.0},
                        {"attention_probs_dropout_prob", 0.0},
                        {"initializer_range", 0.02},
                        {"layer_norm_eps", 1e-12},
                        {"image_size", 384},
                        {"patch_size", 16},
                        {"num_channels", 3},
                        {"is_hybrid", false},
                        {"qkv_bias", true},
                        {"backbone_out_indices", {5, 11, 17, 23}},
                        {"readout_type", "project"},
                        {"reassemble_factors", {4, 2, 1, 0.5}},
                        {"neck_hidden_sizes", {256, 512, 1024, 1024}},
                        {"fusion_hidden_size", 256},
                        {"head_in_index", -1},
                        {"use_batch_norm_in_fusion_residual", false},
                        {"add_projection", false}};
  // Intel/dpt-large-ade (ADE20k's 150 labels; its fusion residuals use BatchNorm).
  json ade = example;
  ade["num_labels"] = 150;
  ade["use_batch_norm_in_fusion_residual"] = true;
  ade["use_auxiliary_head"] = true;
  ade["auxiliary_loss_weight"] = 0.4;
  ade["semantic_loss_ignore_index"] = 255;
  ArchEntry depth = {{"DPTForDepthEstimation", "dpt", "depth-estimation"},
                     WithArchitecture(example, "DPTForDepthEstimation"),
                     ScaleDpt,
                     BuildDpt(DptHead::kDepth)};
  depth.state_dict.extra = DptUnusedEntries;
  ArchEntry segmentation = {{"DPTForSemanticSegmentation", "dpt", "image-segmentation"},
                            WithArchitecture(ade, "DPTForSemanticSegmentation"),
                            ScaleDptSegmentation,
                            BuildDpt(DptHead::kSegmentation)};
  segmentation.state_dict.extra = DptUnusedEntries;
  return {{{"DPTModel", "dpt", "image-feature-extraction"},
           WithArchitecture(example, "DPTModel"),
           ScaleDpt,
           BuildDpt(DptHead::kModel)},
          std::move(depth),
          std::move(segmentation)};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Dpt, DptArchs);

}  // namespace ts::zoo::internal
