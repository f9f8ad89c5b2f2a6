// Zoo: multimodal families (README.md): CLIP (CLIPModel, CLIPTextModel, CLIPVisionModel).
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <tuple>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using P = TinyProfile;
using json = nlohmann::json;
using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

struct ClipTower {
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0;
  Activation act = Activation::kQuickGelu;
  double eps = 1e-5;
  // text
  int64_t vocab = 0, max_pos = 77, eos = 2;
  // vision
  int64_t image = 224, patch = 32, channels = 3;
};

StatusOr<ClipTower> ParseTower(const json& j, const std::string& prefix, bool text) {
  if (!j.is_object()) return InvalidArgumentError(prefix.substr(0, prefix.size() - 1) + ": expected object");
  ConfigReader r(j, prefix);
  ClipTower t;
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

enum class ClipKind { kModel, kText, kVision };

struct ClipConfig {
  ClipKind kind = ClipKind::kModel;
  ClipTower text, vision;
  int64_t projection_dim = 512;
  double logit_scale_init = 2.6592;
};

StatusOr<ClipConfig> ParseClip(const json& config, ClipKind kind) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ClipConfig c;
  c.kind = kind;
  if (kind == ClipKind::kText) {
    TS_ASSIGN_OR_RETURN(c.text, ParseTower(config, "", true));
    return c;
  }
  if (kind == ClipKind::kVision) {
    TS_ASSIGN_OR_RETURN(c.vision, ParseTower(config, "", false));
    return c;
  }
  ConfigReader r(config);
  auto sub = [&](const char* f) -> json {
    auto it = config.find(f);
    return it == config.end() || it->is_null() ? json::object() : *it;
  };
  TS_ASSIGN_OR_RETURN(c.text, ParseTower(sub("text_config"), "text_config.", true));
  TS_ASSIGN_OR_RETURN(c.vision, ParseTower(sub("vision_config"), "vision_config.", false));
  TS_ASSIGN_OR_RETURN(c.projection_dim, r.Int("projection_dim", 512));
  if (c.projection_dim <= 0) return r.Error("projection_dim", "must be positive");
  TS_ASSIGN_OR_RETURN(c.logit_scale_init, r.Double("logit_scale_init_value", 2.6592));
  return c;
}

constexpr int64_t kTextLen = 16;

void ScaleTower(json& t, const ClipTower& c, bool text) {
  const int64_t heads = std::min(c.heads, P::kHeads);
  const int64_t hidden = heads * (P::kHidden / P::kHeads);
  t["hidden_size"] = hidden;
  t["num_attention_heads"] = heads;
  t["intermediate_size"] = ScaleRatio(c.intermediate, c.hidden, hidden, 8);
  t["num_hidden_layers"] = TinyDepth(c.layers, false);
  if (text) {
    const int64_t vocab = std::min(c.vocab, P::kVocab);
    t["vocab_size"] = vocab;
    for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id"}) MapTokenId(t, f, vocab);
    t["max_position_embeddings"] = std::min<int64_t>(c.max_pos, 2 * kTextLen);
  } else {
    t["image_size"] = P::kImageSize;
    t["patch_size"] = P::kPatchSize;
  }
}

std::function<StatusOr<json>(const json&)> ClipScale(ClipKind kind) {
  return [kind](const json& config) -> StatusOr<json> {
    TS_ASSIGN_OR_RETURN(ClipConfig c, ParseClip(config, kind));
    json t = config;
    if (kind == ClipKind::kText) {
      ScaleTower(t, c.text, true);
    } else if (kind == ClipKind::kVision) {
      ScaleTower(t, c.vision, false);
    } else {
      if (!t.contains("text_config") || !t["text_config"].is_object()) t["text_config"] = json::object();
      if (!t.contains("vision_config") || !t["vision_config"].is_object()) t["vision_config"] = json::object();
      ScaleTower(t["text_config"], c.text, true);
      ScaleTower(t["vision_config"], c.vision, false);
      t["projection_dim"] = std::min<int64_t>(c.projection_dim, 32);
    }
    SetTinyRunProfile(t, kind == ClipKind::kVision ? 17 : kTextLen);
    return t;
  };
}

struct EncLayer {
  std::string p;
};

