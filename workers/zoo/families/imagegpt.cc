// imagegpt (modeling_imagegpt.py): GPT-2 over colour-cluster tokens. input_ids [B, S] are the
// image processor's cluster indices in [0, vocab_size - 1) (the last id is the SOS token that
// generation starts from; the processor never emits it), no attention_mask. GPT-2's layout: `wte`
// + `wpe`, blocks `h.N` of `ln_1`, causal `attn.c_attn` / `attn.c_proj`, `ln_2`, `mlp.c_fc` /
// `mlp.c_proj` (Conv1D weights stored [in, out]), the final `ln_f`; but every norm is
// ImageGPTLayerNorm: x / sqrt(mean(x^2) + eps) * weight, no centring, no bias, in the input's
// dtype (no float upcast). Scores / sqrt(head_dim) when `scale_attn_weights`, then / (layer + 1)
// when `scale_attn_by_inverse_layer_idx`. ImageGPTForCausalImageModeling: a bias-free `lm_head`
// of vocab_size - 1 rows (the SOS id is never predicted), untied (tie_word_embeddings defaults
// false), shifted cross entropy. ImageGPTForImageClassification: the mean of the states over the
// sequence through the bias-free `score`, transformers' sequence-classification loss. The model
// lives here: no other family uses it. Modelled on openai/imagegpt-small.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>

#include "workers/zoo/families/config_fields.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

enum class ImageGptHead { kModel, kCausal, kClassifier };

struct ImageGptConfig {
  int64_t vocab = 513, positions = 1024, hidden = 512, layers = 24, heads = 8, inner = 0;
  int64_t num_labels = 2;
  Activation act = Activation::kQuickGelu;
  double eps = 1e-5;
  bool scale = true, scale_by_layer = false;
};

// Fields transformers reads that this model does not build are refused naming the field:
// `add_cross_attention` (crossattention / ln_cross_attn weights in every block),
// `reorder_and_upcast_attn` (float32 baddbmm scores under a bf16 run), and on the causal class
// `tie_word_embeddings` (lm_head has vocab_size - 1 rows, wte vocab_size).
StatusOr<ImageGptConfig> ParseImageGpt(const json& config, ImageGptHead head) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  ImageGptConfig c;
  TS_ASSIGN_OR_RETURN(c.vocab, PositiveField(r, "vocab_size", 513));
  if (c.vocab < 2) return r.Error("vocab_size", "must be at least 2 (clusters + SOS)");
  TS_ASSIGN_OR_RETURN(c.positions, PositiveField(r, "n_positions", 1024));
  TS_ASSIGN_OR_RETURN(c.hidden, PositiveField(r, "n_embd", 512));
  TS_ASSIGN_OR_RETURN(c.layers, PositiveField(r, "n_layer", 24));
  TS_ASSIGN_OR_RETURN(c.heads, PositiveField(r, "n_head", 8));
  if (c.hidden % c.heads != 0) return r.Error("n_head", "must divide n_embd");
  TS_ASSIGN_OR_RETURN(c.inner, PositiveField(r, "n_inner", 4 * c.hidden));
  TS_ASSIGN_OR_RETURN(std::string act, r.String("activation_function", "quick_gelu"));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, "activation_function"));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_epsilon", 1e-5));
  if (c.eps <= 0) return r.Error("layer_norm_epsilon", "must be > 0");
  TS_ASSIGN_OR_RETURN(c.scale, r.Bool("scale_attn_weights", true));
  TS_ASSIGN_OR_RETURN(c.scale_by_layer, r.Bool("scale_attn_by_inverse_layer_idx", false));
  TS_ASSIGN_OR_RETURN(bool upcast, r.Bool("reorder_and_upcast_attn", false));
  if (upcast) return r.Error("reorder_and_upcast_attn", "true is not supported");
  TS_ASSIGN_OR_RETURN(bool cross, r.Bool("add_cross_attention", false));
  if (cross) return r.Error("add_cross_attention", "true is not supported");
  TS_ASSIGN_OR_RETURN(bool tie, r.Bool("tie_word_embeddings", false));
  if (tie && head == ImageGptHead::kCausal) {
    return r.Error("tie_word_embeddings",
                   "true is not supported (lm_head has vocab_size - 1 rows, wte vocab_size)");
  }
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// GPT-2's width policy (4 heads of 16), n_inner's ratio kept when set (null stays null: 4 x
// n_embd), one layer (every block alike), the vocabulary kept up to kVocab clusters + SOS, the
// sequence (the image's pixels) n_positions long, cut to kSeqLen.
StatusOr<json> ScaleImageGpt(const json& config, ImageGptHead head) {
  TS_ASSIGN_OR_RETURN(ImageGptConfig c, ParseImageGpt(config, head));
  json t = config;
  const int64_t heads = std::min(c.heads, TinyProfile::kHeads);
  const int64_t hidden = heads * (TinyProfile::kHidden / heads);
  t["n_head"] = heads;
  t["n_embd"] = hidden;
  if (t.contains("n_inner") && !t["n_inner"].is_null()) {
    t["n_inner"] = ScaleRatio(c.inner, c.hidden, hidden, 1);
  }
  t["n_layer"] = TinyDepth(c.layers, false);
  t["vocab_size"] = std::min(c.vocab, TinyProfile::kVocab + 1);
  const int64_t seq = std::min(c.positions, TinyProfile::kSeqLen);
  t["n_positions"] = seq;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, seq);
  return t;
}

