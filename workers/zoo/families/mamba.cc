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
// families use it; its skeleton (SsmLm: embeddings, the residual blocks, norm_f, the head,
// batches) also serves mamba2.
#include "workers/zoo/families/mamba.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
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
  SsmLmConfig lm;
  bool falcon = false;
  int64_t inter = 1536, rank = 48;
  double mixer_eps = 1e-6;
  // Initialisation (MambaPreTrainedModel._init_weights): dt_proj's weight.
  double dt_scale = 1.0;
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

StatusOr<MambaCfg> ParseMamba(const json& config, bool falcon) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  MambaCfg c;
  c.falcon = falcon;
  TS_ASSIGN_OR_RETURN(
      c.lm, ReadSsmLmConfig(r, {.vocab = 50280, .hidden = 768, .layers = 32, .state = 16}));
  TS_ASSIGN_OR_RETURN(double expand, r.Double("expand", 2.0));
  if (!(expand > 0)) return r.Error("expand", "must be positive");
  // MambaConfig sets int(expand * hidden_size); a stored intermediate_size (written back by
  // save_pretrained) overrides it as PretrainedConfig's kwargs do (falcon-mamba-7b stores
  // expand 16 with intermediate_size 8192).
  const int64_t from_expand = static_cast<int64_t>(expand * static_cast<double>(c.lm.hidden));
  TS_ASSIGN_OR_RETURN(c.inter, PositiveField(r, "intermediate_size", from_expand));
  TS_ASSIGN_OR_RETURN(c.rank, ReadRank(r, config, c.lm.hidden));
  if (falcon) {
    TS_ASSIGN_OR_RETURN(c.mixer_eps, r.Double("mixer_rms_eps", 1e-6));
    if (!(c.mixer_eps > 0)) return r.Error("mixer_rms_eps", "must be positive");
  }
  TS_ASSIGN_OR_RETURN(c.dt_scale, r.Double("time_step_scale", 1.0));
  TS_ASSIGN_OR_RETURN(std::string scheme, r.String("time_step_init_scheme", "random"));
  if (scheme != "random" && scheme != "constant")
    return r.Error("time_step_init_scheme", "expected \"random\" or \"constant\", got " + scheme);
  c.dt_constant = scheme == "constant";
  return c;
}

class MambaModel : public SsmLm {
 public:
  MambaModel(ModelSpec spec, MambaCfg c, TextHeadKind head)
      : SsmLm(std::move(spec), c.lm, ".dt_proj.bias"), c_(std::move(c)) {
    const int64_t h = c_.lm.hidden, in = c_.inter, n = c_.lm.state;
    // MambaMixer's parameters in registration order.
    AddWeights(head, [&](const std::string& m) {
      Layer l;
      l.conv_w = Add(m + "conv1d.weight", {in, 1, c_.lm.kernel});
      if (c_.lm.conv_bias) l.conv_b = Add(m + "conv1d.bias", {in});
      l.in_w = Add(m + "in_proj.weight", {2 * in, h});
      if (c_.lm.use_bias) l.in_b = Add(m + "in_proj.bias", {2 * in});
      l.x_w = Add(m + "x_proj.weight", {c_.rank + 2 * n, in});
      l.dt_w = Add(m + "dt_proj.weight", {in, c_.rank});
      l.dt_b = Add(m + "dt_proj.bias", {in});
      l.a_log = Add(m + "A_log", {in, n});
      l.d = Add(m + "D", {in});
      l.out_w = Add(m + "out_proj.weight", {h, in});
      if (c_.lm.use_bias) l.out_b = Add(m + "out_proj.bias", {h});
      layers_.push_back(std::move(l));
    });
  }