class ClipModel : public Model {
 public:
  ClipModel(ModelSpec spec, ClipConfig c) : Model(std::move(spec)), c_(std::move(c)) {
    if (c_.kind != ClipKind::kVision) AddTower("text_model.", c_.text, true);
    if (c_.kind != ClipKind::kText) AddTower("vision_model.", c_.vision, false);
    if (c_.kind == ClipKind::kModel) {
      Add("visual_projection.weight", {c_.projection_dim, c_.vision.hidden});
      Add("text_projection.weight", {c_.projection_dim, c_.text.hidden});
      Add("logit_scale", {});
    }
  }

  Shapes WeightShapes() const override { return shapes_; }
  std::vector<std::string> OutputNames() const override {
    if (c_.kind == ClipKind::kModel) return {"logits_per_image", "logits_per_text", "text_embeds", "image_embeds"};
    return {"last_hidden_state", "pooler_output"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor text_last, text_pooled, vis_last, vis_pooled;
    if (c_.kind != ClipKind::kVision) {
      std::tie(text_last, text_pooled) = Text(w, GetInput(inputs, "input_ids"),
                                              GetOptionalInput(inputs, "attention_mask"));
      if (c_.kind == ClipKind::kText) return {text_last, text_pooled};
    }
    std::tie(vis_last, vis_pooled) = Vision(w, GetInput(inputs, "pixel_values"));
    if (c_.kind == ClipKind::kVision) return {vis_last, vis_pooled};
    at::Tensor img = nn::Linear(vis_pooled, GetWeight(w, "visual_projection.weight"));
    at::Tensor txt = nn::Linear(text_pooled, GetWeight(w, "text_projection.weight"));
    img = img / img.norm(2, {-1}, /*keepdim=*/true);
    txt = txt / txt.norm(2, {-1}, /*keepdim=*/true);
    at::Tensor logits_per_text = nn::Matmul(txt, img.t()) * GetWeight(w, "logit_scale").exp();
    return {logits_per_text.t(), logits_per_text, txt, img};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    if (c_.kind != ClipKind::kModel) {
      const at::Tensor& target = GetInput(batch.labels, "target");
      return (out[0] - target.to(out[0].scalar_type())).pow(2).mean() + out[1].pow(2).mean();
    }
    const at::Tensor& lt = out[1];
    at::Tensor labels = at::arange(lt.size(0), lt.options().dtype(at::kLong));
    return (CrossEntropy(lt, labels) + CrossEntropy(lt.t(), labels)) / 2;
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    Batch batch;
    if (c_.kind != ClipKind::kVision) {
      const int64_t s = std::min(kTextLen, c_.text.max_pos);
      const int64_t v = c_.text.vocab;
      // Token ids below the last id; the sequence end (last attended token) is the largest id,
      // which the legacy CLIP pooling finds by argmax.
      at::Tensor ids = at::randint(0, std::max<int64_t>(v - 1, 1), {batch_size, s}, gen, lopts);
      at::Tensor mask = MakeAttentionMask(batch_size, s);
      for (int64_t b = 0; b < batch_size; ++b) {
        const int64_t len = mask[b].sum().item<int64_t>();
        ids[b][len - 1] = v - 1;
        if (len < s) ids[b].narrow(0, len, s - len).fill_(0);
      }
      batch.inputs["input_ids"] = ids;
      batch.inputs["attention_mask"] = mask;
      if (c_.kind == ClipKind::kText) batch.labels["target"] = at::randn({batch_size, s, c_.text.hidden}, gen, fopts);
    }
    if (c_.kind != ClipKind::kText) {
      const ClipTower& t = c_.vision;
      batch.inputs["pixel_values"] = at::randn({batch_size, t.channels, t.image, t.image}, gen, fopts);
      const int64_t n = (t.image / t.patch) * (t.image / t.patch) + 1;
      if (c_.kind == ClipKind::kVision) batch.labels["target"] = at::randn({batch_size, n, t.hidden}, gen, fopts);
    }
    return batch;
  }

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (name == "logit_scale") {
      t.fill_(c_.logit_scale_init);
      return;
    }
    if (name == "vision_model.embeddings.class_embedding") {
      t.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(t.size(0))), gen);
      return;
    }
    Model::InitWeight(name, t, gen);
  }

 private:
  std::string Add(const std::string& name, std::vector<int64_t> shape) {
    shapes_.emplace_back(name, std::move(shape));
    return name;
  }
  void AddTower(const std::string& p, const ClipTower& t, bool text) {
    const int64_t h = t.hidden;
    if (text) {
      Add(p + "embeddings.token_embedding.weight", {t.vocab, h});
      Add(p + "embeddings.position_embedding.weight", {t.max_pos, h});
    } else {
      const int64_t n = (t.image / t.patch) * (t.image / t.patch) + 1;
      Add(p + "embeddings.class_embedding", {h});
      Add(p + "embeddings.patch_embedding.weight", {h, t.channels, t.patch, t.patch});
      Add(p + "embeddings.position_embedding.weight", {n, h});
      Add(p + "pre_layrnorm.weight", {h});
      Add(p + "pre_layrnorm.bias", {h});
    }
    for (int64_t i = 0; i < t.layers; ++i) {
      const std::string lp = p + "encoder.layers." + std::to_string(i) + ".";
      for (const char* proj : {"k_proj", "v_proj", "q_proj", "out_proj"}) {
        Add(lp + "self_attn." + proj + ".weight", {h, h});
        Add(lp + "self_attn." + proj + ".bias", {h});
      }
      Add(lp + "layer_norm1.weight", {h});
      Add(lp + "layer_norm1.bias", {h});
      Add(lp + "mlp.fc1.weight", {t.intermediate, h});
      Add(lp + "mlp.fc1.bias", {t.intermediate});
      Add(lp + "mlp.fc2.weight", {h, t.intermediate});
      Add(lp + "mlp.fc2.bias", {h});
      Add(lp + "layer_norm2.weight", {h});
      Add(lp + "layer_norm2.bias", {h});
    }
    const std::string fin = text ? "final_layer_norm" : "post_layernorm";
    Add(p + fin + ".weight", {h});
    Add(p + fin + ".bias", {h});
  }

  at::Tensor Encoder(const WeightMap& w, const std::string& p, const ClipTower& t, at::Tensor x,
                     const at::Tensor& blocked) const {
    const int64_t b = x.size(0), s = x.size(1), h = t.hidden, nh = t.heads, hd = h / nh;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    auto lin = [&](const at::Tensor& y, const std::string& n) {
      return nn::Linear(y, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"));
    };
    auto ln = [&](const at::Tensor& y, const std::string& n) {
      return nn::LayerNorm(y, GetWeight(w, n + ".weight"), GetWeight(w, n + ".bias"), t.eps);
    };
    auto heads = [&](const at::Tensor& y) { return y.view({b, s, nh, hd}).transpose(1, 2); };
    for (int64_t i = 0; i < t.layers; ++i) {
      const std::string lp = p + "encoder.layers." + std::to_string(i) + ".";
      at::Tensor y = ln(x, lp + "layer_norm1");
      at::Tensor q = heads(lin(y, lp + "self_attn.q_proj"));
      at::Tensor k = heads(lin(y, lp + "self_attn.k_proj"));
      at::Tensor v = heads(lin(y, lp + "self_attn.v_proj"));
      at::Tensor ctx = nn::Attention(q, k, v, blocked, scale).transpose(1, 2).reshape({b, s, h});
      x = x + lin(ctx, lp + "self_attn.out_proj");
      y = nn::Activate(lin(ln(x, lp + "layer_norm2"), lp + "mlp.fc1"), t.act);
      x = x + lin(y, lp + "mlp.fc2");
    }
    return x;
  }

  std::pair<at::Tensor, at::Tensor> Text(const WeightMap& w, const at::Tensor& ids,
                                         const at::Tensor& mask) const {
    const std::string p = "text_model.";
    const int64_t s = ids.size(1);
    at::Tensor x = nn::Embedding(GetWeight(w, p + "embeddings.token_embedding.weight"), ids) +
                   GetWeight(w, p + "embeddings.position_embedding.weight").narrow(0, 0, s);
    at::Tensor blocked = nn::BlockedKeys(mask, s, /*causal=*/true, std::nullopt, ids.device());
    x = Encoder(w, p, c_.text, x, blocked);
    x = nn::LayerNorm(x, GetWeight(w, p + "final_layer_norm.weight"),
                      GetWeight(w, p + "final_layer_norm.bias"), c_.text.eps);
    // Legacy CLIP pooling (eos_token_id == 2 in the checkpoints): the position of the largest id.
    at::Tensor pos = ids.argmax(-1);
    at::Tensor pooled =
        x.gather(1, pos.view({-1, 1, 1}).expand({x.size(0), 1, x.size(2)})).squeeze(1);
    return {x, pooled};
  }

  std::pair<at::Tensor, at::Tensor> Vision(const WeightMap& w, const at::Tensor& px) const {
    const std::string p = "vision_model.";
    const ClipTower& t = c_.vision;
    const int64_t b = px.size(0);
    at::Tensor x = nn::PatchEmbed(px, GetWeight(w, p + "embeddings.patch_embedding.weight"), at::Tensor(), t.patch);
    at::Tensor cls = GetWeight(w, p + "embeddings.class_embedding").view({1, 1, t.hidden}).expand({b, 1, t.hidden});
    x = at::cat({cls, x}, 1) + GetWeight(w, p + "embeddings.position_embedding.weight");
    x = nn::LayerNorm(x, GetWeight(w, p + "pre_layrnorm.weight"), GetWeight(w, p + "pre_layrnorm.bias"), t.eps);
    x = Encoder(w, p, t, x, at::Tensor());
    at::Tensor pooled = nn::LayerNorm(x.select(1, 0), GetWeight(w, p + "post_layernorm.weight"),
                                      GetWeight(w, p + "post_layernorm.bias"), t.eps);
    return {x, pooled};
  }

  ClipConfig c_;
  Shapes shapes_;
};

}  // namespace

