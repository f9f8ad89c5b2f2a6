// The dense and video vision tasks against references written in double from transformers'
// sources (not from the zoo's trunks and heads): masked image modeling (modeling_vit.py,
// modeling_deit.py *ForMaskedImageModeling), SegFormer (modeling_segformer.py), GLPN
// (modeling_glpn.py) and VideoMAE (modeling_videomae.py).
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
using testing::RanBatch;
using testing::RunClassBatch;

// softmax(q k^T / sqrt(d)) v over [B, S, H*D] projections, heads split as transpose_for_scores.
at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads) {
  const int64_t b = q.size(0), d = q.size(2) / heads;
  auto split = [&](const at::Tensor& t) {
    return t.view({b, t.size(1), heads, d}).permute({0, 2, 1, 3});
  };
  at::Tensor probs =
      at::softmax(at::matmul(split(q), split(k).transpose(-1, -2)) / std::sqrt(1.0 * d), -1);
  return at::matmul(probs, split(v)).permute({0, 2, 1, 3}).reshape({b, q.size(1), q.size(2)});
}

// ---- masked image modeling

// ViTModel / DeiTModel(use_mask_token=True)'s sequence_output under bool_masked_pos.
at::Tensor RefVit(const WeightMap& w, const std::string& pre, const json& c, const at::Tensor& px,
                  const at::Tensor& masked, bool distilled) {
  const int64_t h = c.at("hidden_size"), p = c.at("patch_size"), b = px.size(0);
  const double eps = c.at("layer_norm_eps");
  at::Tensor x = at::conv2d(px, w.at(pre + "embeddings.patch_embeddings.projection.weight"),
                            w.at(pre + "embeddings.patch_embeddings.projection.bias"), p)
                     .flatten(2)
                     .transpose(1, 2);
  at::Tensor tokens = w.at(pre + "embeddings.mask_token").expand({b, x.size(1), -1});
  at::Tensor mask = masked.unsqueeze(-1).to(tokens.scalar_type());
  x = x * (1.0 - mask) + tokens * mask;
  std::vector<at::Tensor> parts = {w.at(pre + "embeddings.cls_token").expand({b, 1, h})};
  if (distilled) parts.push_back(w.at(pre + "embeddings.distillation_token").expand({b, 1, h}));
  parts.push_back(x);
  x = at::cat(parts, 1) + w.at(pre + "embeddings.position_embeddings");
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string l = pre + "layers." + std::to_string(i) + ".";
    at::Tensor y = Ln(w, l + "layernorm_before", x, eps);
    x = x + Lin(w, l + "attention.o_proj",
                Attend(Lin(w, l + "attention.q_proj", y), Lin(w, l + "attention.k_proj", y),
                       Lin(w, l + "attention.v_proj", y), c.at("num_attention_heads")));
    y = Ln(w, l + "layernorm_after", x, eps);
    x = x + Lin(w, l + "mlp.fc2", at::gelu(Lin(w, l + "mlp.fc1", y)));
  }
  return Ln(w, pre + "layernorm", x, eps);
}