 protected:
  // MambaPreTrainedModel._init_weights' dt_proj weight: U(-s, s) (or s) with s = rank^-0.5 *
  // time_step_scale; the rest as SsmLm.
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    if (!EndsWith(name, ".dt_proj.weight")) return SsmLm::InitWeight(name, t, gen);
    const double s = std::pow(static_cast<double>(c_.rank), -0.5) * c_.dt_scale;
    if (c_.dt_constant) {
      t.fill_(s);
    } else {
      t.uniform_(-s, s, gen);
    }
  }

 private:
  struct Layer {
    std::string conv_w, conv_b, in_w, in_b, x_w, dt_w, dt_b, a_log, d, out_w, out_b;
  };

  // rms_forward (FalconMamba): x * rsqrt(mean(x^2) + mixer_rms_eps), no weight.
  at::Tensor Rms(const at::Tensor& x) const {
    return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + c_.mixer_eps);
  }

  // MambaMixer.slow_forward without a cache: x [B, S, H] -> [B, S, H].
  at::Tensor Mixer(const WeightMap& w, size_t layer, const at::Tensor& x,
                   const at::Tensor& mask) const override {
    const Layer& l = layers_[layer];
    const int64_t s = x.size(1), in = c_.inter, n = c_.lm.state;
    at::Tensor proj =
        nn::Linear(x, GetWeight(w, l.in_w), GetOptionalWeight(w, l.in_b)).transpose(1, 2);
    at::Tensor hs = proj.narrow(1, 0, in), gate = proj.narrow(1, in, in);  // [B, I, S]
    at::Tensor keep;
    if (mask.defined()) {
      keep = mask.unsqueeze(1).to(hs.scalar_type());
      hs = hs * keep;
    }
    hs = nn::Conv1d(hs, GetWeight(w, l.conv_w), GetOptionalWeight(w, l.conv_b), /*stride=*/1,
                    /*padding=*/c_.lm.kernel - 1, /*groups=*/in);
    hs = nn::Activate(hs.narrow(-1, 0, s), c_.lm.act);
    if (keep.defined()) hs = hs * keep;
    at::Tensor ssm = nn::Linear(hs.transpose(1, 2), GetWeight(w, l.x_w));  // [B, S, R + 2N]
    at::Tensor step = ssm.narrow(-1, 0, c_.rank);
    at::Tensor b = ssm.narrow(-1, c_.rank, n);
    at::Tensor cm = ssm.narrow(-1, c_.rank + n, n);
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
    at::Tensor state = at::zeros({x.size(0), in, n}, hs.options());
    std::vector<at::Tensor> ys;
    ys.reserve(static_cast<size_t>(s));
    for (int64_t i = 0; i < s; ++i) {
      state = da.select(2, i) * state + dbu.select(2, i);
      ys.push_back(nn::Matmul(state, cm.select(1, i).unsqueeze(-1)).squeeze(-1));  // [B, I]
    }
    at::Tensor y = at::stack(ys, -1) + hs * GetWeight(w, l.d).view({1, in, 1});
    y = y * nn::Activate(gate, c_.lm.act);
    return nn::Linear(y.transpose(1, 2), GetWeight(w, l.out_w), GetOptionalWeight(w, l.out_b));
  }

  MambaCfg c_;
  std::vector<Layer> layers_;
};

// Tiny: hidden 64 with the intermediate / hidden ratio and the time-step rank scaled alike, at
// most 16 state channels, one layer (every layer is alike), vocab 512.
StatusOr<json> ScaleMamba(const json& config, bool falcon) {
  TS_ASSIGN_OR_RETURN(MambaCfg c, ParseMamba(config, falcon));
  json t = config;
  ScaleSsmLm(c.lm, t);
  const int64_t h = TinyProfile::kHidden;
  t["intermediate_size"] = ScaleRatio(c.inter, c.lm.hidden, h, 1);
  const json& rank = config.contains("time_step_rank") ? config["time_step_rank"] : json("auto");
  if (!rank.is_string()) t["time_step_rank"] = ScaleRatio(c.rank, c.lm.hidden, h, 1);
  TS_RETURN_IF_ERROR(ParseMamba(t, falcon).status());
  SetTinyRunProfile(t, TinyProfile::kSeqLen);
  return t;
}

}  // namespace

