// mamba2 (modeling_mamba2.py, Mamba2Mixer.torch_forward without a cache): Mamba2Model
// (`embeddings`, `layers.N`, `norm_f`) and Mamba2ForCausalLM (`backbone.` + `lm_head`, tied when
// tie_word_embeddings). Each Mamba2Block is x + mixer(norm(x)) with Mamba2RMSNorm. The mixer
// zeroes the padded positions, projects `in_proj` into (gate, xBC, dt) (d_mlp is 0: transformers
// sizes in_proj as intermediate + conv_dim + num_heads), runs the causal depthwise `conv1d` over
// xBC (padding kernel - 1, cut to S) and the activation, zeroes the padded positions again,
// splits x / B / C (B and C with n_groups groups, each shared by num_heads / n_groups heads),
// makes dt = clamp(softplus(dt + `dt_bias`), time_step_limit), A = -exp(`A_log`) one scalar a
// head, runs the SSD recurrence, adds `D` x, applies the gated RMS norm `norm`
// (MambaRMSNormGated: y * silu(gate), then the RMS norm over the intermediate size, times its
// weight) and `out_proj`. transformers' float32 casts are not mirrored, as in families/mamba.cc.
// The skeleton around the mixer (embeddings, the residual blocks, norm_f, the head, batches,
// config fields, the tiny scaling) is mamba's SsmLm (families/mamba.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "workers/zoo/config.h"
#include "workers/zoo/families/config_fields.h"
#include "workers/zoo/families/mamba.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::mamba2 {
namespace {

using json = nlohmann::json;

using mamba::SsmLm;
using mamba::SsmLmConfig;

struct Mamba2Cfg {
  SsmLmConfig lm;
  int64_t inter = 8192, heads = 128, head_dim = 64, groups = 8;
  double dt_lo = 0.0, dt_hi = std::numeric_limits<double>::infinity();
  int64_t ConvDim() const { return inter + 2 * groups * lm.state; }
};

// time_step_limit: a pair [low, high] of numbers (Mamba2Config's default (0.0, inf)); null or
// absent is the default. A high bound stored as a string ("Infinity") is read as such.
Status ReadLimit(const ConfigReader& r, const json& config, Mamba2Cfg& c) {
  if (!r.Has("time_step_limit") || config["time_step_limit"].is_null()) return OkStatus();
  const json& v = config["time_step_limit"];
  if (!v.is_array() || v.size() != 2) return r.Error("time_step_limit", "expected [low, high]");
  double bounds[2];
  for (size_t i = 0; i < 2; ++i) {
    if (v[i].is_number()) {
      bounds[i] = v[i].get<double>();
    } else if (v[i].is_string() && v[i].get<std::string>() == "Infinity" && i == 1) {
      bounds[i] = std::numeric_limits<double>::infinity();
    } else {
      return r.Error("time_step_limit", "expected two numbers");
    }
  }
  if (!(bounds[0] >= 0) || !(bounds[1] > bounds[0]))
    return r.Error("time_step_limit", "expected 0 <= low < high");
  c.dt_lo = bounds[0];
  c.dt_hi = bounds[1];
  return OkStatus();
}

StatusOr<Mamba2Cfg> ParseMamba2(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  Mamba2Cfg c;
  TS_ASSIGN_OR_RETURN(c.lm, mamba::ReadSsmLmConfig(
                                r, {.vocab = 32768, .hidden = 4096, .layers = 64, .state = 128}));
  TS_ASSIGN_OR_RETURN(c.heads, PositiveField(r, "num_heads", 128));
  TS_ASSIGN_OR_RETURN(c.head_dim, PositiveField(r, "head_dim", 64));
  TS_ASSIGN_OR_RETURN(c.groups, PositiveField(r, "n_groups", 8));
  TS_ASSIGN_OR_RETURN(double expand, r.Double("expand", 2.0));
  if (!(expand > 0)) return r.Error("expand", "must be positive");
  // Mamba2Mixer takes int(expand * hidden_size), never a stored intermediate_size.
  c.inter = static_cast<int64_t>(expand * static_cast<double>(c.lm.hidden));
  // torch_forward reshapes the stream into [num_heads, head_dim]; any other product would make
  // d_mlp non-zero, which the pure-torch path does not run.
  if (c.heads * c.head_dim != c.inter)
    return r.Error("num_heads", "num_heads * head_dim must equal int(expand * hidden_size) = " +
                                    std::to_string(c.inter));
  if (c.heads % c.groups != 0) return r.Error("n_groups", "must divide num_heads");
  TS_RETURN_IF_ERROR(ReadLimit(r, config, c));
  return c;
}

class Mamba2 : public SsmLm {
 public:
  Mamba2(ModelSpec spec, Mamba2Cfg c, TextHeadKind head)
      : SsmLm(std::move(spec), c.lm, ".dt_bias"), c_(std::move(c)) {
    const int64_t h = c_.lm.hidden, in = c_.inter, cd = c_.ConvDim(), nh = c_.heads;
    // Mamba2Mixer's parameters in registration order.
    AddWeights(head, [&](const std::string& m) {
      Layer l;
      l.conv_w = Add(m + "conv1d.weight", {cd, 1, c_.lm.kernel});
      if (c_.lm.conv_bias) l.conv_b = Add(m + "conv1d.bias", {cd});
      l.in_w = Add(m + "in_proj.weight", {in + cd + nh, h});
      if (c_.lm.use_bias) l.in_b = Add(m + "in_proj.bias", {in + cd + nh});
      l.dt_b = Add(m + "dt_bias", {nh});
      l.a_log = Add(m + "A_log", {nh});
      l.gnorm = Add(m + "norm.weight", {in});
      l.d = Add(m + "D", {nh});
      l.out_w = Add(m + "out_proj.weight", {h, in});
      if (c_.lm.use_bias) l.out_b = Add(m + "out_proj.bias", {h});
      layers_.push_back(std::move(l));
    });
  }