TEST(MaskedImageModelingTest, VitAndDeitReconstructionAndLossAsTransformers) {
  for (const char* arch : {"ViTForMaskedImageModeling", "DeiTForMaskedImageModeling"}) {
    SCOPED_TRACE(arch);
    const bool deit = std::string(arch).rfind("DeiT", 0) == 0;
    RanBatch r = RunClassBatch(arch);
    ASSERT_TRUE(r.m);
    EXPECT_EQ(r.m->spec().task, "masked-image-modeling");
    const json& c = r.m->spec().tiny_config;
    const int64_t stride = c.at("encoder_stride"), p = c.at("patch_size");
    ASSERT_EQ(stride, p);
    const at::Tensor& px = r.batch.inputs.at("pixel_values");
    const at::Tensor& pos = r.batch.inputs.at("bool_masked_pos");
    ASSERT_EQ(pos.scalar_type(), at::kBool);
    EXPECT_GT(pos.sum().item<int64_t>(), 0);
    at::Tensor seq = RefVit(r.w, deit ? "deit." : "vit.", c, px, pos, deit);
    // ViT: sequence_output[:, 1:]; DeiT: [:, 1:-1] (the distillation token kept, the last patch
    // dropped, as transformers does).
    seq = deit ? seq.slice(1, 1, -1) : seq.slice(1, 1);
    const int64_t b = seq.size(0), n = seq.size(1), ch = seq.size(2);
    const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
    at::Tensor map = seq.permute({0, 2, 1}).reshape({b, ch, side, side});
    at::Tensor rec = at::pixel_shuffle(
        at::conv2d(map, r.w.at("decoder.0.weight"), r.w.at("decoder.0.bias")), stride);
    EXPECT_EQ(r.out[0].sizes(), px.sizes());
    EXPECT_LT(testing::MaxAbs(r.out[0], rec), 1e-10);

    const int64_t size = c.at("image_size").get<int64_t>() / p;
    at::Tensor m = pos.reshape({-1, size, size})
                       .repeat_interleave(p, 1)
                       .repeat_interleave(p, 2)
                       .unsqueeze(1)
                       .contiguous()
                       // transformers sums the bool mask as int64 and adds 1e-5 in the default
                       // float32; in a float32 run that is the zoo's float mask sum, here double.
                       .to(at::kDouble);
    at::Tensor l1 = at::l1_loss(px, rec, at::Reduction::None);
    at::Tensor loss = (l1 * m).sum() / (m.sum() + 1e-5) / c.at("num_channels").get<int64_t>();
    EXPECT_NEAR(r.m->Loss(r.w, r.batch).item<double>(), loss.item<double>(), 1e-12);

    // Every patch masked: the reconstruction no longer depends on the pixels.
    Batch all = r.batch;
    all.inputs["bool_masked_pos"] = at::ones_like(pos);
    const at::Tensor a = r.m->Forward(r.w, all.inputs)[0];
    all.inputs["pixel_values"] = px * 3.0 + 1.0;
    EXPECT_LT(testing::MaxAbs(r.m->Forward(r.w, all.inputs)[0], a), 1e-12);
  }
  json bad = *ExampleConfig("ViTForMaskedImageModeling");
  bad["encoder_stride"] = 32;
  auto m = BuildModel(bad, BuildOptions());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().ToString().find("encoder_stride"), std::string::npos);
}

TEST(MaskedImageModelingTest, SwinDecodesTheLastStageMapAsTransformers) {
  RanBatch r = RunClassBatch("SwinForMaskedImageModeling");
  ASSERT_TRUE(r.m);
  const json& c = r.m->spec().tiny_config;
  const int64_t stride = c.at("encoder_stride"), p = c.at("patch_size");
  EXPECT_EQ(stride, p * 2);  // two tiny stages
  EXPECT_TRUE(testing::HasWeight(*r.m, "swin.embeddings.mask_token"));
  // Nothing masked: SwinModel's sequence_output (same weights without "swin.") through
  // decoder.0 and PixelShuffle(encoder_stride).
  Batch none = r.batch;
  none.inputs["bool_masked_pos"] = at::zeros_like(r.batch.inputs.at("bool_masked_pos"));
  json base_cfg = *ExampleConfig("SwinModel");
  auto base = testing::Build("SwinModel", base_cfg);
  ASSERT_TRUE(base);
  WeightMap bw = base->InitWeights(1, at::kDouble);
  for (auto& [name, t] : bw) t = r.w.at("swin." + name);
  const at::Tensor& px = r.batch.inputs.at("pixel_values");
  at::Tensor seq = base->Forward(bw, {{"pixel_values", px}})[0].transpose(1, 2);
  const int64_t b = seq.size(0), ch = seq.size(1);
  const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(seq.size(2))));
  at::Tensor rec =
      at::pixel_shuffle(at::conv2d(seq.reshape({b, ch, side, side}), r.w.at("decoder.0.weight"),
                                   r.w.at("decoder.0.bias")),
                        stride);
  EXPECT_EQ(rec.sizes(), px.sizes());
  EXPECT_LT(testing::MaxAbs(r.m->Forward(r.w, none.inputs)[0], rec), 1e-10);
  // Every patch masked (after the embeddings' norm): the pixels no longer matter.
  Batch all = r.batch;
  all.inputs["bool_masked_pos"] = at::ones_like(none.inputs.at("bool_masked_pos"));
  const at::Tensor a = r.m->Forward(r.w, all.inputs)[0];
  all.inputs["pixel_values"] = px * 3.0 + 1.0;
  EXPECT_LT(testing::MaxAbs(r.m->Forward(r.w, all.inputs)[0], a), 1e-12);
  testing::ExpectConfigError("SwinForMaskedImageModeling", "encoder_stride", 16, "encoder_stride");
}

