// Dense-prediction vision classes against references written in double from transformers'
// sources (not from the zoo's trunks and heads): DPT (modeling_dpt.py: DPTViTEmbeddings,
// DPTViTLayer, DPTReassembleStage, DPTFeatureFusionStage, DPTDepthEstimationHead,
// DPTSemanticSegmentationHead, DPTAuxiliaryHead).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
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

at::Tensor Conv(const WeightMap& w, const std::string& p, const at::Tensor& x, int64_t stride = 1,
                int64_t pad = 0) {
  const std::string b = p + ".bias";
  return at::conv2d(x, w.at(p + ".weight"), w.count(b) ? w.at(b) : at::Tensor(), stride, pad);
}

at::Tensor Bn(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return at::batch_norm(x, w.at(p + ".weight"), w.at(p + ".bias"), w.at(p + ".running_mean"),
                        w.at(p + ".running_var"), false, 0.1, 1e-5, false);
}

at::Tensor Up2(const at::Tensor& x, bool align_corners) {
  return at::upsample_bilinear2d(x, c10::nullopt, align_corners, std::vector<double>{2.0, 2.0});
}

// DPTModel's embeddings and layers: the hidden states after every layer (before `layernorm`).
std::vector<at::Tensor> RefDptEncoder(const WeightMap& w, const std::string& p, const json& c,
                                      const at::Tensor& px) {
  const int64_t h = c.at("hidden_size"), heads = c.at("num_attention_heads");
  const int64_t patch = c.at("patch_size"), g = px.size(2) / patch, b = px.size(0);
  const double eps = c.at("layer_norm_eps");
  at::Tensor pos = w.at(p + "embeddings.position_embeddings");
  at::Tensor grid = pos[0].slice(0, 1).reshape({1, g, g, h}).permute({0, 3, 1, 2});
  grid = at::upsample_bilinear2d(grid, {g, g}, false).permute({0, 2, 3, 1}).reshape({1, g * g, h});
  at::Tensor x = Conv(w, p + "embeddings.patch_embeddings.projection", px, patch);
  x = x.flatten(2).transpose(1, 2);
  x = at::cat({w.at(p + "embeddings.cls_token").expand({b, 1, h}), x}, 1) +
      at::cat({pos.slice(1, 0, 1), grid}, 1);
  std::vector<at::Tensor> hidden;
  for (int64_t i = 0; i < c.at("num_hidden_layers").get<int64_t>(); ++i) {
    const std::string l = p + "encoder.layer." + std::to_string(i) + ".";
    at::Tensor y = Ln(w, l + "layernorm_before", x, eps);
    const int64_t d = h / heads, s = y.size(1);
    auto split = [&](const at::Tensor& t) {
      return t.view({b, s, heads, d}).permute({0, 2, 1, 3});
    };
    at::Tensor q = split(Lin(w, l + "attention.attention.query", y));
    at::Tensor k = split(Lin(w, l + "attention.attention.key", y));
    at::Tensor v = split(Lin(w, l + "attention.attention.value", y));
    at::Tensor probs = at::softmax(at::matmul(q, k.transpose(-1, -2)) * std::pow(d, -0.5), -1);
    at::Tensor ctx = at::matmul(probs, v).transpose(1, 2).reshape({b, s, h});
    x = Lin(w, l + "attention.output.dense", ctx) + x;
    y = at::gelu(Lin(w, l + "intermediate.dense", Ln(w, l + "layernorm_after", x, eps)));
    x = Lin(w, l + "output.dense", y) + x;
    hidden.push_back(x);
  }
  return hidden;
}

// DPTPreActResidualLayer.
at::Tensor RefResidual(const WeightMap& w, const std::string& p, const at::Tensor& in, bool bn) {
  at::Tensor x = Conv(w, p + "convolution1", at::relu(in), 1, 1);
  if (bn) x = Bn(w, p + "batch_norm1", x);
  x = Conv(w, p + "convolution2", at::relu(x), 1, 1);
  if (bn) x = Bn(w, p + "batch_norm2", x);
  return x + in;
}

