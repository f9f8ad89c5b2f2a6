// Swin trunk (trunks/vision_swin.h).
#include "workers/zoo/trunks/vision_swin.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::internal {
namespace {

// [B, res, res, C] -> [B * nW, ws * ws, C]
at::Tensor Partition(const at::Tensor& x, int64_t ws) {
  const int64_t b = x.size(0), h = x.size(1), c = x.size(3);
  return x.view({b, h / ws, ws, h / ws, ws, c})
      .permute({0, 1, 3, 2, 4, 5})
      .reshape({-1, ws * ws, c});
}

at::Tensor Merge(const at::Tensor& x, int64_t b, int64_t res, int64_t ws) {
  const int64_t c = x.size(-1);
  return x.view({b, res / ws, res / ws, ws, ws, c})
      .permute({0, 1, 3, 2, 4, 5})
      .reshape({b, res, res, c});
}

}  // namespace

SwinTrunk::SwinTrunk(SwinRecipe recipe)
    : VisionTrunk(recipe.num_channels, recipe.image_size), r_(std::move(recipe)) {
  const std::string& pre = r_.prefix;
  const int64_t e = r_.embed_dim, p = r_.patch_size, ws = r_.window_size;
  Add(pre + "embeddings.patch_embeddings.projection.weight", {e, r_.num_channels, p, p});
  Add(pre + "embeddings.patch_embeddings.projection.bias", {e});
  Add(pre + "embeddings.norm.weight", {e});
  Add(pre + "embeddings.norm.bias", {e});
  if (r_.mask_token) Add(pre + "embeddings.mask_token", {1, 1, e});
  int64_t dim = e;
  for (size_t s = 0; s < r_.depths.size(); ++s) {
    const std::string sp = pre + "encoder.layers." + std::to_string(s) + ".";
    const int64_t mlp = static_cast<int64_t>(r_.mlp_ratio * static_cast<double>(dim));
    for (int64_t j = 0; j < r_.depths[s]; ++j) {
      const std::string bp = sp + "blocks." + std::to_string(j) + ".";
      Add(bp + "layernorm_before.weight", {dim});
      Add(bp + "layernorm_before.bias", {dim});
      if (r_.v2) {
        AddV2Attention(bp, dim, r_.num_heads[s]);
        AddMlp(bp, dim, mlp);
        continue;
      }
      Add(bp + Name("attention.relative_position_bias.relative_position_bias_table"),
          {(2 * ws - 1) * (2 * ws - 1), r_.num_heads[s]});
      // transformers 5 names (4.x and DonutSwin: attention.self.query ...,
      // attention.output.dense, intermediate.dense, output.dense).
      for (const char* n : {"q_proj", "k_proj", "v_proj"}) {
        Add(bp + Name(std::string("attention.") + n) + ".weight", {dim, dim});
        if (r_.qkv_bias) Add(bp + Name(std::string("attention.") + n) + ".bias", {dim});
      }
      Add(bp + Name("attention.o_proj") + ".weight", {dim, dim});
      Add(bp + Name("attention.o_proj") + ".bias", {dim});
      Add(bp + "layernorm_after.weight", {dim});
      Add(bp + "layernorm_after.bias", {dim});
      Add(bp + Name("mlp.fc1") + ".weight", {mlp, dim});
      Add(bp + Name("mlp.fc1") + ".bias", {mlp});
      Add(bp + Name("mlp.fc2") + ".weight", {dim, mlp});
      Add(bp + Name("mlp.fc2") + ".bias", {dim});
    }
    if (s + 1 < r_.depths.size()) {
      const int64_t norm = r_.v2 ? 2 * dim : 4 * dim;
      Add(sp + "downsample.reduction.weight", {2 * dim, 4 * dim});
      Add(sp + "downsample.norm.weight", {norm});
      Add(sp + "downsample.norm.bias", {norm});
      dim *= 2;
    }
  }
  dim_ = dim;
  if (!r_.final_norm) return;
  Add(pre + "layernorm.weight", {dim});
  Add(pre + "layernorm.bias", {dim});
}

// Swinv2Attention's modules in transformers' order: q / k (bias-free) / v / o, logit_scale,
// continuous_position_bias_mlp (Linear(2, 512), ReLU, Linear(512, heads) without bias).
void SwinTrunk::AddV2Attention(const std::string& bp, int64_t dim, int64_t heads) {
  for (const char* n : {"q_proj", "k_proj", "v_proj"}) {
    Add(bp + "attention." + n + ".weight", {dim, dim});
    if (r_.qkv_bias && std::string(n) != "k_proj") Add(bp + "attention." + n + ".bias", {dim});
  }
  Add(bp + "attention.o_proj.weight", {dim, dim});
  Add(bp + "attention.o_proj.bias", {dim});
  Add(bp + "attention.logit_scale", {heads, 1, 1});
  Add(bp + "attention.continuous_position_bias_mlp.0.weight", {512, 2});
  Add(bp + "attention.continuous_position_bias_mlp.0.bias", {512});
  Add(bp + "attention.continuous_position_bias_mlp.2.weight", {heads, 512});
}