// ---- SegFormer and GLPN

// SegformerEncoder / GLPNEncoder: every stage's map, reshaped (reshape_last_stage).
std::vector<at::Tensor> RefMixTransformer(const WeightMap& w, const std::string& pre, const json& c,
                                          const at::Tensor& px) {
  std::vector<at::Tensor> maps;
  const int64_t b = px.size(0);
  at::Tensor x = px;
  for (size_t i = 0; i < c.at("depths").size(); ++i) {
    const std::string e = pre + "encoder.", si = std::to_string(i);
    const int64_t k = c.at("patch_sizes")[i], sr = c.at("sr_ratios")[i];
    const int64_t heads = c.at("num_attention_heads")[i];
    x = at::conv2d(x, w.at(e + "patch_embeddings." + si + ".proj.weight"),
                   w.at(e + "patch_embeddings." + si + ".proj.bias"),
                   c.at("strides")[i].get<int64_t>(), k / 2);
    const int64_t hh = x.size(2), ww = x.size(3), ch = x.size(1);
    at::Tensor t =
        Ln(w, e + "patch_embeddings." + si + ".layer_norm", x.flatten(2).transpose(1, 2), 1e-5);
    for (int64_t j = 0; j < c.at("depths")[i].get<int64_t>(); ++j) {
      const std::string l = e + "block." + si + "." + std::to_string(j) + ".";
      at::Tensor y = Ln(w, l + "layer_norm_1", t, 1e-5);
      at::Tensor kv = y;
      if (sr > 1) {
        kv = at::conv2d(y.permute({0, 2, 1}).reshape({b, ch, hh, ww}),
                        w.at(l + "attention.self.sr.weight"), w.at(l + "attention.self.sr.bias"),
                        sr);
        kv = Ln(w, l + "attention.self.layer_norm", kv.reshape({b, ch, -1}).permute({0, 2, 1}),
                1e-5);
      }
      at::Tensor a =
          Attend(Lin(w, l + "attention.self.query", y), Lin(w, l + "attention.self.key", kv),
                 Lin(w, l + "attention.self.value", kv), heads);
      t = Lin(w, l + "attention.output.dense", a) + t;
      at::Tensor f = Lin(w, l + "mlp.dense1", Ln(w, l + "layer_norm_2", t, 1e-5));
      const int64_t m = f.size(2);
      f = at::conv2d(f.transpose(1, 2).view({b, m, hh, ww}), w.at(l + "mlp.dwconv.dwconv.weight"),
                     w.at(l + "mlp.dwconv.dwconv.bias"), 1, 1, 1, m);
      t = Lin(w, l + "mlp.dense2", at::gelu(f.flatten(2).transpose(1, 2))) + t;
    }
    t = Ln(w, e + "layer_norm." + si, t, 1e-5);
    x = t.reshape({b, hh, ww, -1}).permute({0, 3, 1, 2}).contiguous();
    maps.push_back(x);
  }
  return maps;
}

at::Tensor BatchNorm(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return at::batch_norm(x, w.at(p + ".weight"), w.at(p + ".bias"), w.at(p + ".running_mean"),
                        w.at(p + ".running_var"), false, 0.1, 1e-5, false);
}

