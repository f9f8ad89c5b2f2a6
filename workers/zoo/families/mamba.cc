// mamba (modeling_mamba.py, the pure-torch slow_forward): MambaModel (`embeddings`, `layers.N`,
// `norm_f`) and MambaForCausalLM (`backbone.` + `lm_head`, tied to the embeddings unless
// tie_word_embeddings is false). Each MambaBlock is x + mixer(norm(x)) with MambaRMSNorm; the
// MambaMixer projects `in_proj` into the stream and its gate, zeroes the padded positions, runs
// the causal depthwise `conv1d` (padding kernel - 1, cut to S) and the activation, zeroes the
// padded positions again, splits `x_proj` into the time step, B and C, makes dt =
// softplus(`dt_proj`(time step)), discretises exp(A * dt) with A = -exp(`A_log`), scans over
// time (state = exp(A dt) state + dt B x; y_t = state C_t), adds `D` * x, gates by act(gate) and
// projects `out_proj`. transformers' float32 casts of A_log, B and the stream are not mirrored:
// the zoo computes in the run's dtype, as its other families do for their float32 upcasts.
// falcon_mamba (families/falcon_mamba.cc) adds FalconMambaMixer's weight-free RMS norm of the
// time step, B and C before dt_proj (mixer_rms_eps). The model lives here: only these two
// families use it.
#include "workers/zoo/families/mamba.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <optional>
#include <utility>

#include "workers/zoo/config.h"
#include "workers/zoo/families/config_fields.h"
#include "workers/zoo/heads/text_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::mamba {
namespace {

using json = nlohmann::json;

struct MambaCfg {
  bool falcon = false;
  int64_t vocab = 50280, hidden = 768, layers = 32, state = 16, inter = 1536, rank = 48;
  int64_t kernel = 4;
  double eps = 1e-5, mixer_eps = 1e-6;
  bool use_bias = false, conv_bias = true, tie = true;
  Activation act = Activation::kSilu;
  std::optional<int64_t> pad;
  // Initialisation (MambaPreTrainedModel._init_weights): dt_proj's weight and bias.
  double dt_min = 0.001, dt_max = 0.1, dt_floor = 1e-4, dt_scale = 1.0;
  bool dt_constant = false;
};

// time_step_rank: "auto" (ceil(hidden_size / 16), as MambaConfig) or a positive integer.
StatusOr<int64_t> ReadRank(const ConfigReader& r, const json& config, int64_t hidden) {
  if (!r.Has("time_step_rank")) return (hidden + 15) / 16;
  const json& v = config["time_step_rank"];
  if (v.is_string() && v.get<std::string>() == "auto") return (hidden + 15) / 16;
  if (!v.is_number_integer()) return r.Error("time_step_rank", "expected \"auto\" or an integer");
  return PositiveField(r, "time_step_rank");
}

Status ReadInit(const ConfigReader& r, MambaCfg& c) {
  TS_ASSIGN_OR_RETURN(c.dt_min, r.Double("time_step_min", 0.001));
  TS_ASSIGN_OR_RETURN(c.dt_max, r.Double("time_step_max", 0.1));
  TS_ASSIGN_OR_RETURN(c.dt_floor, r.Double("time_step_floor", 1e-4));
  TS_ASSIGN_OR_RETURN(c.dt_scale, r.Double("time_step_scale", 1.0));
  if (!(c.dt_min > 0)) return r.Error("time_step_min", "must be positive");
  if (!(c.dt_max >= c.dt_min)) return r.Error("time_step_max", "must be >= time_step_min");
  if (!(c.dt_floor > 0)) return r.Error("time_step_floor", "must be positive");
  TS_ASSIGN_OR_RETURN(std::string scheme, r.String("time_step_init_scheme", "random"));
  if (scheme != "random" && scheme != "constant")
    return r.Error("time_step_init_scheme", "expected \"random\" or \"constant\", got " + scheme);
  c.dt_constant = scheme == "constant";
  return OkStatus();
}

StatusOr<MambaCfg> ParseMamba(const json& config, bool falcon) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  MambaCfg c;
  c.falcon = falcon;
  TS_ASSIGN_OR_RETURN(c.vocab, PositiveField(r, "vocab_size", 50280));
  TS_ASSIGN_OR_RETURN(c.hidden, PositiveField(r, "hidden_size", 768));
  TS_ASSIGN_OR_RETURN(c.layers, PositiveField(r, "num_hidden_layers", 32));
  TS_ASSIGN_OR_RETURN(c.state, PositiveField(r, "state_size", 16));
  TS_ASSIGN_OR_RETURN(c.kernel, PositiveField(r, "conv_kernel", 4));
  TS_ASSIGN_OR_RETURN(double expand, r.Double("expand", 2.0));
  if (!(expand > 0)) return r.Error("expand", "must be positive");
  // MambaConfig sets int(expand * hidden_size); a stored intermediate_size (written back by
  // save_pretrained) overrides it as PretrainedConfig's kwargs do (falcon-mamba-7b stores
  // expand 16 with intermediate_size 8192).
  const int64_t from_expand = static_cast<int64_t>(expand * static_cast<double>(c.hidden));
  TS_ASSIGN_OR_RETURN(c.inter, PositiveField(r, "intermediate_size", from_expand));
  TS_ASSIGN_OR_RETURN(c.rank, ReadRank(r, config, c.hidden));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_epsilon", 1e-5));
  if (!(c.eps > 0)) return r.Error("layer_norm_epsilon", "must be positive");
  if (falcon) {
    TS_ASSIGN_OR_RETURN(c.mixer_eps, r.Double("mixer_rms_eps", 1e-6));
    if (!(c.mixer_eps > 0)) return r.Error("mixer_rms_eps", "must be positive");
  }
  TS_ASSIGN_OR_RETURN(c.use_bias, r.Bool("use_bias", false));
  TS_ASSIGN_OR_RETURN(c.conv_bias, r.Bool("use_conv_bias", true));
  TS_ASSIGN_OR_RETURN(c.tie, r.Bool("tie_word_embeddings", true));
  TS_ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", "silu"));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, "hidden_act"));
  if (r.Has("pad_token_id")) {
    TS_ASSIGN_OR_RETURN(int64_t pad, TokenIdField(r, "pad_token_id", 0, c.vocab));
    c.pad = pad;
  }
  TS_RETURN_IF_ERROR(ReadInit(r, c));
  return c;
}