StatusOr<SsmLmConfig> ReadSsmLmConfig(const ConfigReader& r, const SsmLmDefaults& defaults) {
  SsmLmConfig c;
  TS_ASSIGN_OR_RETURN(c.vocab, PositiveField(r, "vocab_size", defaults.vocab));
  TS_ASSIGN_OR_RETURN(c.hidden, PositiveField(r, "hidden_size", defaults.hidden));
  TS_ASSIGN_OR_RETURN(c.layers, PositiveField(r, "num_hidden_layers", defaults.layers));
  TS_ASSIGN_OR_RETURN(c.state, PositiveField(r, "state_size", defaults.state));
  TS_ASSIGN_OR_RETURN(c.kernel, PositiveField(r, "conv_kernel", 4));
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_epsilon", 1e-5));
  if (!(c.eps > 0)) return r.Error("layer_norm_epsilon", "must be positive");
  TS_ASSIGN_OR_RETURN(c.use_bias, r.Bool("use_bias", false));
  TS_ASSIGN_OR_RETURN(c.conv_bias, r.Bool("use_conv_bias", true));
  TS_ASSIGN_OR_RETURN(c.tie, r.Bool("tie_word_embeddings", true));
  TS_ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", "silu"));
  TS_ASSIGN_OR_RETURN(c.act, ParseActivation(act, "hidden_act"));
  if (r.Has("pad_token_id")) {
    TS_ASSIGN_OR_RETURN(int64_t pad, TokenIdField(r, "pad_token_id", 0, c.vocab));
    c.pad = pad;
  }
  TS_ASSIGN_OR_RETURN(c.dt_min, r.Double("time_step_min", 0.001));
  TS_ASSIGN_OR_RETURN(c.dt_max, r.Double("time_step_max", 0.1));
  TS_ASSIGN_OR_RETURN(c.dt_floor, r.Double("time_step_floor", 1e-4));
  if (!(c.dt_min > 0)) return r.Error("time_step_min", "must be positive");
  if (!(c.dt_max >= c.dt_min)) return r.Error("time_step_max", "must be >= time_step_min");
  if (!(c.dt_floor > 0)) return r.Error("time_step_floor", "must be positive");
  return c;
}

void ScaleSsmLm(const SsmLmConfig& c, json& t) {
  t["hidden_size"] = TinyProfile::kHidden;
  t["state_size"] = std::min<int64_t>(c.state, 16);
  t["num_hidden_layers"] = TinyDepth(c.layers, /*layers_differ=*/false);
  t["vocab_size"] = TinyProfile::kVocab;
  for (const char* id : {"pad_token_id", "bos_token_id", "eos_token_id"})
    MapTokenId(t, id, TinyProfile::kVocab);
}

SsmLm::SsmLm(ModelSpec spec, SsmLmConfig c, std::string dt_bias)
    : Model(std::move(spec)), lm_(std::move(c)), dt_bias_(std::move(dt_bias)) {
  seq_len_ = RunSeqLen(this->spec().tiny_config);
}

void SsmLm::AddWeights(TextHeadKind head,
                       const std::function<void(const std::string&)>& add_mixer) {
  const std::string base = head == TextHeadKind::kBase ? "" : "backbone.";
  const int64_t h = lm_.hidden;
  embed_ = Add(base + "embeddings.weight", {lm_.vocab, h});
  for (int64_t i = 0; i < lm_.layers; ++i) {
    const std::string p = base + "layers." + std::to_string(i) + ".";
    norms_.push_back(Add(p + "norm.weight", {h}));
    add_mixer(p + "mixer.");
  }
  norm_f_ = Add(base + "norm_f.weight", {h});
  TextHeadSpec hs;
  hs.kind = head;
  hs.hidden = h;
  hs.vocab = lm_.vocab;
  if (head == TextHeadKind::kCausalLM) {
    hs.name = "lm_head";
    if (lm_.tie) hs.tied_weight = embed_;
  }
  head_ = MakeTextHead(std::move(hs));
  for (auto& weight : head_->Weights()) shapes_.push_back(std::move(weight));
}