 private:
  struct Layer {
    std::string conv_w, conv_b, in_w, in_b, dt_b, a_log, gnorm, d, out_w, out_b;
  };

  // Mamba2Mixer.torch_forward without a cache: x [B, S, H] -> [B, S, H].
  at::Tensor Mixer(const WeightMap& w, size_t layer, const at::Tensor& x,
                   const at::Tensor& mask) const override {
    const Layer& l = layers_[layer];
    const int64_t b = x.size(0), s = x.size(1), in = c_.inter, cd = c_.ConvDim();
    const int64_t nh = c_.heads, p = c_.head_dim, n = c_.lm.state, g = c_.groups;
    // apply_mask_to_padding_states acts only on a mask with more than one row and column.
    at::Tensor keep;
    if (mask.defined() && mask.size(0) > 1 && mask.size(1) > 1)
      keep = mask.unsqueeze(-1).to(x.scalar_type());
    at::Tensor proj = nn::Linear(keep.defined() ? x * keep : x, GetWeight(w, l.in_w),
                                 GetOptionalWeight(w, l.in_b));
    at::Tensor gate = proj.narrow(-1, 0, in);
    at::Tensor xbc = proj.narrow(-1, in, cd).transpose(1, 2);  // [B, conv_dim, S]
    at::Tensor dt = proj.narrow(-1, in + cd, nh);              // [B, S, nh]
    xbc = nn::Conv1d(xbc, GetWeight(w, l.conv_w), GetOptionalWeight(w, l.conv_b), /*stride=*/1,
                     /*padding=*/c_.lm.kernel - 1, /*groups=*/cd);
    xbc = nn::Activate(xbc.narrow(-1, 0, s).transpose(1, 2), c_.lm.act);  // [B, S, conv_dim]
    if (keep.defined()) xbc = xbc * keep;
    at::Tensor hs = xbc.narrow(-1, 0, in).reshape({b, s, nh, p});
    // B and C: [B, S, g, N], each group shared by nh / g consecutive heads (repeat_interleave).
    at::Tensor bm = xbc.narrow(-1, in, g * n).reshape({b, s, g, n}).repeat_interleave(nh / g, 2);
    at::Tensor cm =
        xbc.narrow(-1, in + g * n, g * n).reshape({b, s, g, n}).repeat_interleave(nh / g, 2);
    dt = at::softplus(dt + GetWeight(w, l.dt_b));  // [B, S, nh]
    dt = std::isinf(c_.dt_hi) ? dt.clamp_min(c_.dt_lo) : dt.clamp(c_.dt_lo, c_.dt_hi);
    at::Tensor a = -at::exp(GetWeight(w, l.a_log));  // [nh]
    at::Tensor da = at::exp(dt * a);                 // [B, S, nh]
    // The SSD recurrence as a sequential scan over time: state = exp(A dt) state + dt x B^T,
    // y_t = state C_t. torch_forward's chunked form (segment sums within chunks, the state passed
    // between chunks) computes exactly this sum; the chunk size only changes the order of the
    // additions, so chunk_size is not read.
    at::Tensor state = at::zeros({b, nh, p, n}, hs.options());
    std::vector<at::Tensor> ys;
    ys.reserve(static_cast<size_t>(s));
    for (int64_t t = 0; t < s; ++t) {
      at::Tensor dtt = dt.select(1, t).view({b, nh, 1, 1});
      at::Tensor xt = hs.select(1, t).unsqueeze(-1);  // [B, nh, P, 1]
      at::Tensor bt = bm.select(1, t).unsqueeze(2);   // [B, nh, 1, N]
      state = da.select(1, t).view({b, nh, 1, 1}) * state + dtt * xt * bt;
      ys.push_back(nn::Matmul(state, cm.select(1, t).unsqueeze(-1)).squeeze(-1));  // [B, nh, P]
    }
    at::Tensor y = at::stack(ys, 1) + hs * GetWeight(w, l.d).view({1, 1, nh, 1});
    y = y.reshape({b, s, in});
    // MambaRMSNormGated: y * silu(gate), then the RMS norm over the intermediate size.
    y = nn::RmsNorm(y * nn::Activate(gate, Activation::kSilu), GetWeight(w, l.gnorm), c_.lm.eps);
    return nn::Linear(y, GetWeight(w, l.out_w), GetOptionalWeight(w, l.out_b));
  }

