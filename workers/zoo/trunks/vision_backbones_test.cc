// The transformer vision backbones added for issue 33 (ijepa, dinov3_vit, swinv2) against
// references written from transformers' modular files in double (not from the zoo's trunks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"
#include "workers/zoo/trunks/vision_formula_test_util.h"

namespace ts::zoo {
namespace {

using json = nlohmann::json;

using testing::Lin;
using testing::Ln;
using testing::Ran;
using testing::RotateHalf;
using testing::RunClass;

// modular_ijepa.py: IJepaEmbeddings (ViT's without the cls token: patches + position_embeddings
// over the patches), ViT's v5 layers (pre-LN, q/k/v/o_proj, mlp.fc1 / fc2, gelu), the final
// layernorm.
at::Tensor RefIJepa(const WeightMap& w, const std::string& pre, const json& c,
                    const at::Tensor& pixels) {
  const int64_t h = c.at("hidden_size"), heads = c.at("num_attention_heads");
  const double eps = c.at("layer_norm_eps");
  const int64_t b = pixels.size(0), hd = h / heads;
  at::Tensor x = at::conv2d(pixels, w.at(pre + "embeddings.patch_embeddings.projection.weight"),
                            w.at(pre + "embeddings.patch_embeddings.projection.bias"),
                            c.at("patch_size").get<int64_t>())
                     .flatten(2)
                     .transpose(1, 2);
  x = x + w.at(pre + "embeddings.position_embeddings");
  const int64_t s = x.size(1);
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string l = pre + "layers." + std::to_string(i) + ".";
    at::Tensor y = Ln(w, l + "layernorm_before", x, eps);
    auto split = [&](const char* m) {
      return Lin(w, l + "attention." + m, y).view({b, s, heads, hd}).transpose(1, 2);
    };
    at::Tensor probs = at::softmax(
        at::matmul(split("q_proj"), split("k_proj").transpose(-1, -2)) / std::sqrt(1.0 * hd), -1);
    x = x + Lin(w, l + "attention.o_proj",
                at::matmul(probs, split("v_proj")).transpose(1, 2).reshape({b, s, h}));
    y = Ln(w, l + "layernorm_after", x, eps);
    x = x + Lin(w, l + "mlp.fc2", at::gelu(Lin(w, l + "mlp.fc1", y)));
  }
  return Ln(w, pre + "layernorm", x, eps);
}

TEST(VisionBackbonesTest, IJepaHasNoClsTokenAndClassifiesTheTokenMean) {
  Ran model = RunClass("IJepaModel");
  ASSERT_TRUE(model.m);
  EXPECT_EQ(model.m->spec().task, "image-feature-extraction");
  const json& c = model.m->spec().tiny_config;
  const at::Tensor seq = RefIJepa(model.w, "", c, model.pixels);
  EXPECT_EQ(seq.sizes(), (at::IntArrayRef{2, 16, c.at("hidden_size").get<int64_t>()}));
  ASSERT_EQ(model.out.size(), 1u);  // add_pooling_layer false: no pooler_output
  EXPECT_LT(testing::MaxAbs(model.out[0], seq), 1e-10);
  EXPECT_FALSE(testing::HasWeight(*model.m, "embeddings.cls_token"));
  EXPECT_EQ(testing::WeightShape(*model.m, "embeddings.position_embeddings"),
            (std::vector<int64_t>{1, 16, c.at("hidden_size").get<int64_t>()}));

  Ran cls = RunClass("IJepaForImageClassification");
  ASSERT_TRUE(cls.m);
  const at::Tensor s2 = RefIJepa(cls.w, "ijepa.", cls.m->spec().tiny_config, cls.pixels);
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", s2.mean(1))), 1e-10);
  testing::ExpectConfigError("IJepaModel", "patch_size", "x", "patch_size");
}

// modular_dinov3_vit.py in eval mode: DINOv3ViTEmbeddings (cls, registers, patches; no
// positions), DINOv3ViTRopePositionEmbedding's cos / sin over the patch tokens only, the layers
// with layer scale and the (gated) MLP, the final norm.
at::Tensor RefDinov3Vit(const WeightMap& w, const json& c, const at::Tensor& pixels) {
  const int64_t h = c.at("hidden_size"), heads = c.at("num_attention_heads");
  const int64_t p = c.at("patch_size"), regs = c.value("num_register_tokens", int64_t{0});
  const double eps = c.value("layer_norm_eps", 1e-5), theta = c.value("rope_theta", 100.0);
  const bool gated = c.value("use_gated_mlp", false);
  const std::string act = c.value("hidden_act", "gelu");
  const int64_t b = pixels.size(0), hd = h / heads, n = pixels.size(2) / p;
  at::Tensor x = at::conv2d(pixels, w.at("embeddings.patch_embeddings.weight"),
                            w.at("embeddings.patch_embeddings.bias"), p)
                     .flatten(2)
                     .transpose(1, 2);
  std::vector<at::Tensor> parts = {w.at("embeddings.cls_token").expand({b, 1, h})};
  if (regs > 0) parts.push_back(w.at("embeddings.register_tokens").expand({b, regs, h}));
  parts.push_back(x);
  x = at::cat(parts, 1);
  // get_patches_center_coordinates, then the angles.
  const auto dbl = at::TensorOptions().dtype(at::kDouble);
  at::Tensor ch = at::arange(0.5, static_cast<double>(n), 1.0, dbl) / static_cast<double>(n);
  std::vector<at::Tensor> mesh = at::meshgrid({ch, ch}, "ij");
  at::Tensor coords = at::stack({mesh[0], mesh[1]}, -1).flatten(0, 1) * 2.0 - 1.0;
  at::Tensor inv_freq = 1.0 / at::pow(theta, at::arange(0.0, 1.0, 4.0 / hd, dbl));
  at::Tensor angles = (2 * M_PI * coords.unsqueeze(-1) * inv_freq.view({1, 1, -1})).flatten(1, 2);
  angles = angles.repeat({1, 2});
  const at::Tensor cos = at::cos(angles), sin = at::sin(angles);
  const int64_t s = x.size(1), np = n * n;
  auto rope = [&](const at::Tensor& t) {
    at::Tensor pt = t.narrow(2, s - np, np);
    return at::cat({t.narrow(2, 0, s - np), pt * cos + RotateHalf(pt) * sin}, 2);
  };
  auto activate = [&](const at::Tensor& t) { return act == "silu" ? at::silu(t) : at::gelu(t); };
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string l = "layer." + std::to_string(i) + ".";
    at::Tensor y = Ln(w, l + "norm1", x, eps);
    auto split = [&](const char* m) {
      return Lin(w, l + "attention." + m, y).view({b, s, heads, hd}).transpose(1, 2);
    };
    at::Tensor probs =
        at::softmax(at::matmul(rope(split("q_proj")), rope(split("k_proj")).transpose(-1, -2)) /
                        std::sqrt(1.0 * hd),
                    -1);
    at::Tensor a = Lin(w, l + "attention.o_proj",
                       at::matmul(probs, split("v_proj")).transpose(1, 2).reshape({b, s, h}));
    x = x + a * w.at(l + "layer_scale1.lambda1");
    y = Ln(w, l + "norm2", x, eps);
    at::Tensor m = gated ? activate(Lin(w, l + "mlp.gate_proj", y)) * Lin(w, l + "mlp.up_proj", y)
                         : activate(Lin(w, l + "mlp.up_proj", y));
    x = x + Lin(w, l + "mlp.down_proj", m) * w.at(l + "layer_scale2.lambda1");
  }
  return Ln(w, "norm", x, eps);
}