TEST(SegformerTest, ModelClassifierAndSegmentationAsTransformers) {
  RanBatch base = RunClassBatch("SegformerModel");
  ASSERT_TRUE(base.m);
  const json& c = base.m->spec().tiny_config;
  const at::Tensor& px = base.batch.inputs.at("pixel_values");
  EXPECT_EQ(c.at("sr_ratios"), json({8, 4, 2, 1}));
  auto maps = RefMixTransformer(base.w, "", c, px);
  EXPECT_LT(testing::MaxAbs(base.out[0], maps.back()), 1e-10);

  RanBatch cls = RunClassBatch("SegformerForImageClassification");
  ASSERT_TRUE(cls.m);
  at::Tensor last = RefMixTransformer(cls.w, "segformer.", cls.m->spec().tiny_config,
                                      cls.batch.inputs.at("pixel_values"))
                        .back();
  const int64_t b = last.size(0);
  at::Tensor pooled = last.permute({0, 2, 3, 1}).reshape({b, -1, last.size(1)}).mean(1);
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", pooled)), 1e-10);

  RanBatch seg = RunClassBatch("SegformerForSemanticSegmentation");
  ASSERT_TRUE(seg.m);
  EXPECT_EQ(seg.m->spec().task, "image-segmentation");
  const WeightMap& w = seg.w;
  auto stages = RefMixTransformer(w, "segformer.", seg.m->spec().tiny_config,
                                  seg.batch.inputs.at("pixel_values"));
  std::vector<at::Tensor> all;
  for (size_t i = 0; i < stages.size(); ++i) {
    const at::Tensor& s = stages[i];
    at::Tensor e =
        Lin(w, "decode_head.linear_c." + std::to_string(i) + ".proj", s.flatten(2).transpose(1, 2));
    e = e.permute({0, 2, 1}).reshape({b, -1, s.size(2), s.size(3)});
    all.push_back(at::upsample_bilinear2d(e, {stages[0].size(2), stages[0].size(3)}, false));
  }
  std::reverse(all.begin(), all.end());
  at::Tensor h = at::conv2d(at::cat(all, 1), w.at("decode_head.linear_fuse.weight"));
  h = at::relu(BatchNorm(w, "decode_head.batch_norm", h));
  at::Tensor logits =
      at::conv2d(h, w.at("decode_head.classifier.weight"), w.at("decode_head.classifier.bias"));
  EXPECT_LT(testing::MaxAbs(seg.out[0], logits), 1e-10);
  const at::Tensor& labels = seg.batch.labels.at("labels");
  EXPECT_TRUE(labels.eq(255).any().item<bool>());  // semantic_loss_ignore_index pixels
  at::Tensor up = at::upsample_bilinear2d(logits, {labels.size(1), labels.size(2)}, false);
  at::Tensor loss = at::cross_entropy_loss(up, labels, {}, at::Reduction::Mean, 255);
  EXPECT_NEAR(seg.m->Loss(seg.w, seg.batch).item<double>(), loss.item<double>(), 1e-12);
  // The decode head's BatchNorm has its counter in the state_dict.
  bool counter = false;
  for (const auto& e : StateDictShapes(*seg.m))
    counter = counter || e.name == "decode_head.batch_norm.num_batches_tracked";
  EXPECT_TRUE(counter);
  testing::ExpectConfigError("SegformerModel", "depths", json{1, 1}, "depths");
  testing::ExpectConfigError("SegformerModel", "reshape_last_stage", false, "reshape_last_stage");
}

TEST(GlpnTest, EncoderIsSegformersAndDepthHeadAsTransformers) {
  RanBatch base = RunClassBatch("GLPNModel");
  ASSERT_TRUE(base.m);
  const json& c = base.m->spec().tiny_config;
  EXPECT_LT(testing::MaxAbs(
                base.out[0],
                RefMixTransformer(base.w, "", c, base.batch.inputs.at("pixel_values")).back()),
            1e-10);

  RanBatch r = RunClassBatch("GLPNForDepthEstimation");
  ASSERT_TRUE(r.m);
  EXPECT_EQ(r.m->spec().task, "depth-estimation");
  const WeightMap& w = r.w;
  const json& t = r.m->spec().tiny_config;
  auto stages = RefMixTransformer(w, "glpn.", t, r.batch.inputs.at("pixel_values"));
  const int64_t d = t.at("decoder_hidden_size");
  auto up2 = [](const at::Tensor& x) {
    return at::upsample_bilinear2d(x, c10::nullopt, false, std::vector<double>{2.0, 2.0});
  };
  auto cbr = [&](const at::Tensor& x, const std::string& p) {
    return at::relu(
        BatchNorm(w, p + ".1", at::conv2d(x, w.at(p + ".0.weight"), w.at(p + ".0.bias"), 1, 1)));
  };
  std::vector<at::Tensor> outs;
  at::Tensor prev;
  const int64_t n = static_cast<int64_t>(stages.size());
  for (int64_t k = 0; k < n; ++k) {
    const std::string p = "decoder.stages." + std::to_string(k) + ".";
    at::Tensor x = stages[n - 1 - k];
    if (x.size(1) != d)
      x = at::conv2d(x, w.at(p + "convolution.weight"), w.at(p + "convolution.bias"));
    if (k > 0) {  // GLPNSelectiveFeatureFusion(local=x, global=prev)
      at::Tensor f = cbr(at::cat({x, prev}, 1), p + "fusion.convolutional_layer1");
      f = cbr(f, p + "fusion.convolutional_layer2");
      f = at::sigmoid(at::conv2d(f, w.at(p + "fusion.convolutional_layer3.weight"),
                                 w.at(p + "fusion.convolutional_layer3.bias"), 1, 1));
      x = x * f.select(1, 0).unsqueeze(1) + prev * f.select(1, 1).unsqueeze(1);
    }
    prev = up2(x);
    outs.push_back(prev);
  }
  outs.back() = up2(outs.back());
  at::Tensor h =
      at::relu(at::conv2d(outs.back(), w.at("head.head.0.weight"), w.at("head.head.0.bias"), 1, 1));
  h = at::conv2d(h, w.at("head.head.2.weight"), w.at("head.head.2.bias"), 1, 1);
  at::Tensor depth = (at::sigmoid(h) * t.at("max_depth").get<double>()).squeeze(1);
  EXPECT_LT(testing::MaxAbs(r.out[0], depth), 1e-10);
  // SiLogLoss over the valid pixels, with transformers' boolean indexing.
  const at::Tensor& target = r.batch.labels.at("labels");
  at::Tensor valid = target > 0;
  EXPECT_FALSE(valid.all().item<bool>());
  at::Tensor dl = at::log(target.index({valid})) - at::log(depth.index({valid}));
  at::Tensor loss = at::sqrt(at::pow(dl, 2).mean() - 0.5 * at::pow(dl.mean(), 2));
  EXPECT_NEAR(r.m->Loss(r.w, r.batch).item<double>(), loss.item<double>(), 1e-12);
  testing::ExpectConfigError("GLPNForDepthEstimation", "head_in_index", 4, "head_in_index");
}

