// audio-spectrogram-transformer (modular_audio_spectrogram_transformer.py): a ViT over a log-mel
// spectrogram. input_values [B, max_length, num_mel_bins] is seen as a one-channel image
// [B, 1, mel, time] (unsqueeze, transpose) and cut into overlapping patch_size x patch_size
// patches at frequency_stride x time_stride (ASTPatchEmbeddings' Conv2d, run here as the windows
// times the kernel: one Linear), flattened frequency-major; the cls and distillation tokens go
// first, learned positions over all of them; transformers 5's ViTLayers under `layers.N`
// (trunks/vision_transformer.h PreLnEncoder), the final `layernorm`; pooler_output the mean of the
// two tokens. ASTForAudioClassification: ASTMLPHead (`classifier.layernorm`, `classifier.dense`)
// on the pooled output, cross entropy (MSE for one label). The model and its trunk live here: no
// other family uses them. Modelled on MIT/ast-finetuned-audioset-10-10-0.4593.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <optional>

#include "workers/zoo/families/config_fields.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_transformer.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct AstConfig {
  int64_t hidden = 0, layers = 0, heads = 0, intermediate = 0;
  int64_t patch = 16, fstride = 10, tstride = 10, max_length = 1024, mel = 128, num_labels = 2;
  Activation act = Activation::kGeluErf;
  double eps = 1e-12;
  bool qkv_bias = true;
  int64_t FreqPatches() const { return (mel - patch) / fstride + 1; }
  int64_t TimePatches() const { return (max_length - patch) / tstride + 1; }
};

StatusOr<AstConfig> ParseAst(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  AstConfig c;
  TS_ASSIGN_OR_RETURN(c.hidden, PositiveField(r, "hidden_size", 768));
  TS_ASSIGN_OR_RETURN(c.layers, PositiveField(r, "num_hidden_layers", 12));
  TS_ASSIGN_OR_RETURN(c.heads, PositiveField(r, "num_attention_heads", 12));
  if (c.hidden % c.heads != 0) return r.Error("num_attention_heads", "must divide hidden_size");
  TS_ASSIGN_OR_RETURN(c.intermediate, PositiveField(r, "intermediate_size", 3072));
  TS_ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, "hidden_act"));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", 1e-12));
  if (c.eps <= 0) return r.Error("layer_norm_eps", "must be > 0");
  TS_ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("qkv_bias", true));
  TS_ASSIGN_OR_RETURN(c.patch, PositiveField(r, "patch_size", 16));
  TS_ASSIGN_OR_RETURN(c.fstride, PositiveField(r, "frequency_stride", 10));
  TS_ASSIGN_OR_RETURN(c.tstride, PositiveField(r, "time_stride", 10));
  TS_ASSIGN_OR_RETURN(c.max_length, PositiveField(r, "max_length", 1024));
  TS_ASSIGN_OR_RETURN(c.mel, PositiveField(r, "num_mel_bins", 128));
  if (c.mel < c.patch) return r.Error("num_mel_bins", "below patch_size");
  if (c.max_length < c.patch) return r.Error("max_length", "below patch_size");
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// The BERT/ViT width policy; patch_size and the strides kept (the overlapping patch conv is the
// kind's point), the spectrogram cut to at most 2 x 4 patches.
StatusOr<json> ScaleAst(const json& config) {
  TS_ASSIGN_OR_RETURN(AstConfig c, ParseAst(config));
  json t = config;
  ScaleEncoderWidth(t, c.heads, c.hidden, c.intermediate, c.layers);
  const int64_t freq = std::min<int64_t>(c.FreqPatches(), 2),
                time = std::min<int64_t>(c.TimePatches(), 4);
  t["num_mel_bins"] = c.patch + (freq - 1) * c.fstride;
  t["max_length"] = c.patch + (time - 1) * c.tstride;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, freq * time + 2);
  return t;
}

class AstModel : public Model {
 public:
  AstModel(ModelSpec spec, AstConfig c, bool classifier)
      : Model(std::move(spec)), c_(c), classifier_(classifier) {
    pre_ = classifier ? "audio_spectrogram_transformer." : "";
    const int64_t h = c_.hidden, tokens = c_.FreqPatches() * c_.TimePatches() + 2;
    shapes_.emplace_back(pre_ + "embeddings.cls_token", std::vector<int64_t>{1, 1, h});
    shapes_.emplace_back(pre_ + "embeddings.distillation_token", std::vector<int64_t>{1, 1, h});
    shapes_.emplace_back(pre_ + "embeddings.patch_embeddings.projection.weight",
                         std::vector<int64_t>{h, 1, c_.patch, c_.patch});
    shapes_.emplace_back(pre_ + "embeddings.patch_embeddings.projection.bias",
                         std::vector<int64_t>{h});
    shapes_.emplace_back(pre_ + "embeddings.position_embeddings",
                         std::vector<int64_t>{1, tokens, h});
    PreLnEncoderRecipe e{.hidden = h,
                         .intermediate = c_.intermediate,
                         .layers = c_.layers,
                         .heads = c_.heads,
                         .act = c_.act,
                         .eps = c_.eps,
                         .qkv_bias = c_.qkv_bias,
                         .naming = VitEncoderNaming()};
    encoder_.emplace(e, pre_, shapes_);
    for (const char* n : {"layernorm.weight", "layernorm.bias"}) {
      shapes_.emplace_back(pre_ + n, std::vector<int64_t>{h});
    }
    if (classifier_) {
      shapes_.emplace_back("classifier.layernorm.weight", std::vector<int64_t>{h});
      shapes_.emplace_back("classifier.layernorm.bias", std::vector<int64_t>{h});
      shapes_.emplace_back("classifier.dense.weight", std::vector<int64_t>{c_.num_labels, h});
      shapes_.emplace_back("classifier.dense.bias", std::vector<int64_t>{c_.num_labels});
    }
  }