// DPTNeck over the hidden states of backbone_out_indices: the fused maps, coarsest first.
std::vector<at::Tensor> RefDptNeck(const WeightMap& w, const json& c,
                                   const std::vector<at::Tensor>& all) {
  const std::string readout = c.value("readout_type", "project");
  const bool bn = c.value("use_batch_norm_in_fusion_residual", false);
  std::vector<at::Tensor> feats;
  int64_t i = 0;
  for (int64_t idx : c.at("backbone_out_indices").get<std::vector<int64_t>>()) {
    const at::Tensor& hs = all[idx];
    const int64_t b = hs.size(0), ch = hs.size(2);
    const auto g = static_cast<int64_t>(std::lround(std::sqrt(hs.size(1) - 1)));
    at::Tensor cls = hs.select(1, 0);
    at::Tensor x = hs.slice(1, 1).reshape({b, g, g, ch}).permute({0, 3, 1, 2});
    if (readout == "project") {
      at::Tensor t = x.flatten(2).permute({0, 2, 1});
      t = at::gelu(Lin(w, "neck.reassemble_stage.readout_projects." + std::to_string(i) + ".0",
                       at::cat({t, cls.unsqueeze(1).expand_as(t)}, -1)));
      x = t.permute({0, 2, 1}).reshape({b, ch, g, g});
    } else if (readout == "add") {
      x = (x.flatten(2) + cls.unsqueeze(-1)).reshape({b, ch, g, g});
    }
    const std::string l = "neck.reassemble_stage.layers." + std::to_string(i);
    x = Conv(w, l + ".projection", x);
    const double f = c.at("reassemble_factors")[i].get<double>();
    if (f > 1) {
      const auto k = static_cast<int64_t>(f);
      x = at::conv_transpose2d(x, w.at(l + ".resize.weight"), w.at(l + ".resize.bias"), k);
    } else if (f < 1) {
      x = Conv(w, l + ".resize", x, static_cast<int64_t>(1 / f), 1);
    }
    feats.push_back(at::conv2d(x, w.at("neck.convs." + std::to_string(i) + ".weight"), {}, 1, 1));
    ++i;
  }
  std::vector<at::Tensor> fused;
  for (size_t k = 0; k < feats.size(); ++k) {
    const std::string l = "neck.fusion_stage.layers." + std::to_string(k) + ".";
    at::Tensor h = feats[feats.size() - 1 - k];
    if (k > 0) {
      at::Tensor res = h;
      h = fused.back();
      if (!h.sizes().equals(res.sizes()))
        res = at::upsample_bilinear2d(res, {h.size(2), h.size(3)}, false);
      h = h + RefResidual(w, l + "residual_layer1.", res, bn);
    }
    h = Up2(RefResidual(w, l + "residual_layer2.", h, bn), true);
    fused.push_back(Conv(w, l + "projection", h));
  }
  return fused;
}

TEST(DptTest, ModelIsTheVitWithResizedPositionsAndTanhPooler) {
  testing::RanBatch r = testing::RunClassBatch("DPTModel");
  ASSERT_TRUE(r.m);
  const json& c = r.m->spec().tiny_config;
  EXPECT_EQ(c.at("backbone_out_indices"), json({0, 1, 2, 3}));
  auto hidden = RefDptEncoder(r.w, "", c, r.batch.inputs.at("pixel_values"));
  at::Tensor last = Ln(r.w, "layernorm", hidden.back(), c.at("layer_norm_eps"));
  EXPECT_LT(testing::MaxAbs(r.out[0], last), 1e-10);
  EXPECT_LT(testing::MaxAbs(r.out[1], at::tanh(Lin(r.w, "pooler.dense", last.select(1, 0)))),
            1e-10);
}