TEST(VisionBackbonesTest, Dinov3VitRotatesOnlyThePatchTokensAsTransformers) {
  Ran r = RunClass("DINOv3ViTModel");
  ASSERT_TRUE(r.m);
  const json& c = r.m->spec().tiny_config;
  EXPECT_EQ(c.at("num_register_tokens"), 4);
  EXPECT_EQ(c.at("hidden_size").get<int64_t>() / c.at("num_attention_heads").get<int64_t>(), 16);
  const at::Tensor seq = RefDinov3Vit(r.w, c, r.pixels);
  EXPECT_EQ(seq.size(1), 1 + 4 + 16);
  EXPECT_LT(testing::MaxAbs(r.out[0], seq), 1e-10);
  EXPECT_LT(testing::MaxAbs(r.out[1], seq.select(1, 0)), 1e-10);
  EXPECT_FALSE(testing::HasWeight(*r.m, "attention.k_proj.bias"));
  bool mask = false;
  for (const auto& e : StateDictShapes(*r.m)) {
    mask = mask || e.name == "embeddings.mask_token";
    EXPECT_NE(e.name, "layer.0.attention.k_proj.bias");  // key_bias false
  }
  EXPECT_TRUE(mask);
  EXPECT_FALSE(testing::HasWeight(*r.m, "embeddings.mask_token"));

  // The gated MLP (the 7B's form) with silu, all biases, no registers.
  json cfg = *ExampleConfig("DINOv3ViTModel");
  cfg["use_gated_mlp"] = true;
  cfg["hidden_act"] = "silu";
  cfg["key_bias"] = true;
  cfg["num_register_tokens"] = 0;
  Ran g = RunClass("DINOv3ViTModel", cfg);
  ASSERT_TRUE(g.m);
  EXPECT_TRUE(testing::HasWeight(*g.m, "layer.0.mlp.gate_proj.weight"));
  EXPECT_TRUE(testing::HasWeight(*g.m, "layer.0.attention.k_proj.bias"));
  EXPECT_LT(testing::MaxAbs(g.out[0], RefDinov3Vit(g.w, g.m->spec().tiny_config, g.pixels)), 1e-10);
  bool empty_registers = false;
  for (const auto& e : StateDictShapes(*g.m)) {
    empty_registers = empty_registers || (e.name == "embeddings.register_tokens" &&
                                          e.shape == std::vector<int64_t>{1, 0, 64});
  }
  EXPECT_TRUE(empty_registers);
  testing::ExpectConfigError("DINOv3ViTModel", "num_register_tokens", -1, "num_register_tokens");
  testing::ExpectConfigError("DINOv3ViTModel", "use_gated_mlp", "yes", "use_gated_mlp");
}