// ---- VideoMAE

// get_sinusoid_encoding_table(n, d), as numpy computes it.
at::Tensor RefSinusoids(int64_t n, int64_t d) {
  at::Tensor t = at::empty({n, d}, at::TensorOptions().dtype(at::kDouble));
  for (int64_t pos = 0; pos < n; ++pos) {
    for (int64_t j = 0; j < d; ++j) {
      const double angle = pos / std::pow(10000.0, 2.0 * static_cast<double>(j / 2) / d);
      t[pos][j] = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  }
  return t;
}

// VideoMAELayer `l` (layers.N. prefix) over x.
at::Tensor RefVideoMaeLayer(const WeightMap& w, const std::string& l, at::Tensor x, int64_t heads,
                            double eps) {
  const std::string a = l + "attention.attention.";
  at::Tensor y = Ln(w, l + "layernorm_before", x, eps);
  at::Tensor k_bias = at::zeros_like(w.at(a + "v_bias"));
  at::Tensor q = at::linear(y, w.at(a + "query.weight"), w.at(a + "q_bias"));
  at::Tensor k = at::linear(y, w.at(a + "key.weight"), k_bias);
  at::Tensor v = at::linear(y, w.at(a + "value.weight"), w.at(a + "v_bias"));
  x = Lin(w, l + "attention.output.dense", Attend(q, k, v, heads)) + x;
  y = at::gelu(Lin(w, l + "intermediate.dense", Ln(w, l + "layernorm_after", x, eps)));
  return Lin(w, l + "output.dense", y) + x;
}

// VideoMAEModel's sequence_output; under `masked` (bool [B, tubelets]) the visible tubelets only,
// as embeddings[~bool_masked_pos].reshape(batch, -1, hidden).
at::Tensor RefVideoMae(const WeightMap& w, const std::string& pre, const json& c,
                       const at::Tensor& px, const at::Tensor& masked = at::Tensor()) {
  const int64_t p = c.at("patch_size"), tub = c.at("tubelet_size");
  const double eps = c.at("layer_norm_eps");
  at::Tensor x = at::conv3d(px.permute({0, 2, 1, 3, 4}),
                            w.at(pre + "embeddings.patch_embeddings.projection.weight"),
                            w.at(pre + "embeddings.patch_embeddings.projection.bias"), {tub, p, p})
                     .flatten(2)
                     .transpose(1, 2);
  x = x + RefSinusoids(x.size(1), x.size(2)).unsqueeze(0);
  if (masked.defined()) x = x.index({masked.logical_not()}).reshape({x.size(0), -1, x.size(2)});
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    x = RefVideoMaeLayer(w, pre + "encoder.layer." + std::to_string(i) + ".", x,
                         c.at("num_attention_heads"), eps);
  }
  if (!c.value("use_mean_pooling", true)) x = Ln(w, pre + "layernorm", x, eps);
  return x;
}