std::vector<ArchEntry> MultimodalArchs() {
  // Modelled on openai/clip-vit-base-patch32.
  const json text = {{"hidden_size", 512}, {"intermediate_size", 2048}, {"num_attention_heads", 8},
                     {"num_hidden_layers", 12}, {"max_position_embeddings", 77},
                     {"vocab_size", 49408}, {"hidden_act", "quick_gelu"}, {"layer_norm_eps", 1e-5},
                     {"bos_token_id", 0}, {"eos_token_id", 2}, {"pad_token_id", 1},
                     {"projection_dim", 512}};
  const json vision = {{"hidden_size", 768}, {"intermediate_size", 3072}, {"num_attention_heads", 12},
                       {"num_hidden_layers", 12}, {"image_size", 224}, {"patch_size", 32},
                       {"num_channels", 3}, {"hidden_act", "quick_gelu"}, {"layer_norm_eps", 1e-5},
                       {"projection_dim", 512}};
  json model = {{"architectures", {"CLIPModel"}}, {"model_type", "clip"}, {"projection_dim", 512},
                {"logit_scale_init_value", 2.6592}, {"initializer_factor", 1.0},
                {"text_config", text}, {"vision_config", vision}};
  json text_model = text;
  text_model["architectures"] = {"CLIPTextModel"};
  text_model["model_type"] = "clip_text_model";
  json vision_model = vision;
  vision_model["architectures"] = {"CLIPVisionModel"};
  vision_model["model_type"] = "clip_vision_model";
  auto build = [](ClipKind kind) {
    return [kind](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
      TS_ASSIGN_OR_RETURN(ClipConfig c, ParseClip(spec.tiny_config, kind));
      return std::unique_ptr<Model>(std::make_unique<ClipModel>(std::move(spec), std::move(c)));
    };
  };
  return {
      {{"CLIPModel", "clip", "zero-shot-image-classification"}, model, ClipScale(ClipKind::kModel),
       build(ClipKind::kModel)},
      {{"CLIPTextModel", "clip_text_model", "feature-extraction"}, text_model,
       ClipScale(ClipKind::kText), build(ClipKind::kText)},
      {{"CLIPVisionModel", "clip_vision_model", "feature-extraction"}, vision_model,
       ClipScale(ClipKind::kVision), build(ClipKind::kVision)},
  };
}

}  // namespace ts::zoo::internal