// ---- swinv2 (modular_swinv2.py)

at::Tensor WindowPartition(const at::Tensor& x, int64_t ws) {
  const int64_t b = x.size(0), h = x.size(1), wd = x.size(2), c = x.size(3);
  return x.view({b, h / ws, ws, wd / ws, ws, c})
      .permute({0, 1, 3, 2, 4, 5})
      .reshape({-1, ws, ws, c});
}

at::Tensor WindowReverse(const at::Tensor& x, int64_t ws, int64_t h, int64_t wd) {
  const int64_t c = x.size(-1);
  return x.view({-1, h / ws, wd / ws, ws, ws, c})
      .permute({0, 1, 3, 2, 4, 5})
      .reshape({-1, h, wd, c});
}

// Swinv2Attention's 16 * sigmoid(continuous_position_bias_mlp(relative_coords_table))[index].
at::Tensor RefContinuousBias(const WeightMap& w, const std::string& a, int64_t ws, int64_t pws,
                             int64_t heads) {
  const auto dbl = at::TensorOptions().dtype(at::kDouble);
  at::Tensor rc = at::arange(-(ws - 1), ws, dbl);
  std::vector<at::Tensor> mesh = at::meshgrid({rc, rc}, "ij");
  at::Tensor table = at::stack({mesh[0], mesh[1]}).permute({1, 2, 0}).unsqueeze(0);
  if (pws > 0) {
    table = table / static_cast<double>(pws - 1);
  } else if (ws > 1) {
    table = table / static_cast<double>(ws - 1);
  }
  table = table * 8;
  table = at::sign(table) * at::log2(at::abs(table) + 1.0) / std::log2(8.0);
  at::Tensor mlp =
      at::linear(at::relu(at::linear(table, w.at(a + "continuous_position_bias_mlp.0.weight"),
                                     w.at(a + "continuous_position_bias_mlp.0.bias"))),
                 w.at(a + "continuous_position_bias_mlp.2.weight"));
  mlp = mlp.view({-1, heads});
  at::Tensor cw = at::arange(ws, at::TensorOptions().dtype(at::kLong));
  std::vector<at::Tensor> cm = at::meshgrid({cw, cw}, "ij");
  at::Tensor flat = at::stack({cm[0], cm[1]}).flatten(1);
  at::Tensor rel = (flat.unsqueeze(2) - flat.unsqueeze(1)).permute({1, 2, 0}).contiguous();
  at::Tensor r0 = (rel.select(2, 0) + (ws - 1)) * (2 * ws - 1);
  at::Tensor index = r0 + rel.select(2, 1) + (ws - 1);
  at::Tensor bias = mlp.index_select(0, index.view(-1)).view({ws * ws, ws * ws, -1});
  return 16 * at::sigmoid(bias.permute({2, 0, 1}).unsqueeze(0));
}