void SwinTrunk::AddMlp(const std::string& bp, int64_t dim, int64_t mlp) {
  Add(bp + "layernorm_after.weight", {dim});
  Add(bp + "layernorm_after.bias", {dim});
  Add(bp + "mlp.fc1.weight", {mlp, dim});
  Add(bp + "mlp.fc1.bias", {mlp});
  Add(bp + "mlp.fc2.weight", {dim, mlp});
  Add(bp + "mlp.fc2.bias", {dim});
}

bool SwinTrunk::InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const {
  const std::string suffix = ".logit_scale";
  if (!r_.v2 || name.size() < suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  t.uniform_(1.8, 2.8, gen);
  return true;
}

int64_t SwinTrunk::LastSide() const {
  int64_t res = r_.image_size / r_.patch_size;
  for (size_t s = 0; s + 1 < r_.depths.size(); ++s) res /= 2;
  return res;
}

VisionFeatures SwinTrunk::Forward(const WeightMap& w, const at::Tensor& pixel_values) const {
  return ForwardMasked(w, pixel_values, at::Tensor());
}

VisionFeatures SwinTrunk::ForwardMasked(const WeightMap& w, const at::Tensor& pixel_values,
                                        const at::Tensor& bool_masked_pos) const {
  const std::string& pre = r_.prefix;
  const int64_t b = pixel_values.size(0);
  at::Tensor x = nn::PatchEmbed(
      pixel_values, GetWeight(w, pre + "embeddings.patch_embeddings.projection.weight"),
      GetWeight(w, pre + "embeddings.patch_embeddings.projection.bias"), r_.patch_size);
  x = LnSeq(w, pre + "embeddings.norm", x);
  if (bool_masked_pos.defined()) {
    TORCH_CHECK(r_.mask_token, "bool_masked_pos given to a Swin trunk without a mask token");
    at::Tensor tokens = GetWeight(w, pre + "embeddings.mask_token").expand({b, x.size(1), -1});
    at::Tensor mask = bool_masked_pos.unsqueeze(-1).to(tokens.scalar_type());
    x = x * (1.0 - mask) + tokens * mask;
  }
  int64_t res = r_.image_size / r_.patch_size, dim = r_.embed_dim;
  for (size_t s = 0; s < r_.depths.size(); ++s) {
    const std::string sp = pre + "encoder.layers." + std::to_string(s) + ".";
    const int64_t ws = std::min(r_.window_size, res);
    for (int64_t j = 0; j < r_.depths[s]; ++j) {
      const int64_t shift = (j % 2 == 1 && res > r_.window_size) ? r_.window_size / 2 : 0;
      const int64_t pws = r_.v2 ? r_.pretrained_window_sizes[s] : 0;
      x = Block(w, sp + "blocks." + std::to_string(j) + ".", x,
                {b, res, dim, r_.num_heads[s], ws, shift, pws});
    }
    if (s + 1 < r_.depths.size()) {
      at::Tensor g = x.view({b, res, res, dim});
      at::Tensor x0 = g.slice(1, 0, res, 2).slice(2, 0, res, 2);
      at::Tensor x1 = g.slice(1, 1, res, 2).slice(2, 0, res, 2);
      at::Tensor x2 = g.slice(1, 0, res, 2).slice(2, 1, res, 2);
      at::Tensor x3 = g.slice(1, 1, res, 2).slice(2, 1, res, 2);
      x = at::cat({x0, x1, x2, x3}, -1).reshape({b, -1, 4 * dim});
      if (r_.v2) {
        x = LnSeq(w, sp + "downsample.norm",
                  nn::Linear(x, GetWeight(w, sp + "downsample.reduction.weight")));
      } else {
        x = nn::Linear(LnSeq(w, sp + "downsample.norm", x),
                       GetWeight(w, sp + "downsample.reduction.weight"));
      }
      res /= 2;
      dim *= 2;
    }
  }
  if (r_.final_norm) x = LnSeq(w, pre + "layernorm", x);
  return {x, x.mean(1)};
}

std::vector<int64_t> SwinTrunk::LastHiddenShape() const {
  const int64_t res = LastSide();
  return {res * res, dim_};
}

at::Tensor SwinTrunk::LnSeq(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
  return nn::LayerNorm(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"), r_.eps);
}

// Attention within each window of `win` [B * nW, ws * ws, C], through the output projection.
at::Tensor SwinTrunk::WindowAttention(const WeightMap& w, const std::string& bp,
                                      const at::Tensor& win, const BlockShape& sh) const {
  const int64_t dim = sh.dim, heads = sh.heads, ws = sh.ws;
  const auto lopts = at::TensorOptions().dtype(at::kLong).device(win.device());
  const int64_t n = ws * ws, bw = win.size(0), hd = dim / heads;
  auto proj = [&](const char* name) {
    const std::string p = bp + Name(std::string("attention.") + name);
    const bool bias = r_.qkv_bias && !(r_.v2 && std::string(name) == "k_proj");
    return nn::Linear(win, GetWeight(w, p + ".weight"),
                      bias ? GetWeight(w, p + ".bias") : at::Tensor())
        .view({bw, n, heads, hd})
        .transpose(1, 2);
  };
  at::Tensor q = proj("q_proj"), k = proj("k_proj"), v = proj("v_proj");
  if (r_.v2) {
    // nn.functional.normalize with eps = finfo(dtype).eps; q * exp(clamp(logit_scale, log 100)).
    const double eps = q.scalar_type() == at::kDouble     ? 2.220446049250313e-16
                       : q.scalar_type() == at::kFloat    ? 1.1920928955078125e-07
                       : q.scalar_type() == at::kBFloat16 ? 0.0078125
                                                          : 0.0009765625;
    auto unit = [&](const at::Tensor& t) {
      return t / at::clamp_min(at::linalg_vector_norm(t, 2, {-1}, true), eps);
    };
    const at::Tensor scale =
        at::exp(at::clamp_max(GetWeight(w, bp + "attention.logit_scale"), std::log(100.0)));
    at::Tensor scores = nn::Matmul(unit(q) * scale, unit(k).transpose(-1, -2));
    scores = scores + ContinuousBias(w, bp, sh, scores).unsqueeze(0);
    return FinishWindowAttention(w, bp, scores, v, sh);
  }
  at::Tensor scores = nn::Matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd));
  // Relative position bias: index (dh + ws - 1) * (2 ws - 1) + (dw + ws - 1).
  at::Tensor idx = at::arange(n, lopts);
  at::Tensor ih = at::div(idx, ws, "floor"), iw = at::remainder(idx, ws);
  at::Tensor rel = (ih.unsqueeze(1) - ih.unsqueeze(0) + (ws - 1)) * (2 * ws - 1) +
                   (iw.unsqueeze(1) - iw.unsqueeze(0) + (ws - 1));
  const at::Tensor& table =
      GetWeight(w, bp + Name("attention.relative_position_bias.relative_position_bias_table"));
  at::Tensor bias = table.index_select(0, rel.reshape({-1})).view({n, n, heads}).permute({2, 0, 1});
  scores = scores + bias.unsqueeze(0);
  return FinishWindowAttention(w, bp, scores, v, sh);
}