TEST(VideoMaeTest, ModelAndVideoClassifierAsTransformers) {
  RanBatch base = RunClassBatch("VideoMAEModel");
  ASSERT_TRUE(base.m);
  const json& c = base.m->spec().tiny_config;
  const at::Tensor& px = base.batch.inputs.at("pixel_values");
  ASSERT_EQ(px.dim(), 5);  // (batch, frames, channels, height, width)
  EXPECT_EQ(px.size(1), c.at("num_frames").get<int64_t>());
  EXPECT_FALSE(testing::HasWeight(*base.m, "encoder.layer.0.attention.attention.key.bias"));
  EXPECT_TRUE(testing::HasWeight(*base.m, "encoder.layer.0.attention.attention.q_bias"));
  EXPECT_LT(testing::MaxAbs(base.out[0], RefVideoMae(base.w, "", c, px)), 1e-10);

  RanBatch cls = RunClassBatch("VideoMAEForVideoClassification");
  ASSERT_TRUE(cls.m);
  EXPECT_EQ(cls.m->spec().task, "video-classification");
  at::Tensor seq = RefVideoMae(cls.w, "videomae.", cls.m->spec().tiny_config,
                               cls.batch.inputs.at("pixel_values"));
  at::Tensor pooled = Ln(cls.w, "fc_norm", seq.mean(1), 1e-5);  // nn.LayerNorm's default eps
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", pooled)), 1e-10);
  testing::ExpectConfigError("VideoMAEModel", "num_frames", 15, "tubelet_size");
}

TEST(VideoMaeTest, PreTrainingDecoderAndNormalisedPixelLossAsTransformers) {
  RanBatch r = RunClassBatch("VideoMAEForPreTraining");
  ASSERT_TRUE(r.m);
  EXPECT_EQ(r.m->spec().task, "pretraining");
  const json& c = r.m->spec().tiny_config;
  const WeightMap& w = r.w;
  const at::Tensor& px = r.batch.inputs.at("pixel_values");
  const at::Tensor& pos = r.batch.inputs.at("bool_masked_pos");
  const int64_t b = px.size(0), n = pos.size(1);
  ASSERT_TRUE(pos.sum(1).eq(n / 2).all().item<bool>());  // as many masked in every video
  at::Tensor seq =
      at::linear(RefVideoMae(w, "videomae.", c, px, pos), w.at("encoder_to_decoder.weight"));
  const int64_t d = seq.size(2);
  at::Tensor table = RefSinusoids(n, d).unsqueeze(0).expand({b, n, d});
  at::Tensor vis = table.index({pos.logical_not()}).reshape({b, -1, d});
  at::Tensor msk = table.index({pos}).reshape({b, -1, d});
  at::Tensor x = at::cat({seq + vis, w.at("mask_token") + msk}, 1);
  for (int64_t i = 0; i < c.at("decoder_num_hidden_layers").get<int64_t>(); ++i) {
    x = RefVideoMaeLayer(w, "decoder.decoder_layers." + std::to_string(i) + ".", x,
                         c.at("decoder_num_attention_heads"), c.at("layer_norm_eps"));
  }
  x = x.slice(1, x.size(1) - msk.size(1));
  at::Tensor logits = Lin(w, "decoder.head", Ln(w, "decoder.norm", x, 1e-5));
  EXPECT_LT(testing::MaxAbs(r.out[0], logits), 1e-10);
  // Labels: un-normalised frames, per-patch normalised (norm_pix_loss), the masked tubelets.
  auto channel = [](std::vector<float> v) {
    return at::tensor(v).to(at::kDouble).view({1, 1, 3, 1, 1});
  };
  at::Tensor f = px * channel({0.229f, 0.224f, 0.225f}) + channel({0.485f, 0.456f, 0.406f});
  const int64_t t = f.size(1), ch = f.size(2), hh = f.size(3), ts = c.at("tubelet_size"),
                p = c.at("patch_size");
  f = f.view({b, t / ts, ts, ch, hh / p, p, hh / p, p})
          .permute({0, 1, 4, 6, 2, 5, 7, 3})
          .contiguous()
          .view({b, n, ts * p * p, ch});
  f = (f - f.mean(-2, true)) / (f.var(-2, true, true).sqrt() + 1e-6);
  at::Tensor labels = f.view({b, n, -1}).index({pos}).reshape({b, -1, ts * p * p * ch});
  EXPECT_NEAR(r.m->Loss(w, r.batch).item<double>(), at::mse_loss(logits, labels).item<double>(),
              1e-12);
  testing::ExpectConfigError("VideoMAEForPreTraining", "decoder_num_attention_heads", 7,
                             "decoder_num_attention_heads");
}