// Swinv2Layer (res-post-norm) over x [B, res * res, dim].
at::Tensor RefSwinv2Layer(const WeightMap& w, const std::string& l, const at::Tensor& x,
                          int64_t res, int64_t heads, int64_t window, int64_t shift_cfg,
                          int64_t pws, double eps) {
  const int64_t b = x.size(0), dim = x.size(2), hd = dim / heads;
  int64_t ws = window, shift = shift_cfg;
  if (res <= window) {  // set_shift_and_window_size
    shift = 0;
    ws = res;
  }
  at::Tensor h = x.view({b, res, res, dim});
  if (shift > 0) h = at::roll(h, {-shift, -shift}, {1, 2});
  at::Tensor win = WindowPartition(h, ws).view({-1, ws * ws, dim});
  const int64_t bw = win.size(0), n = ws * ws;
  auto split = [&](const char* m) {
    return Lin(w, l + "attention." + m, win).view({bw, n, heads, hd}).transpose(1, 2);
  };
  auto unit = [](const at::Tensor& t) {
    return t / at::clamp_min(t.norm(2, {-1}, true), 2.220446049250313e-16);
  };
  at::Tensor q = unit(split("q_proj")) *
                 at::exp(at::clamp_max(w.at(l + "attention.logit_scale"), std::log(100.0)));
  at::Tensor scores = at::matmul(q, unit(split("k_proj")).transpose(-1, -2));
  at::Tensor mask = RefContinuousBias(w, l + "attention.", ws, pws, heads);
  if (shift > 0) {  // get_attn_mask
    at::Tensor img = at::zeros({1, res, res, 1}, at::TensorOptions().dtype(at::kDouble));
    const int64_t bounds[4] = {0, res - ws, res - shift, res};
    double cnt = 0;
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        img.slice(1, bounds[i], bounds[i + 1]).slice(2, bounds[j], bounds[j + 1]).fill_(cnt);
        cnt += 1;
      }
    }
    at::Tensor mw = WindowPartition(img, ws).view({-1, n});
    at::Tensor am = mw.unsqueeze(1) - mw.unsqueeze(2);
    am = at::where(am != 0, at::full_like(am, -100.0), at::zeros_like(am));
    const int64_t nw = am.size(0);
    am = am.unsqueeze(1).unsqueeze(0).expand({bw / nw, -1, -1, -1, -1}).reshape({-1, 1, n, n});
    mask = mask + am;
  }
  at::Tensor ctx = at::matmul(at::softmax(scores + mask, -1), split("v_proj"));
  at::Tensor out = Lin(w, l + "attention.o_proj", ctx.transpose(1, 2).reshape({bw, n, dim}));
  at::Tensor back = WindowReverse(out.view({-1, ws, ws, dim}), ws, res, res);
  if (shift > 0) back = at::roll(back, {shift, shift}, {1, 2});
  at::Tensor hs = x + Ln(w, l + "layernorm_before", back.reshape({b, res * res, dim}), eps);
  at::Tensor m = Lin(w, l + "mlp.fc2", at::gelu(Lin(w, l + "mlp.fc1", hs)));
  return hs + Ln(w, l + "layernorm_after", m, eps);
}