TEST(DptTest, DepthEstimationReassemblesFusesAndRunsTheDepthHeadAsTransformers) {
  for (const char* readout : {"project", "add", "ignore"}) {
    json cfg = *ExampleConfig("DPTForDepthEstimation");
    cfg["readout_type"] = readout;
    testing::RanBatch r = testing::RunClassBatch("DPTForDepthEstimation", cfg);
    ASSERT_TRUE(r.m);
    const json& c = r.m->spec().tiny_config;
    auto fused =
        RefDptNeck(r.w, c, RefDptEncoder(r.w, "dpt.", c, r.batch.inputs.at("pixel_values")));
    at::Tensor x = Conv(r.w, "head.head.0", fused.back(), 1, 1);
    x = at::relu(Conv(r.w, "head.head.2", Up2(x, true), 1, 1));
    at::Tensor depth = at::relu(Conv(r.w, "head.head.4", x)).squeeze(1);
    EXPECT_EQ(depth.sizes().vec(), (std::vector<int64_t>{2, 64, 64})) << readout;
    EXPECT_LT(testing::MaxAbs(r.out[0], depth), 1e-10) << readout;
    EXPECT_GT(depth.gt(0).sum().item<int64_t>(), 0) << readout;
    // No transformers loss (it raises NotImplementedError): the MSE onto the batch's target.
    at::Tensor mse = (depth - r.batch.labels.at("target")).pow(2).mean();
    EXPECT_NEAR(r.m->Loss(r.w, r.batch).item<double>(), mse.item<double>(), 1e-12) << readout;
  }
  testing::ExpectConfigError("DPTForDepthEstimation", "is_hybrid", true, "is_hybrid");
  testing::ExpectConfigError("DPTForDepthEstimation", "add_projection", true, "add_projection");
  testing::ExpectConfigError("DPTForDepthEstimation", "readout_type", "foo", "readout_type");
  testing::ExpectConfigError("DPTForDepthEstimation", "backbone_out_indices", json({5, 5, 17, 23}),
                             "backbone_out_indices");
  testing::ExpectConfigError("DPTForDepthEstimation", "reassemble_factors", json({4, 2, 1}),
                             "reassemble_factors");
  testing::ExpectConfigError("DPTForDepthEstimation", "backbone_config", json::object(),
                             "backbone_config");
}

TEST(DptTest, SegmentationWithBatchNormFusionAndAuxiliaryLossAsTransformers) {
  testing::RanBatch r = testing::RunClassBatch("DPTForSemanticSegmentation");
  ASSERT_TRUE(r.m);
  const json& c = r.m->spec().tiny_config;
  EXPECT_TRUE(c.at("use_batch_norm_in_fusion_residual").get<bool>());
  auto fused = RefDptNeck(r.w, c, RefDptEncoder(r.w, "dpt.", c, r.batch.inputs.at("pixel_values")));
  auto head = [&](const std::string& p, const at::Tensor& x) {
    return Conv(r.w, p + "4", at::relu(Bn(r.w, p + "1", Conv(r.w, p + "0", x, 1, 1))));
  };
  at::Tensor logits = Up2(head("head.head.", fused.back()), true);
  EXPECT_LT(testing::MaxAbs(r.out[0], logits), 1e-10);
  const at::Tensor& y = r.batch.labels.at("labels");
  EXPECT_TRUE(y.eq(255).any().item<bool>());
  auto ce = [&](const at::Tensor& l) {
    return at::cross_entropy_loss(at::upsample_bilinear2d(l, {y.size(1), y.size(2)}, false), y, {},
                                  at::Reduction::Mean, 255);
  };
  at::Tensor loss = ce(logits) + 0.4 * ce(head("auxiliary_head.head.", fused.back()));
  EXPECT_NEAR(r.m->Loss(r.w, r.batch).item<double>(), loss.item<double>(), 1e-12);
  testing::ExpectConfigError("DPTForSemanticSegmentation", "num_labels", 1, "num_labels");
  testing::ExpectConfigError("DPTForSemanticSegmentation", "use_auxiliary_head", false,
                             "use_auxiliary_head");
}

TEST(DptTest, StateDictHoldsTheModulesTransformersBuildsAndNeverReads) {
  auto m = testing::Build("DPTForSemanticSegmentation");
  ASSERT_TRUE(m);
  std::set<std::string> names;
  for (const auto& e : StateDictShapes(*m)) names.insert(e.name);
  const std::string r1 = "neck.fusion_stage.layers.0.residual_layer1.";
  for (const std::string& n : std::vector<std::string>{
           "dpt.layernorm.weight", "dpt.layernorm.bias", r1 + "convolution1.weight",
           r1 + "batch_norm2.running_var", r1 + "batch_norm2.num_batches_tracked",
           "neck.fusion_stage.layers.1.residual_layer1.batch_norm1.num_batches_tracked"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_FALSE(testing::HasWeight(*m, "dpt.layernorm.weight"));
  EXPECT_FALSE(testing::HasWeight(*m, "dpt.pooler.dense.weight"));
  EXPECT_FALSE(testing::HasWeight(*m, r1 + "convolution1.weight"));
}

}  // namespace
}  // namespace ts::zoo