// VivitModel (transformers 5's modular_vivit.py: ViT's embeddings and layers over tubelets).
at::Tensor RefVivit(const WeightMap& w, const std::string& pre, const json& c,
                    const at::Tensor& px) {
  const auto t = c.at("tubelet_size").get<std::vector<int64_t>>();
  const int64_t b = px.size(0), h = c.at("hidden_size");
  const double eps = c.at("layer_norm_eps");
  at::Tensor x =
      at::conv3d(px.transpose(1, 2), w.at(pre + "embeddings.patch_embeddings.projection.weight"),
                 w.at(pre + "embeddings.patch_embeddings.projection.bias"), t)
          .flatten(2)
          .transpose(1, 2);
  x = at::cat({w.at(pre + "embeddings.cls_token").expand({b, 1, h}), x}, 1) +
      w.at(pre + "embeddings.position_embeddings");
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string l = pre + "layers." + std::to_string(i) + ".";
    at::Tensor y = Ln(w, l + "layernorm_before", x, eps);
    x = x + Lin(w, l + "attention.o_proj",
                Attend(Lin(w, l + "attention.q_proj", y), Lin(w, l + "attention.k_proj", y),
                       Lin(w, l + "attention.v_proj", y), c.at("num_attention_heads")));
    y = Ln(w, l + "layernorm_after", x, eps);
    // gelu_fast: 0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2)))
    at::Tensor u = Lin(w, l + "mlp.fc1", y);
    u = 0.5 * u * (1.0 + at::tanh(u * 0.7978845608 * (1.0 + 0.044715 * u * u)));
    x = x + Lin(w, l + "mlp.fc2", u);
  }
  return Ln(w, pre + "layernorm", x, eps);
}

TEST(VivitTest, ModelAndVideoClassifierAsTransformers) {
  RanBatch base = RunClassBatch("VivitModel");
  ASSERT_TRUE(base.m);
  const json& c = base.m->spec().tiny_config;
  EXPECT_EQ(c.at("hidden_act"), "gelu_fast");
  EXPECT_FALSE(c.contains("patch_size"));
  const at::Tensor seq = RefVivit(base.w, "", c, base.batch.inputs.at("pixel_values"));
  EXPECT_LT(testing::MaxAbs(base.out[0], seq), 1e-8);  // gelu_fast vs the tanh GELU: rounding
  EXPECT_LT(testing::MaxAbs(base.out[1], at::tanh(Lin(base.w, "pooler.dense", seq.select(1, 0)))),
            1e-8);

  RanBatch cls = RunClassBatch("VivitForVideoClassification");
  ASSERT_TRUE(cls.m);
  EXPECT_EQ(cls.m->spec().task, "video-classification");
  const at::Tensor s2 =
      RefVivit(cls.w, "vivit.", cls.m->spec().tiny_config, cls.batch.inputs.at("pixel_values"));
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", s2.select(1, 0))), 1e-8);
  testing::ExpectConfigError("VivitModel", "tubelet_size", json{2, 16, 8}, "square");
}

// TimeSformerAttention: qkv(x).reshape(b, n, 3, heads, d).permute(2, 0, 3, 1, 4), output.dense.
at::Tensor RefTsAttention(const WeightMap& w, const std::string& p, const at::Tensor& x,
                          int64_t heads) {
  const int64_t b = x.size(0), n = x.size(1), c = x.size(2);
  at::Tensor qkv =
      Lin(w, p + "attention.qkv", x).reshape({b, n, 3, heads, c / heads}).permute({2, 0, 3, 1, 4});
  at::Tensor probs =
      at::softmax(at::matmul(qkv[0], qkv[1].transpose(-2, -1)) * std::pow(c / heads, -0.5), -1);
  return Lin(w, p + "output.dense", at::matmul(probs, qkv[2]).transpose(1, 2).reshape({b, n, c}));
}