  std::vector<std::pair<std::string, std::vector<int64_t>>> WeightShapes() const override {
    return shapes_;
  }

  std::vector<std::string> OutputNames() const override {
    if (classifier_) return {"logits"};
    return {"last_hidden_state", "pooler_output"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor seq = Encode(w, GetInput(inputs, "input_values"));
    at::Tensor pooled = (seq.select(1, 0) + seq.select(1, 1)) / 2;
    if (!classifier_) return {seq, pooled};
    pooled = nn::LayerNorm(pooled, GetWeight(w, "classifier.layernorm.weight"),
                           GetWeight(w, "classifier.layernorm.bias"), c_.eps);
    return {nn::Linear(pooled, GetWeight(w, "classifier.dense.weight"),
                       GetWeight(w, "classifier.dense.bias"))};
  }

  // ASTForAudioClassification: transformers' sequence-classification loss (MSE for one label,
  // else cross entropy). ASTModel has none: MSE of the states onto a random target plus MSE of the
  // pooled output onto the target's first position, as the encoders' base models.
  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    if (classifier_) {
      const at::Tensor& labels = GetInput(batch.labels, "labels");
      if (c_.num_labels == 1) {
        return at::mse_loss(out[0].squeeze(-1), labels.to(out[0].scalar_type()));
      }
      return CrossEntropy(out[0], labels);
    }
    at::Tensor target = GetInput(batch.labels, "target").to(out[0].scalar_type());
    return at::mse_loss(out[0], target) + at::mse_loss(out[1], target.select(1, 0));
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    Batch batch;
    batch.inputs["input_values"] = at::randn({batch_size, c_.max_length, c_.mel}, gen, f32);
    if (!classifier_) {
      const int64_t tokens = c_.FreqPatches() * c_.TimePatches() + 2;
      batch.labels["target"] = at::randn({batch_size, tokens, c_.hidden}, gen, f32);
    } else if (c_.num_labels == 1) {
      batch.labels["labels"] = at::randn({batch_size}, gen, f32);
    } else {
      batch.labels["labels"] =
          at::randint(0, c_.num_labels, {batch_size}, gen, at::TensorOptions().dtype(at::kLong));
    }
    return batch;
  }

 private:
  // ASTEmbeddings, the layers and the final layernorm: [B, 2 + patches, hidden].
  at::Tensor Encode(const WeightMap& w, const at::Tensor& values) const {
    const int64_t b = values.size(0), p = c_.patch, h = c_.hidden;
    at::Tensor img = values.unsqueeze(1).transpose(2, 3);                    // [B, 1, mel, time]
    at::Tensor win = img.unfold(2, p, c_.fstride).unfold(3, p, c_.tstride);  // [B,1,F,T,p,p]
    const int64_t patches = win.size(2) * win.size(3);
    at::Tensor cols = win.reshape({b, patches, p * p});
    const std::string e = pre_ + "embeddings.";
    at::Tensor x =
        nn::Linear(cols, GetWeight(w, e + "patch_embeddings.projection.weight").view({h, p * p}),
                   GetWeight(w, e + "patch_embeddings.projection.bias"));
    x = at::cat({GetWeight(w, e + "cls_token").expand({b, 1, h}),
                 GetWeight(w, e + "distillation_token").expand({b, 1, h}), x},
                1);
    x = encoder_->Forward(w, x + GetWeight(w, e + "position_embeddings"), at::Tensor());
    return nn::LayerNorm(x, GetWeight(w, pre_ + "layernorm.weight"),
                         GetWeight(w, pre_ + "layernorm.bias"), c_.eps);
  }

  AstConfig c_;
  bool classifier_;
  std::string pre_;
  WeightList shapes_;
  std::optional<PreLnEncoder> encoder_;
};

ArchEntry AstEntry(const std::string& arch, const char* task, bool classifier,
                   const json& example) {
  auto build = [classifier](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(AstConfig c, ParseAst(spec.tiny_config));
    return std::unique_ptr<Model>(new AstModel(std::move(spec), c, classifier));
  };
  return {{arch, "audio-spectrogram-transformer", task},
          WithArchitecture(example, arch),
          ScaleAst,
          build,
          {}};
}

std::vector<ArchEntry> AstArchs() {
  // MIT/ast-finetuned-audioset-10-10-0.4593 (AudioSet's 527 labels)
  const json example = {{"model_type", "audio-spectrogram-transformer"},
                        {"hidden_size", 768},
                        {"num_hidden_layers", 12},
                        {"num_attention_heads", 12},
                        {"intermediate_size", 3072},
                        {"hidden_act", "gelu"},
                        {"layer_norm_eps", 1e-12},
                        {"patch_size", 16},
                        {"qkv_bias", true},
                        {"frequency_stride", 10},
                        {"time_stride", 10},
                        {"max_length", 1024},
                        {"num_mel_bins", 128},
                        {"num_labels", 527},
                        {"initializer_range", 0.02}};
  return {AstEntry("ASTModel", "feature-extraction", false, example),
          AstEntry("ASTForAudioClassification", "audio-classification", true, example)};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(AudioSpectrogramTransformer, AstArchs);

}  // namespace ts::zoo::internal