std::string SsmLm::Add(const std::string& name, std::vector<int64_t> shape) {
  shapes_.emplace_back(name, std::move(shape));
  return name;
}

std::vector<at::Tensor> SsmLm::Forward(const WeightMap& w, const TensorMap& inputs) const {
  const at::Tensor& ids = GetInput(inputs, "input_ids");
  const at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
  at::Tensor x = nn::Embedding(GetWeight(w, embed_), ids);
  for (size_t i = 0; i < norms_.size(); ++i)
    x = x + Mixer(w, i, nn::RmsNorm(x, GetWeight(w, norms_[i]), lm_.eps), mask);
  x = nn::RmsNorm(x, GetWeight(w, norm_f_), lm_.eps);
  return head_->Forward(w, x, mask);
}

at::Tensor SsmLm::Loss(const WeightMap& w, const Batch& batch) const {
  return head_->Loss(Forward(w, batch.inputs), batch.labels);
}

Batch SsmLm::MakeBatch(uint64_t seed, int64_t batch_size) const {
  if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor ids =
      at::randint(0, lm_.vocab, {batch_size, seq_len_}, gen, at::TensorOptions().dtype(at::kLong));
  at::Tensor mask = MakeAttentionMask(batch_size, seq_len_);
  if (lm_.pad) ids = ids.masked_fill(mask.eq(0), *lm_.pad);
  Batch batch;
  batch.inputs["input_ids"] = ids;
  batch.inputs["attention_mask"] = mask;
  head_->AddLabels(gen, ids, mask, batch.labels);
  return batch;
}

bool SsmLm::EndsWith(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void SsmLm::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  if (EndsWith(name, ".A_log")) {
    t.copy_(at::log(at::arange(1, t.size(-1) + 1, t.options())).expand_as(t));
  } else if (EndsWith(name, ".D")) {
    t.fill_(1.0);
  } else if (EndsWith(name, dt_bias_)) {
    const double lo = std::log(lm_.dt_min), hi = std::log(lm_.dt_max);
    at::Tensor dt = at::exp(at::rand(t.sizes(), gen, t.options()) * (hi - lo) + lo);
    dt = dt.clamp_min(lm_.dt_floor);
    t.copy_(dt + at::log(-at::expm1(-dt)));
  } else {
    Model::InitWeight(name, t, gen);
  }
}

std::vector<ArchEntry> SsmLmArchs(const std::string& model_type, const std::string& prefix,
                                  const json& example, decltype(ArchEntry::scale) scale,
                                  const BuildSsmLm& build) {
  const auto entry = [build](TextHeadKind head) -> decltype(ArchEntry::build) {
    return [build, head](ModelSpec spec) { return build(std::move(spec), head); };
  };
  const std::string lm = prefix + "ForCausalLM", base = prefix + "Model";
  return {{{lm, model_type, "text-generation"},
           WithArchitecture(example, lm),
           scale,
           entry(TextHeadKind::kCausalLM)},
          {{base, model_type, "feature-extraction"},
           WithArchitecture(example, base),
           scale,
           entry(TextHeadKind::kBase)}};
}

std::vector<ArchEntry> MambaArchs(const std::string& model_type, const std::string& prefix,
                                  bool falcon, const json& example) {
  const auto scale = [falcon](const json& config) { return ScaleMamba(config, falcon); };
  const auto build = [falcon](ModelSpec spec,
                              TextHeadKind head) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(MambaCfg c, ParseMamba(spec.tiny_config, falcon));
    return std::unique_ptr<Model>(new MambaModel(std::move(spec), std::move(c), head));
  };
  return SsmLmArchs(model_type, prefix, example, scale, build);
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