at::Tensor RefTimesformer(const WeightMap& w, const std::string& pre, const json& c,
                          const at::Tensor& px) {
  const int64_t b = px.size(0), t = px.size(1), h = c.at("hidden_size"), p = c.at("patch_size");
  const int64_t heads = c.at("num_attention_heads"), pw = c.at("image_size").get<int64_t>() / p;
  const double eps = c.at("layer_norm_eps");
  at::Tensor x = at::conv2d(px.reshape({b * t, px.size(2), px.size(3), px.size(4)}),
                            w.at(pre + "embeddings.patch_embeddings.projection.weight"),
                            w.at(pre + "embeddings.patch_embeddings.projection.bias"), p)
                     .flatten(2)
                     .transpose(1, 2);
  x = at::cat({w.at(pre + "embeddings.cls_token").expand({b * t, -1, -1}), x}, 1) +
      w.at(pre + "embeddings.position_embeddings");
  at::Tensor cls = x.slice(0, 0, b).select(1, 0).unsqueeze(1);
  x = x.slice(1, 1);
  const int64_t n = x.size(1);
  x = x.reshape({b, t, n, h}).permute({0, 2, 1, 3}).reshape({b * n, t, h}) +
      w.at(pre + "embeddings.time_embeddings");
  x = at::cat({cls, x.view({b, n, t, h}).reshape({b, n * t, h})}, 1);
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string l = pre + "encoder.layer." + std::to_string(i) + ".";
    const int64_t ph = (x.size(1) - 1) / t / pw;
    at::Tensor te = x.slice(1, 1).reshape({b, ph, pw, t, h}).reshape({b * ph * pw, t, h});
    at::Tensor rt = RefTsAttention(w, l + "temporal_attention.",
                                   Ln(w, l + "temporal_layernorm", te, eps), heads);
    rt = Lin(w, l + "temporal_dense", rt.reshape({b, ph, pw, t, h}).reshape({b, ph * pw * t, h}));
    te = x.slice(1, 1) + rt;
    at::Tensor init_cls = x.select(1, 0).unsqueeze(1);
    at::Tensor cl = init_cls.repeat({1, t, 1}).reshape({b * t, 1, h});
    at::Tensor se =
        te.reshape({b, ph, pw, t, h}).permute({0, 3, 1, 2, 4}).reshape({b * t, ph * pw, h});
    at::Tensor rs = RefTsAttention(w, l + "attention.",
                                   Ln(w, l + "layernorm_before", at::cat({cl, se}, 1), eps), heads);
    cl = at::mean(rs.select(1, 0).reshape({b, t, h}), 1, true);
    rs = rs.slice(1, 1).reshape({b, t, ph, pw, h}).permute({0, 2, 3, 1, 4}).reshape({b, -1, h});
    at::Tensor hs = at::cat({init_cls, te}, 1) + at::cat({cl, rs}, 1);
    x = hs + Lin(w, l + "output.dense",
                 at::gelu(Lin(w, l + "intermediate.dense", Ln(w, l + "layernorm_after", hs, eps))));
  }
  return Ln(w, pre + "layernorm", x, eps);
}

TEST(TimesformerTest, DividedSpaceTimeModelAndVideoClassifierAsTransformers) {
  RanBatch base = RunClassBatch("TimesformerModel");
  ASSERT_TRUE(base.m);
  const json& c = base.m->spec().tiny_config;
  const at::Tensor& px = base.batch.inputs.at("pixel_values");
  EXPECT_EQ(px.size(1), 4);  // tiny num_frames
  EXPECT_LT(testing::MaxAbs(base.out[0], RefTimesformer(base.w, "", c, px)), 1e-10);

  RanBatch cls = RunClassBatch("TimesformerForVideoClassification");
  ASSERT_TRUE(cls.m);
  const at::Tensor seq = RefTimesformer(cls.w, "timesformer.", cls.m->spec().tiny_config,
                                        cls.batch.inputs.at("pixel_values"));
  EXPECT_LT(testing::MaxAbs(cls.out[0], Lin(cls.w, "classifier", seq.select(1, 0))), 1e-10);
  testing::ExpectConfigError("TimesformerModel", "attention_type", "space_only",
                             "divided_space_time");
}

}  // namespace
}  // namespace ts::zoo