class MambaModel : public Model {
 public:
  MambaModel(ModelSpec spec, MambaCfg c, TextHeadKind head)
      : Model(std::move(spec)), c_(std::move(c)) {
    const std::string base = head == TextHeadKind::kBase ? "" : "backbone.";
    const int64_t h = c_.hidden, in = c_.inter;
    embed_ = Add(base + "embeddings.weight", {c_.vocab, h});
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string p = base + "layers." + std::to_string(i) + ".";
      Layer l;
      l.norm = Add(p + "norm.weight", {h});
      // MambaMixer's parameters in registration order.
      const std::string m = p + "mixer.";
      l.conv_w = Add(m + "conv1d.weight", {in, 1, c_.kernel});
      if (c_.conv_bias) l.conv_b = Add(m + "conv1d.bias", {in});
      l.in_w = Add(m + "in_proj.weight", {2 * in, h});
      if (c_.use_bias) l.in_b = Add(m + "in_proj.bias", {2 * in});
      l.x_w = Add(m + "x_proj.weight", {c_.rank + 2 * c_.state, in});
      l.dt_w = Add(m + "dt_proj.weight", {in, c_.rank});
      l.dt_b = Add(m + "dt_proj.bias", {in});
      l.a_log = Add(m + "A_log", {in, c_.state});
      l.d = Add(m + "D", {in});
      l.out_w = Add(m + "out_proj.weight", {h, in});
      if (c_.use_bias) l.out_b = Add(m + "out_proj.bias", {h});
      layers_.push_back(std::move(l));
    }
    norm_f_ = Add(base + "norm_f.weight", {h});
    TextHeadSpec hs;
    hs.kind = head;
    hs.hidden = h;
    hs.vocab = c_.vocab;
    if (head == TextHeadKind::kCausalLM) {
      hs.name = "lm_head";
      if (c_.tie) hs.tied_weight = embed_;
    }
    head_ = MakeTextHead(std::move(hs));
    for (auto& weight : head_->Weights()) shapes_.push_back(std::move(weight));
    seq_len_ = RunSeqLen(this->spec().tiny_config);
  }

  WeightShapeList WeightShapes() const override { return shapes_; }
  std::vector<std::string> OutputNames() const override { return head_->OutputNames(); }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& ids = GetInput(inputs, "input_ids");
    const at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
    at::Tensor x = nn::Embedding(GetWeight(w, embed_), ids);
    for (const Layer& l : layers_)
      x = x + Mixer(w, l, nn::RmsNorm(x, GetWeight(w, l.norm), c_.eps), mask);
    x = nn::RmsNorm(x, GetWeight(w, norm_f_), c_.eps);
    return head_->Forward(w, x, mask);
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    return head_->Loss(Forward(w, batch.inputs), batch.labels);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    at::Tensor ids =
        at::randint(0, c_.vocab, {batch_size, seq_len_}, gen, at::TensorOptions().dtype(at::kLong));
    at::Tensor mask = MakeAttentionMask(batch_size, seq_len_);
    if (c_.pad) ids = ids.masked_fill(mask.eq(0), *c_.pad);
    Batch batch;
    batch.inputs["input_ids"] = ids;
    batch.inputs["attention_mask"] = mask;
    head_->AddLabels(gen, ids, mask, batch.labels);
    return batch;
  }

 protected:
  // MambaPreTrainedModel._init_weights for the mixer's own parameters: A_log = log(1..N) on
  // every channel, D = 1, dt_proj's weight U(-s, s) (or s) with s = rank^-0.5 * time_step_scale,
  // and its bias the inverse softplus of dt = exp(U(log dt_min, log dt_max)) clamped to the
  // floor. The rest as every zoo model (biases seeded so that they matter).
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    const auto ends = [&](const std::string& suffix) {
      return name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends(".A_log")) {
      t.copy_(at::log(at::arange(1, c_.state + 1, t.options())).expand_as(t));
    } else if (ends(".D")) {
      t.fill_(1.0);
    } else if (ends(".dt_proj.weight")) {
      const double s = std::pow(static_cast<double>(c_.rank), -0.5) * c_.dt_scale;
      if (c_.dt_constant) {
        t.fill_(s);
      } else {
        t.uniform_(-s, s, gen);
      }
    } else if (ends(".dt_proj.bias")) {
      const double lo = std::log(c_.dt_min), hi = std::log(c_.dt_max);
      at::Tensor dt = at::exp(at::rand(t.sizes(), gen, t.options()) * (hi - lo) + lo);
      dt = dt.clamp_min(c_.dt_floor);
      t.copy_(dt + at::log(-at::expm1(-dt)));
    } else {
      Model::InitWeight(name, t, gen);
    }
  }

 private:
  struct Layer {
    std::string norm, conv_w, conv_b, in_w, in_b, x_w, dt_w, dt_b, a_log, d, out_w, out_b;
  };

  std::string Add(const std::string& name, std::vector<int64_t> shape) {
    shapes_.emplace_back(name, std::move(shape));
    return name;
  }

  // rms_forward (FalconMamba): x * rsqrt(mean(x^2) + mixer_rms_eps), no weight.
  at::Tensor Rms(const at::Tensor& x) const {
    return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + c_.mixer_eps);
  }

  // MambaMixer.slow_forward without a cache: x [B, S, H] -> [B, S, H].
  at::Tensor Mixer(const WeightMap& w, const Layer& l, const at::Tensor& x,
                   const at::Tensor& mask) const {
    const int64_t s = x.size(1), in = c_.inter;
    at::Tensor proj =
        nn::Linear(x, GetWeight(w, l.in_w), GetOptionalWeight(w, l.in_b)).transpose(1, 2);
    at::Tensor hs = proj.narrow(1, 0, in), gate = proj.narrow(1, in, in);  // [B, I, S]
    at::Tensor keep;
    if (mask.defined()) {
      keep = mask.unsqueeze(1).to(hs.scalar_type());
      hs = hs * keep;
    }
    hs = nn::Conv1d(hs, GetWeight(w, l.conv_w), GetOptionalWeight(w, l.conv_b), /*stride=*/1,
                    /*padding=*/c_.kernel - 1, /*groups=*/in);
    hs = nn::Activate(hs.narrow(-1, 0, s), c_.act);
    if (keep.defined()) hs = hs * keep;
    at::Tensor ssm = nn::Linear(hs.transpose(1, 2), GetWeight(w, l.x_w));  // [B, S, R + 2N]
    at::Tensor step = ssm.narrow(-1, 0, c_.rank);
    at::Tensor b = ssm.narrow(-1, c_.rank, c_.state);
    at::Tensor cm = ssm.narrow(-1, c_.rank + c_.state, c_.state);
    if (c_.falcon) {
      b = Rms(b);
      cm = Rms(cm);
      step = Rms(step);
    }
    at::Tensor dt = at::softplus(nn::Linear(step, GetWeight(w, l.dt_w), GetWeight(w, l.dt_b)))
                        .transpose(1, 2);                                     // [B, I, S]
    at::Tensor a = -at::exp(GetWeight(w, l.a_log));                           // [I, N]
    at::Tensor da = at::exp(a.unsqueeze(0).unsqueeze(2) * dt.unsqueeze(-1));  // [B, I, S, N]
    at::Tensor dbu = dt.unsqueeze(-1) * b.unsqueeze(1) * hs.unsqueeze(-1);    // [B, I, S, N]
    at::Tensor state = at::zeros({x.size(0), in, c_.state}, hs.options());
    std::vector<at::Tensor> ys;
    ys.reserve(static_cast<size_t>(s));
    for (int64_t i = 0; i < s; ++i) {
      state = da.select(2, i) * state + dbu.select(2, i);
      ys.push_back(nn::Matmul(state, cm.select(1, i).unsqueeze(-1)).squeeze(-1));  // [B, I]
    }
    at::Tensor y = at::stack(ys, -1) + hs * GetWeight(w, l.d).view({1, in, 1});
    y = y * nn::Activate(gate, c_.act);
    return nn::Linear(y.transpose(1, 2), GetWeight(w, l.out_w), GetOptionalWeight(w, l.out_b));
  }

  MambaCfg c_;
  std::unique_ptr<TextHead> head_;
  WeightShapeList shapes_;
  std::vector<Layer> layers_;
  std::string embed_, norm_f_;
  int64_t seq_len_ = 32;
};