at::Tensor SwinTrunk::ContinuousBias(const WeightMap& w, const std::string& bp,
                                     const BlockShape& sh, const at::Tensor& like) const {
  const int64_t ws = sh.ws, side = 2 * ws - 1, n = ws * ws;
  // create_coords_table_and_index: (dh, dw) over [-(ws - 1), ws - 1] divided by
  // pretrained_ws - 1 (or ws - 1), times 8, then sign * log2(|x| + 1) / log2(8); in float
  // (double for a double run) as transformers' float32, then in the model's dtype.
  const double norm = sh.pretrained_ws > 0 ? static_cast<double>(sh.pretrained_ws - 1)
                      : ws > 1             ? static_cast<double>(ws - 1)
                                           : 1.0;
  const auto table_type = like.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor r = at::arange(side, like.options().dtype(table_type)) - static_cast<double>(ws - 1);
  at::Tensor dh = r.view({side, 1}).expand({side, side}).reshape({-1});
  at::Tensor dw = r.view({1, side}).expand({side, side}).reshape({-1});
  at::Tensor table = at::stack({dh, dw}, -1) / norm * 8.0;
  table = at::sign(table) * at::log2(at::abs(table) + 1.0) / 3.0;
  const at::Tensor coords = table.to(like.scalar_type());
  const std::string m = bp + "attention.continuous_position_bias_mlp.";
  at::Tensor hidden =
      at::relu(nn::Linear(coords, GetWeight(w, m + "0.weight"), GetWeight(w, m + "0.bias")));
  at::Tensor per_offset = nn::Linear(hidden, GetWeight(w, m + "2.weight"));  // [side^2, heads]
  const auto lopts = at::TensorOptions().dtype(at::kLong).device(like.device());
  at::Tensor idx = at::arange(n, lopts);
  at::Tensor ih = at::div(idx, ws, "floor"), iw = at::remainder(idx, ws);
  at::Tensor rel = (ih.unsqueeze(1) - ih.unsqueeze(0) + (ws - 1)) * side +
                   (iw.unsqueeze(1) - iw.unsqueeze(0) + (ws - 1));
  at::Tensor bias =
      per_offset.index_select(0, rel.reshape({-1})).view({n, n, sh.heads}).permute({2, 0, 1});
  return at::sigmoid(bias) * 16.0;
}

