// CLIP: CLIPModel, CLIPTextModel, CLIPVisionModel. Config -> recipe (trunks/multimodal.h)
// and the example configs.
#include <algorithm>
#include <functional>
#include <optional>

#include "workers/zoo/families/clip.h"

#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {

using json = nlohmann::json;

StatusOr<ClipTowerRecipe> ParseClipTower(const json& j, const std::string& prefix, bool text) {
  if (!j.is_object())
    return InvalidArgumentError(prefix.substr(0, prefix.size() - 1) + ": expected object");
  ConfigReader r(j, prefix);
  ClipTowerRecipe t;
  auto positive = [&](const std::string& f, int64_t& out, std::optional<int64_t> def) -> Status {
    StatusOr<int64_t> v = def ? r.Int(f, *def) : r.Int(f);
    if (!v.ok()) return v.status();
    if (*v <= 0) return r.Error(f, "must be positive, got " + std::to_string(*v));
    out = *v;
    return OkStatus();
  };
  TS_RETURN_IF_ERROR(positive("hidden_size", t.hidden, text ? 512 : 768));
  TS_RETURN_IF_ERROR(positive("intermediate_size", t.intermediate, text ? 2048 : 3072));
  TS_RETURN_IF_ERROR(positive("num_hidden_layers", t.layers, 12));
  TS_RETURN_IF_ERROR(positive("num_attention_heads", t.heads, text ? 8 : 12));
  if (t.hidden % t.heads != 0) {
    return r.Error("num_attention_heads", "must divide hidden_size (" + std::to_string(t.hidden) +
                                              " % " + std::to_string(t.heads) + " != 0)");
  }
  TS_ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", "quick_gelu"));
  TS_ASSIGN_OR_RETURN(t.act, ParseActivation(act, r.Name("hidden_act")));
  TS_ASSIGN_OR_RETURN(t.eps, r.Double("layer_norm_eps", 1e-5));
  if (text) {
    TS_RETURN_IF_ERROR(positive("vocab_size", t.vocab, 49408));
    TS_RETURN_IF_ERROR(positive("max_position_embeddings", t.max_pos, 77));
    TS_ASSIGN_OR_RETURN(t.eos, r.Int("eos_token_id", 2));
  } else {
    TS_RETURN_IF_ERROR(positive("image_size", t.image, 224));
    TS_RETURN_IF_ERROR(positive("patch_size", t.patch, 32));
    TS_RETURN_IF_ERROR(positive("num_channels", t.channels, 3));
    if (t.image % t.patch != 0) {
      return r.Error("patch_size", "must divide image_size (" + std::to_string(t.image) + " % " +
                                       std::to_string(t.patch) + " != 0)");
    }
  }
  return t;
}

void ScaleClipTower(json& t, const ClipTowerRecipe& c, bool text) {
  ScaleEncoderWidth(t, c.heads, c.hidden, c.intermediate, c.layers);
  if (text) {
    const int64_t vocab = std::min(c.vocab, TinyProfile::kVocab);
    t["vocab_size"] = vocab;
    for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id"}) MapTokenId(t, f, vocab);
    t["max_position_embeddings"] = std::min<int64_t>(c.max_pos, 2 * kClipTextLen);
  } else {
    t["image_size"] = TinyProfile::kImageSize;
    t["patch_size"] = TinyProfile::kPatchSize;
  }
}

namespace {

StatusOr<ClipRecipe> ParseClip(const json& config, ClipKind kind) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ClipRecipe c;
  c.kind = kind;
  if (kind == ClipKind::kText) {
    TS_ASSIGN_OR_RETURN(c.text, ParseClipTower(config, "", true));
    return c;
  }
  if (kind == ClipKind::kVision) {
    TS_ASSIGN_OR_RETURN(c.vision, ParseClipTower(config, "", false));
    return c;
  }
  ConfigReader r(config);
  auto sub = [&](const char* f) -> json {
    auto it = config.find(f);
    return it == config.end() || it->is_null() ? json::object() : *it;
  };
  TS_ASSIGN_OR_RETURN(c.text, ParseClipTower(sub("text_config"), "text_config.", true));
  TS_ASSIGN_OR_RETURN(c.vision, ParseClipTower(sub("vision_config"), "vision_config.", false));
  c.text.prefix = "text_model.";
  c.vision.prefix = "vision_model.";
  TS_ASSIGN_OR_RETURN(c.projection_dim, r.Int("projection_dim", 512));
  if (c.projection_dim <= 0) return r.Error("projection_dim", "must be positive");
  TS_ASSIGN_OR_RETURN(c.logit_scale_init, r.Double("logit_scale_init_value", 2.6592));
  if (kind == ClipKind::kImageClassification) {
    TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  }
  return c;
}