// Tiny: hidden 64 with the intermediate / hidden ratio and the time-step rank scaled alike, at
// most 16 state channels, one layer (every layer is alike), vocab 512.
StatusOr<json> ScaleMamba(const json& config, bool falcon) {
  TS_ASSIGN_OR_RETURN(MambaCfg c, ParseMamba(config, falcon));
  json t = config;
  const int64_t h = TinyProfile::kHidden;
  t["hidden_size"] = h;
  t["intermediate_size"] = ScaleRatio(c.inter, c.hidden, h, 1);
  const json& rank = config.contains("time_step_rank") ? config["time_step_rank"] : json("auto");
  if (!rank.is_string()) t["time_step_rank"] = ScaleRatio(c.rank, c.hidden, h, 1);
  t["state_size"] = std::min<int64_t>(c.state, 16);
  t["num_hidden_layers"] = TinyDepth(c.layers, /*layers_differ=*/false);
  t["vocab_size"] = TinyProfile::kVocab;
  for (const char* id : {"pad_token_id", "bos_token_id", "eos_token_id"})
    MapTokenId(t, id, TinyProfile::kVocab);
  TS_RETURN_IF_ERROR(ParseMamba(t, falcon).status());
  SetTinyRunProfile(t, TinyProfile::kSeqLen);
  return t;
}

}  // namespace