// The shifted windows' mask, softmax, the values and o_proj.
at::Tensor SwinTrunk::FinishWindowAttention(const WeightMap& w, const std::string& bp,
                                            at::Tensor scores, const at::Tensor& v,
                                            const BlockShape& sh) const {
  const int64_t res = sh.res, dim = sh.dim, heads = sh.heads, ws = sh.ws, shift = sh.shift;
  const auto lopts = at::TensorOptions().dtype(at::kLong).device(scores.device());
  const int64_t n = ws * ws, bw = scores.size(0);
  if (shift > 0) {
    // Region ids of the shifted image (HF img_mask), partitioned into windows.
    at::Tensor r = at::arange(res, lopts);
    at::Tensor reg = (r >= res - ws).to(at::kLong) + (r >= res - shift).to(at::kLong);
    at::Tensor ids = (reg.unsqueeze(1) * 3 + reg.unsqueeze(0)).view({1, res, res, 1});
    at::Tensor mw = Partition(ids, ws).squeeze(-1);  // [nW, N]
    at::Tensor mask = (mw.unsqueeze(1) != mw.unsqueeze(2)).to(scores.scalar_type()) * -100.0;
    const int64_t nw = mw.size(0);
    scores = (scores.view({bw / nw, nw, heads, n, n}) + mask.unsqueeze(1).unsqueeze(0))
                 .view({bw, heads, n, n});
  }
  at::Tensor ctx = nn::Matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({bw, n, dim});
  return nn::Linear(ctx, GetWeight(w, bp + Name("attention.o_proj") + ".weight"),
                    GetWeight(w, bp + Name("attention.o_proj") + ".bias"));
}

at::Tensor SwinTrunk::Block(const WeightMap& w, const std::string& bp, const at::Tensor& x,
                            const BlockShape& sh) const {
  const int64_t b = sh.b, res = sh.res, dim = sh.dim, ws = sh.ws, shift = sh.shift;
  // v2 normalises after the attention (res-post-norm), v1 before.
  at::Tensor y = (r_.v2 ? x : LnSeq(w, bp + "layernorm_before", x)).view({b, res, res, dim});
  if (shift > 0) y = at::roll(y, {-shift, -shift}, {1, 2});
  at::Tensor merged = Merge(WindowAttention(w, bp, Partition(y, ws), sh), b, res, ws);
  if (shift > 0) merged = at::roll(merged, {shift, shift}, {1, 2});
  if (r_.v2) {  // res-post-norm
    at::Tensor h = x + LnSeq(w, bp + "layernorm_before", merged.reshape({b, res * res, dim}));
    at::Tensor m = Activate(
        nn::Linear(h, GetWeight(w, bp + "mlp.fc1.weight"), GetWeight(w, bp + "mlp.fc1.bias")),
        r_.act);
    m = nn::Linear(m, GetWeight(w, bp + "mlp.fc2.weight"), GetWeight(w, bp + "mlp.fc2.bias"));
    return h + LnSeq(w, bp + "layernorm_after", m);
  }
  at::Tensor h = x + merged.reshape({b, res * res, dim});
  at::Tensor m = LnSeq(w, bp + "layernorm_after", h);
  const std::string fc1 = bp + Name("mlp.fc1"), fc2 = bp + Name("mlp.fc2");
  m = Activate(nn::Linear(m, GetWeight(w, fc1 + ".weight"), GetWeight(w, fc1 + ".bias")), r_.act);
  return h + nn::Linear(m, GetWeight(w, fc2 + ".weight"), GetWeight(w, fc2 + ".bias"));
}

std::string SwinTrunk::Name(const std::string& v5) const {
  if (!r_.donut_names) return v5;
  static const std::map<std::string, std::string> kDonut = {
      {"attention.q_proj", "attention.self.query"},
      {"attention.k_proj", "attention.self.key"},
      {"attention.v_proj", "attention.self.value"},
      {"attention.o_proj", "attention.output.dense"},
      {"attention.relative_position_bias.relative_position_bias_table",
       "attention.self.relative_position_bias_table"},
      {"mlp.fc1", "intermediate.dense"},
      {"mlp.fc2", "output.dense"}};
  auto it = kDonut.find(v5);
  return it == kDonut.end() ? v5 : it->second;
}

}  // namespace ts::zoo::internal