class ImageGptModel : public Model {
 public:
  ImageGptModel(ModelSpec spec, ImageGptConfig c, ImageGptHead head)
      : Model(std::move(spec)), c_(c), head_(head) {
    pre_ = head == ImageGptHead::kModel ? "" : "transformer.";
    const int64_t h = c_.hidden;
    Add("wte.weight", {c_.vocab, h});
    Add("wpe.weight", {c_.positions, h});
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string l = "h." + std::to_string(i) + ".";
      Add(l + "ln_1.weight", {h});
      Add(l + "attn.c_attn.weight", {h, 3 * h});
      Add(l + "attn.c_attn.bias", {3 * h});
      Add(l + "attn.c_proj.weight", {h, h});
      Add(l + "attn.c_proj.bias", {h});
      Add(l + "ln_2.weight", {h});
      Add(l + "mlp.c_fc.weight", {h, c_.inner});
      Add(l + "mlp.c_fc.bias", {c_.inner});
      Add(l + "mlp.c_proj.weight", {c_.inner, h});
      Add(l + "mlp.c_proj.bias", {h});
    }
    Add("ln_f.weight", {h});
    if (head_ == ImageGptHead::kCausal) shapes_.push_back({"lm_head.weight", {c_.vocab - 1, h}});
    if (head_ == ImageGptHead::kClassifier) shapes_.push_back({"score.weight", {c_.num_labels, h}});
  }

  WeightList WeightShapes() const override { return shapes_; }

  std::vector<std::string> OutputNames() const override {
    return {head_ == ImageGptHead::kModel ? "last_hidden_state" : "logits"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor x = Transformer(w, GetInput(inputs, "input_ids"));
    if (head_ == ImageGptHead::kCausal) return {nn::Linear(x, GetWeight(w, "lm_head.weight"))};
    if (head_ == ImageGptHead::kClassifier)
      return {nn::Linear(x.mean(1), GetWeight(w, "score.weight"))};
    return {x};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    at::Tensor out = Forward(w, batch.inputs)[0];
    if (head_ == ImageGptHead::kCausal) {
      // Tokens < n predict n: logits[:, :-1] against labels[:, 1:].
      const at::Tensor& labels = GetInput(batch.labels, "labels");
      const int64_t s = out.size(1);
      return CrossEntropy(out.slice(1, 0, s - 1).reshape({-1, out.size(2)}),
                          labels.slice(1, 1, s).reshape({-1}));
    }
    if (head_ == ImageGptHead::kClassifier) {
      const at::Tensor& labels = GetInput(batch.labels, "labels");
      if (c_.num_labels == 1) return at::mse_loss(out.squeeze(-1), labels.to(out.scalar_type()));
      return CrossEntropy(out, labels);
    }
    // ImageGPTModel has no loss: MSE of the states onto a random target.
    return at::mse_loss(out, GetInput(batch.labels, "target").to(out.scalar_type()));
  }

  // Cluster ids in [0, vocab_size - 1) over the whole (tiny) image; the causal labels are the
  // ids themselves (transformers shifts them).
  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    const int64_t s = std::min(RunSeqLen(spec().tiny_config), c_.positions);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    Batch batch;
    at::Tensor ids = at::randint(0, c_.vocab - 1, {batch_size, s}, gen, i64);
    batch.inputs["input_ids"] = ids;
    if (head_ == ImageGptHead::kCausal) {
      batch.labels["labels"] = ids.clone();
    } else if (head_ == ImageGptHead::kClassifier && c_.num_labels == 1) {
      batch.labels["labels"] = at::randn({batch_size}, gen, at::TensorOptions().dtype(at::kFloat));
    } else if (head_ == ImageGptHead::kClassifier) {
      batch.labels["labels"] = at::randint(0, c_.num_labels, {batch_size}, gen, i64);
    } else {
      batch.labels["target"] =
          at::randn({batch_size, s, c_.hidden}, gen, at::TensorOptions().dtype(at::kFloat));
    }
    return batch;
  }

 protected:
  // ImageGPTLayerNorm's weights start at one (they carry no "norm" in their names).
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    for (const char* n : {"ln_1.weight", "ln_2.weight", "ln_f.weight"}) {
      const std::string suffix = n;
      if (name.size() >= suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        t.fill_(1.0);
        return;
      }
    }
    Model::InitWeight(name, t, gen);
  }

 private:
  void Add(const std::string& name, std::vector<int64_t> shape) {
    shapes_.push_back({pre_ + name, std::move(shape)});
  }
  const at::Tensor& W(const WeightMap& w, const std::string& name) const {
    return GetWeight(w, pre_ + name);
  }

  // ImageGPTLayerNorm, in the input's dtype.
  at::Tensor Norm(const WeightMap& w, const std::string& name, const at::Tensor& x) const {
    return x / at::sqrt(x.square().mean(-1, true) + c_.eps) * W(w, name);
  }

  // Conv1D: x @ weight + bias, weight [in, out].
  at::Tensor Conv1D(const WeightMap& w, const std::string& name, const at::Tensor& x) const {
    return nn::Linear(x, W(w, name + ".weight").t(), W(w, name + ".bias"));
  }

  at::Tensor Attend(const WeightMap& w, const std::string& l, const at::Tensor& x,
                    int64_t layer) const {
    const int64_t b = x.size(0), s = x.size(1), h = c_.hidden, hd = h / c_.heads;
    std::vector<at::Tensor> qkv = Conv1D(w, l + "attn.c_attn", x).split(h, -1);
    auto heads = [&](const at::Tensor& t) { return t.view({b, s, c_.heads, hd}).transpose(1, 2); };
    double scale = c_.scale ? 1.0 / std::sqrt(static_cast<double>(hd)) : 1.0;
    if (c_.scale_by_layer) scale /= static_cast<double>(layer + 1);
    at::Tensor blocked = nn::BlockedKeys(at::Tensor(), s, true, std::nullopt, x.device());
    at::Tensor ctx = nn::Attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), blocked, scale);
    return Conv1D(w, l + "attn.c_proj", ctx.transpose(1, 2).reshape({b, s, h}));
  }

  // ImageGPTModel.forward: last_hidden_state [B, S, n_embd].
  at::Tensor Transformer(const WeightMap& w, const at::Tensor& ids) const {
    const int64_t s = ids.size(1);
    at::Tensor x = nn::Embedding(W(w, "wte.weight"), ids) + W(w, "wpe.weight").slice(0, 0, s);
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string l = "h." + std::to_string(i) + ".";
      x = x + Attend(w, l, Norm(w, l + "ln_1.weight", x), i);
      at::Tensor y = nn::Activate(Conv1D(w, l + "mlp.c_fc", Norm(w, l + "ln_2.weight", x)), c_.act);
      x = x + Conv1D(w, l + "mlp.c_proj", y);
    }
    return Norm(w, "ln_f.weight", x);
  }

  ImageGptConfig c_;
  ImageGptHead head_;
  std::string pre_;
  WeightList shapes_;
};