// Swinv2Model's sequence_output (final_norm) or the last stage's output.
at::Tensor RefSwinv2(const WeightMap& w, const std::string& pre, const json& c,
                     const at::Tensor& pixels, bool final_norm) {
  const int64_t p = c.at("patch_size"), window = c.at("window_size");
  const double eps = c.value("layer_norm_eps", 1e-5);
  const auto depths = c.at("depths").get<std::vector<int64_t>>();
  const auto heads = c.at("num_heads").get<std::vector<int64_t>>();
  const auto pws = c.at("pretrained_window_sizes").get<std::vector<int64_t>>();
  const int64_t b = pixels.size(0);
  at::Tensor x = at::conv2d(pixels, w.at(pre + "embeddings.patch_embeddings.projection.weight"),
                            w.at(pre + "embeddings.patch_embeddings.projection.bias"), p)
                     .flatten(2)
                     .transpose(1, 2);
  x = Ln(w, pre + "embeddings.norm", x, eps);
  int64_t res = pixels.size(2) / p;
  for (size_t s = 0; s < depths.size(); ++s) {
    const std::string sp = pre + "encoder.layers." + std::to_string(s) + ".";
    for (int64_t j = 0; j < depths[s]; ++j) {
      x = RefSwinv2Layer(w, sp + "blocks." + std::to_string(j) + ".", x, res, heads[s], window,
                         j % 2 == 0 ? 0 : window / 2, pws[s], eps);
    }
    if (s + 1 == depths.size()) break;
    const int64_t dim = x.size(2);
    at::Tensor g = x.view({b, res, res, dim});
    std::vector<at::Tensor> parts;
    for (int64_t col = 0; col < 2; ++col) {
      for (int64_t row = 0; row < 2; ++row) {
        parts.push_back(g.slice(1, row, res, 2).slice(2, col, res, 2));
      }
    }
    x = at::cat(parts, -1).view({b, -1, 4 * dim});
    x = Ln(w, sp + "downsample.norm", Lin(w, sp + "downsample.reduction", x), eps);
    res /= 2;
  }
  return final_norm ? Ln(w, pre + "layernorm", x, eps) : x;
}

TEST(VisionBackbonesTest, Swinv2CosineAttentionContinuousBiasAndPostNormAsTransformers) {
  Ran model = RunClass("Swinv2Model");
  ASSERT_TRUE(model.m);
  const json& c = model.m->spec().tiny_config;
  EXPECT_EQ(c.at("pretrained_window_sizes"), json({0, 0}));
  const at::Tensor seq = RefSwinv2(model.w, "", c, model.pixels, true);
  EXPECT_LT(testing::MaxAbs(model.out[0], seq), 1e-10);
  EXPECT_LT(testing::MaxAbs(model.out[1], seq.mean(1)), 1e-10);
  EXPECT_FALSE(testing::HasWeight(*model.m, "encoder.layers.0.blocks.0.attention.k_proj.bias"));
  EXPECT_EQ(testing::WeightShape(*model.m, "encoder.layers.0.downsample.norm.weight"),
            (std::vector<int64_t>{64}));  // 2 x dim: after the reduction

  // Pre-trained windows (the 192-to-256 fine-tunes) normalise the coordinates by them.
  json cfg = *ExampleConfig("Swinv2ForImageClassification");
  cfg["pretrained_window_sizes"] = {12, 12, 12, 6};
  Ran cls = RunClass("Swinv2ForImageClassification", cfg);
  ASSERT_TRUE(cls.m);
  EXPECT_EQ(cls.m->spec().tiny_config.at("pretrained_window_sizes"), json({12, 12}));
  const at::Tensor s2 = RefSwinv2(cls.w, "swinv2.", cls.m->spec().tiny_config, cls.pixels, true);
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", s2.mean(1))), 1e-10);

  Ran bb = RunClass("Swinv2Backbone");
  ASSERT_TRUE(bb.m);
  EXPECT_EQ(bb.m->spec().task, "backbone");
  EXPECT_FALSE(testing::HasWeight(*bb.m, "layernorm.weight"));
  const at::Tensor last = RefSwinv2(bb.w, "", bb.m->spec().tiny_config, bb.pixels, false);
  const at::Tensor map = last.view({2, 4, 4, last.size(2)}).permute({0, 3, 1, 2});
  EXPECT_LT(testing::MaxAbs(bb.out[0], map), 1e-10);

  auto mim = testing::Build("Swinv2ForMaskedImageModeling");
  ASSERT_TRUE(mim);
  EXPECT_TRUE(testing::HasWeight(*mim, "swinv2.embeddings.mask_token"));
  testing::ExpectConfigError("Swinv2Model", "pretrained_window_sizes", json({0, 1, 0, 0}),
                             "pretrained_window_sizes");
  testing::ExpectConfigError("Swinv2Model", "pretrained_window_sizes", json({0, 0}),
                             "pretrained_window_sizes");
  testing::ExpectConfigError("Swinv2Backbone", "out_features", json{"stage2", "stage4"},
                             "out_features");
}