  Mamba2Cfg c_;
  std::vector<Layer> layers_;
};

// Tiny: hidden 64 with expand kept, head_dim 16 (fewer when the stream is narrower) and
// num_heads to fill it, n_groups kept when it divides the heads (else 1), at most 16 state
// channels, one layer (every layer is alike), vocab 512.
StatusOr<json> ScaleMamba2(const json& config) {
  TS_ASSIGN_OR_RETURN(Mamba2Cfg c, ParseMamba2(config));
  json t = config;
  mamba::ScaleSsmLm(c.lm, t);
  const int64_t h = TinyProfile::kHidden;
  const double expand = static_cast<double>(c.inter) / static_cast<double>(c.lm.hidden);
  t["expand"] = expand;
  const int64_t in = static_cast<int64_t>(expand * static_cast<double>(h));
  int64_t head_dim = std::min<int64_t>(16, in);
  while (in % head_dim != 0) --head_dim;
  const int64_t heads = in / head_dim;
  t["head_dim"] = head_dim;
  t["num_heads"] = heads;
  t["n_groups"] = heads % c.groups == 0 ? c.groups : 1;
  t.erase("intermediate_size");
  TS_RETURN_IF_ERROR(ParseMamba2(t).status());
  SetTinyRunProfile(t, TinyProfile::kSeqLen);
  return t;
}

std::vector<ArchEntry> Mamba2Family() {
  // modelled on mistralai/Mamba-Codestral-7B-v0.1 (its time_step_limit (0.0, inf) left to the
  // default: JSON has no infinity).
  const json example = json::parse(R"({"model_type":"mamba2","vocab_size":32768,
      "hidden_size":4096,"state_size":128,"num_hidden_layers":64,"layer_norm_epsilon":1e-5,
      "pad_token_id":0,"bos_token_id":0,"eos_token_id":0,"expand":2,"conv_kernel":4,
      "n_groups":8,"num_heads":128,"head_dim":64,"chunk_size":256,"use_bias":false,
      "use_conv_bias":true,"hidden_act":"silu","initializer_range":0.1,"residual_in_fp32":true,
      "time_step_rank":256,"time_step_min":0.001,"time_step_max":0.1,"time_step_floor":0.0001,
      "rescale_prenorm_residual":false,"use_cache":true,"rms_norm":true,
      "tie_word_embeddings":false})");
  const auto build = [](ModelSpec spec, TextHeadKind head) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(Mamba2Cfg c, ParseMamba2(spec.tiny_config));
    return std::unique_ptr<Model>(new Mamba2(std::move(spec), std::move(c), head));
  };
  return mamba::SsmLmArchs("mamba2", "Mamba2", example, ScaleMamba2, build);
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Mamba2, Mamba2Family);

}  // namespace ts::zoo::internal::mamba2