std::vector<ArchEntry> MambaArchs(const std::string& model_type, const std::string& prefix,
                                  bool falcon, const json& example) {
  const auto scale = [falcon](const json& config) { return ScaleMamba(config, falcon); };
  const auto build = [falcon](TextHeadKind head) {
    return [falcon, head](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
      TS_ASSIGN_OR_RETURN(MambaCfg c, ParseMamba(spec.tiny_config, falcon));
      return std::unique_ptr<Model>(new MambaModel(std::move(spec), std::move(c), head));
    };
  };
  const std::string lm = prefix + "ForCausalLM", base = prefix + "Model";
  return {{{lm, model_type, "text-generation"},
           WithArchitecture(example, lm),
           scale,
           build(TextHeadKind::kCausalLM)},
          {{base, model_type, "feature-extraction"},
           WithArchitecture(example, base),
           scale,
           build(TextHeadKind::kBase)}};
}

namespace {

std::vector<ArchEntry> Mamba() {
  // modelled on state-spaces/mamba-130m-hf
  const json example = json::parse(R"({"model_type":"mamba","vocab_size":50280,
      "hidden_size":768,"state_size":16,"num_hidden_layers":24,"layer_norm_epsilon":1e-5,
      "pad_token_id":0,"bos_token_id":0,"eos_token_id":0,"expand":2,"intermediate_size":1536,
      "conv_kernel":4,"use_bias":false,"use_conv_bias":true,"hidden_act":"silu",
      "initializer_range":0.1,"residual_in_fp32":true,"time_step_rank":48,
      "time_step_scale":1.0,"time_step_min":0.001,"time_step_max":0.1,
      "time_step_init_scheme":"random","time_step_floor":0.0001,
      "rescale_prenorm_residual":false,"use_cache":true,"tie_word_embeddings":true})");
  return MambaArchs("mamba", "Mamba", /*falcon=*/false, example);
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Mamba, Mamba);

}  // namespace ts::zoo::internal::mamba