// VitDet (modeling_vitdet.py): get_rel_pos for q_size == k_size (no resize).
at::Tensor RefVitDetRelPos(const at::Tensor& rel_pos, int64_t size) {
  at::Tensor q = at::arange(size, at::kDouble).unsqueeze(1);
  at::Tensor k = at::arange(size, at::kDouble).unsqueeze(0);
  return rel_pos.index({((q - k) + (size - 1)).to(at::kLong)});
}

at::Tensor RefVitDetAttention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                              int64_t heads, bool rel) {
  const int64_t b = x.size(0), h = x.size(1), wd = x.size(2);
  at::Tensor qkv = Lin(w, p + "qkv", x).reshape({b, h * wd, 3, heads, -1}).permute({2, 0, 3, 1, 4});
  auto parts = qkv.reshape({3, b * heads, h * wd, -1}).unbind(0);
  at::Tensor q = parts[0], k = parts[1], v = parts[2];
  at::Tensor attn = at::matmul(q * std::pow(q.size(-1), -0.5), k.transpose(-2, -1));
  if (rel) {
    at::Tensor rh = RefVitDetRelPos(w.at(p + "rel_pos_h"), h);
    at::Tensor rw = RefVitDetRelPos(w.at(p + "rel_pos_w"), wd);
    at::Tensor rq = q.reshape({b * heads, h, wd, -1});
    at::Tensor relh = at::einsum("bhwc,hkc->bhwk", {rq, rh});
    at::Tensor relw = at::einsum("bhwc,wkc->bhwk", {rq, rw});
    attn = (attn.view({b * heads, h, wd, h, wd}) + relh.unsqueeze(4) + relw.unsqueeze(3))
               .view({b * heads, h * wd, h * wd});
  }
  at::Tensor out = at::matmul(attn.softmax(-1), v)
                       .view({b, heads, h, wd, -1})
                       .permute({0, 2, 3, 1, 4})
                       .reshape({b, h, wd, -1});
  return Lin(w, p + "proj", out);
}

// VitDetLayerNorm (channels first, eps 1e-6).
at::Tensor RefVitDetCfLn(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  at::Tensor u = x.mean(1, true);
  at::Tensor s = (x - u).pow(2).mean(1, true);
  return w.at(p + "weight").view({-1, 1, 1}) * ((x - u) / at::sqrt(s + 1e-6)) +
         w.at(p + "bias").view({-1, 1, 1});
}