std::function<StatusOr<json>(const json&)> ClipScale(ClipKind kind) {
  return [kind](const json& config) -> StatusOr<json> {
    TS_ASSIGN_OR_RETURN(ClipRecipe c, ParseClip(config, kind));
    json t = config;
    if (kind == ClipKind::kText) {
      ScaleClipTower(t, c.text, true);
    } else if (kind == ClipKind::kVision) {
      ScaleClipTower(t, c.vision, false);
    } else {
      if (!t.contains("text_config") || !t["text_config"].is_object())
        t["text_config"] = json::object();
      if (!t.contains("vision_config") || !t["vision_config"].is_object())
        t["vision_config"] = json::object();
      ScaleClipTower(t["text_config"], c.text, true);
      ScaleClipTower(t["vision_config"], c.vision, false);
      t["projection_dim"] = std::min<int64_t>(c.projection_dim, 32);
      if (kind == ClipKind::kImageClassification) ScaleLabels(t, c.num_labels);
    }
    const bool vision = kind == ClipKind::kVision || kind == ClipKind::kImageClassification;
    SetTinyRunProfile(t, vision ? 17 : kClipTextLen);
    return t;
  };
}

decltype(ArchEntry::build) ClipBuild(ClipKind kind) {
  return [kind](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(ClipRecipe c, ParseClip(spec.tiny_config, kind));
    if (kind == ClipKind::kImageClassification) {
      // transformers' CLIPForImageClassification: logits = classifier(mean(last_hidden_state
      // [:, 1:])), last_hidden_state being the encoder's output before post_layernorm.
      auto trunk = std::make_unique<ClipVisionTrunk>(c.vision);
      ImageClassifierRecipe head;
      head.num_labels = c.num_labels;
      head.width = c.vision.hidden;
      head.flatten = false;
      head.mean_patches = true;
      return MakeVisionModel(std::move(spec), std::move(trunk),
                             ImageClassificationHead(std::move(head)));
    }
    if (kind != ClipKind::kVision) return MakeClipModel(std::move(spec), std::move(c));
    auto trunk = std::make_unique<ClipVisionTrunk>(c.vision);
    auto head = ImageFeaturesHead({/*tanh_pooler=*/false, trunk->PooledWidth(),
                                   FeatureLoss::kTargetAndZeroPooled, trunk->LastHiddenShape()});
    return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
  };
}

}  // namespace

std::vector<ArchEntry> ClipArchs() {
  // Modelled on openai/clip-vit-base-patch32.
  const json text = {{"hidden_size", 512},
                     {"intermediate_size", 2048},
                     {"num_attention_heads", 8},
                     {"num_hidden_layers", 12},
                     {"max_position_embeddings", 77},
                     {"vocab_size", 49408},
                     {"hidden_act", "quick_gelu"},
                     {"layer_norm_eps", 1e-5},
                     {"bos_token_id", 0},
                     {"eos_token_id", 2},
                     {"pad_token_id", 1},
                     {"projection_dim", 512}};
  const json vision = {{"hidden_size", 768},        {"intermediate_size", 3072},
                       {"num_attention_heads", 12}, {"num_hidden_layers", 12},
                       {"image_size", 224},         {"patch_size", 32},
                       {"num_channels", 3},         {"hidden_act", "quick_gelu"},
                       {"layer_norm_eps", 1e-5},    {"projection_dim", 512}};
  json model = {{"architectures", {"CLIPModel"}}, {"model_type", "clip"},
                {"projection_dim", 512},          {"logit_scale_init_value", 2.6592},
                {"initializer_factor", 1.0},      {"text_config", text},
                {"vision_config", vision}};
  json classify = model;
  classify["architectures"] = {"CLIPForImageClassification"};
  classify["num_labels"] = 2;
  json text_model = text;
  text_model["architectures"] = {"CLIPTextModel"};
  text_model["model_type"] = "clip_text_model";
  json vision_model = vision;
  vision_model["architectures"] = {"CLIPVisionModel"};
  vision_model["model_type"] = "clip_vision_model";
  return {
      {{"CLIPModel", "clip", "zero-shot-image-classification"},
       model,
       ClipScale(ClipKind::kModel),
       ClipBuild(ClipKind::kModel)},
      {{"CLIPForImageClassification", "clip", "image-classification"},
       classify,
       ClipScale(ClipKind::kImageClassification),
       ClipBuild(ClipKind::kImageClassification)},
      {{"CLIPTextModel", "clip_text_model", "feature-extraction"},
       text_model,
       ClipScale(ClipKind::kText),
       ClipBuild(ClipKind::kText)},
      {{"CLIPVisionModel", "clip_vision_model", "feature-extraction"},
       vision_model,
       ClipScale(ClipKind::kVision),
       ClipBuild(ClipKind::kVision)},
  };
}

TS_ZOO_REGISTER_FAMILY(Clip, ClipArchs);

}  // namespace ts::zoo::internal