ArchEntry ImageGptEntry(const std::string& arch, const char* task, ImageGptHead head,
                        const json& example) {
  auto build = [head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(ImageGptConfig c, ParseImageGpt(spec.tiny_config, head));
    return std::unique_ptr<Model>(new ImageGptModel(std::move(spec), c, head));
  };
  auto scale = [head](const json& config) { return ScaleImageGpt(config, head); };
  return {{arch, "imagegpt", task}, WithArchitecture(example, arch), scale, build, {}};
}

std::vector<ArchEntry> ImageGptArchs() {
  // openai/imagegpt-small (512 colour clusters + SOS, a 32 x 32 image)
  const json example = {{"model_type", "imagegpt"},
                        {"vocab_size", 513},
                        {"n_positions", 1024},
                        {"n_embd", 512},
                        {"n_layer", 24},
                        {"n_head", 8},
                        {"n_inner", nullptr},
                        {"activation_function", "quick_gelu"},
                        {"layer_norm_epsilon", 1e-5},
                        {"initializer_range", 0.02},
                        {"scale_attn_weights", true},
                        {"scale_attn_by_inverse_layer_idx", false},
                        {"reorder_and_upcast_attn", false},
                        {"tie_word_embeddings", false}};
  return {ImageGptEntry("ImageGPTForCausalImageModeling", "causal-image-modeling",
                        ImageGptHead::kCausal, example),
          ImageGptEntry("ImageGPTForImageClassification", "image-classification",
                        ImageGptHead::kClassifier, example),
          ImageGptEntry("ImageGPTModel", "feature-extraction", ImageGptHead::kModel, example)};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(ImageGpt, ImageGptArchs);

}  // namespace ts::zoo::internal