// VitDetModel's last_hidden_state for the tiny config `c`.
at::Tensor RefVitDet(const WeightMap& w, const json& c, const at::Tensor& px) {
  const int64_t patch = c.at("patch_size"), heads = c.at("num_attention_heads");
  at::Tensor x = at::conv2d(px, w.at("embeddings.projection.weight"),
                            w.at("embeddings.projection.bias"), patch);
  const int64_t g = x.size(2);
  x = x.permute({0, 2, 3, 1}) +
      w.at("embeddings.position_embeddings").slice(1, 1).reshape({1, g, g, -1});
  const auto windows = c.at("window_block_indices").get<std::vector<int64_t>>();
  const auto residual = c.at("residual_block_indices").get<std::vector<int64_t>>();
  const int64_t ws = c.at("window_size");
  const bool rel = c.at("use_relative_position_embeddings");
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    at::Tensor h = Ln(w, p + "norm1", x, 1e-6);
    const bool win = std::count(windows.begin(), windows.end(), i) > 0;
    if (win) {
      // window_partition / window_unpartition with the zero padding.
      const int64_t b = h.size(0), H = h.size(1), W = h.size(2), C = h.size(3);
      const int64_t ph = (ws - H % ws) % ws, pw = (ws - W % ws) % ws;
      at::Tensor y = at::constant_pad_nd(h, {0, 0, 0, pw, 0, ph});
      y = y.view({b, (H + ph) / ws, ws, (W + pw) / ws, ws, C})
              .permute({0, 1, 3, 2, 4, 5})
              .contiguous()
              .view({-1, ws, ws, C});
      y = RefVitDetAttention(w, p + "attention.", y, heads, rel);
      h = y.view({b, (H + ph) / ws, (W + pw) / ws, ws, ws, -1})
              .permute({0, 1, 3, 2, 4, 5})
              .contiguous()
              .view({b, H + ph, W + pw, -1})
              .index({at::indexing::Slice(), at::indexing::Slice(0, H), at::indexing::Slice(0, W)});
    } else {
      h = RefVitDetAttention(w, p + "attention.", h, heads, rel);
    }
    x = x + h;
    x = x + Lin(w, p + "mlp.fc2", at::gelu(Lin(w, p + "mlp.fc1", Ln(w, p + "norm2", x, 1e-6))));
    if (std::count(residual.begin(), residual.end(), i) > 0) {
      const std::string r = p + "residual.";
      at::Tensor y = x.permute({0, 3, 1, 2});
      at::Tensor o =
          at::gelu(RefVitDetCfLn(w, r + "norm1.", at::conv2d(y, w.at(r + "conv1.weight"))));
      o = at::gelu(
          RefVitDetCfLn(w, r + "norm2.", at::conv2d(o, w.at(r + "conv2.weight"), {}, 1, 1)));
      o = RefVitDetCfLn(w, r + "norm3.", at::conv2d(o, w.at(r + "conv3.weight")));
      x = (y + o).permute({0, 2, 3, 1});
    }
  }
  return x.permute({0, 3, 1, 2});
}

TEST(VitDetTest, WindowedRelativePositionsResidualBlocksModelAndBackboneAsTransformers) {
  Ran m = RunClass("VitDetModel");
  ASSERT_TRUE(m.m);
  const json& c = m.m->spec().tiny_config;
  // The tiny grid 6 x 6 under 4 x 4 windows: the partition pads.
  ASSERT_EQ(c.at("window_size"), 4);
  ASSERT_EQ(c.at("window_block_indices"), json({0}));
  ASSERT_EQ(c.at("residual_block_indices"), json({1}));
  at::Tensor last = RefVitDet(m.w, c, m.pixels);
  ASSERT_EQ(last.sizes(), m.out[0].sizes());
  EXPECT_LT(testing::MaxAbs(m.out[0], last), 1e-10);
  Ran b = RunClass("VitDetBackbone");
  ASSERT_TRUE(b.m);
  EXPECT_LT(testing::MaxAbs(b.out[0], RefVitDet(b.w, b.m->spec().tiny_config, b.pixels)), 1e-10);
  testing::ExpectConfigError("VitDetModel", "window_block_indices", json({0, 12}),
                             "window_block_indices");
  testing::ExpectConfigError("VitDetModel", "num_attention_heads", 5, "hidden_size");
}

}  // namespace
}  // namespace ts::zoo
