// mobilevitv2 (modeling_mobilevitv2.py, configuration_mobilevitv2.py): MobileViTV2Model
// (last_hidden_state: the last block's map; pooler_output its spatial mean),
// MobileViTV2ForImageClassification (`classifier` on the pooler output) and
// MobileViTV2ForSemanticSegmentation (the model under `mobilevitv2.`, MobileViTV2DeepLabV3 over
// the last map: heads/deeplab_v3.h). Widths follow width_multiplier as transformers derives them
// (make_divisible of 32 (clipped to [16, 64]), 64, 128, 256, 384, 512 times the multiplier; the
// attention widths of base_attn_unit_dims). The trunk lives here: conv_stem, two MobileNetV2
// layers, three MobileViTV2 blocks (a downsampling inverted residual, a depthwise conv_kxk, a
// bias-free conv_1x1, F.unfold into [B, C, patch area, patches] (at::im2col), n_attn_blocks
// layers of GroupNorm(1) -> linear self-attention (qkv_proj 1x1 conv split into a 1-channel
// query softmaxed over the patches, keys and values; relu(values) * sum(keys * scores)) ->
// out_proj, GroupNorm(1) -> 1x1 conv FFN (act, then linear), layernorm (GroupNorm(1)), F.fold
// (at::col2im), conv_projection with BatchNorm and no act). The GroupNorm(1)s are written out
// (mean, centred variance), as the audio trunk's. output_stride 16 / 8 dilate the last blocks as
// MobileViT does.
//
// Refused, naming the field: n_attn_blocks / base_attn_unit_dims / atrous_rates without 3
// entries, output_stride other than 8 / 16 / 32, a non-positive width_multiplier; num_labels 1
// for the segmentation class.
#include <algorithm>
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/deeplab_v3.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_mobilevit.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct MobileVitV2Config {
  int64_t num_channels = 3, image_size = 256, patch_size = 2, kernel = 3, output_stride = 32;
  int64_t aspp_out = 512, ignore_index = 255, num_labels = 2;
  std::vector<int64_t> blocks, attn_dims, atrous_rates;
  double expand_ratio = 2.0, width = 1.0, ffn_multiplier = 2.0, eps = 1e-5;
  VisionActivation act;
};

// layer_0_dim .. layer_5_dim of MobileViTV2Encoder.
std::vector<int64_t> MobileVitV2Widths(double wm) {
  return {MobileVitDivisible(std::clamp(32 * wm, 16.0, 64.0), 8, 16),
          MobileVitDivisible(64 * wm, 16),
          MobileVitDivisible(128 * wm),
          MobileVitDivisible(256 * wm),
          MobileVitDivisible(384 * wm),
          MobileVitDivisible(512 * wm)};
}

StatusOr<MobileVitV2Config> ParseMobileVitV2(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  MobileVitV2Config c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 256));
  TS_ASSIGN_OR_RETURN(c.patch_size, PositiveInt(r, "patch_size", 2));
  TS_ASSIGN_OR_RETURN(c.kernel, PositiveInt(r, "conv_kernel_size", 3));
  TS_ASSIGN_OR_RETURN(c.blocks, IntList(config, "n_attn_blocks", {2, 4, 3}));
  TS_RETURN_IF_ERROR(CheckLen("n_attn_blocks", c.blocks, 3));
  TS_RETURN_IF_ERROR(CheckAllPositive("n_attn_blocks", c.blocks));
  TS_ASSIGN_OR_RETURN(c.attn_dims, IntList(config, "base_attn_unit_dims", {128, 192, 256}));
  TS_RETURN_IF_ERROR(CheckLen("base_attn_unit_dims", c.attn_dims, 3));
  TS_RETURN_IF_ERROR(CheckAllPositive("base_attn_unit_dims", c.attn_dims));
  TS_ASSIGN_OR_RETURN(c.atrous_rates, IntList(config, "atrous_rates", {6, 12, 18}));
  TS_RETURN_IF_ERROR(CheckLen("atrous_rates", c.atrous_rates, 3));
  TS_RETURN_IF_ERROR(CheckAllPositive("atrous_rates", c.atrous_rates));
  TS_ASSIGN_OR_RETURN(c.expand_ratio, r.Double("expand_ratio", 2.0));
  TS_ASSIGN_OR_RETURN(c.width, r.Double("width_multiplier", 1.0));
  TS_ASSIGN_OR_RETURN(c.ffn_multiplier, r.Double("ffn_multiplier", 2.0));
  if (!(c.expand_ratio > 0)) return r.Error("expand_ratio", "must be positive");
  if (!(c.width > 0)) return r.Error("width_multiplier", "must be positive");
  if (!(c.ffn_multiplier > 0)) return r.Error("ffn_multiplier", "must be positive");
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", 1e-5));
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "swish"));
  TS_ASSIGN_OR_RETURN(c.output_stride, r.Int("output_stride", 32));
  if (c.output_stride != 8 && c.output_stride != 16 && c.output_stride != 32)
    return r.Error("output_stride", "expected 8, 16 or 32");
  TS_ASSIGN_OR_RETURN(c.aspp_out, PositiveInt(r, "aspp_out_channels", 512));
  TS_ASSIGN_OR_RETURN(c.ignore_index, r.Int("semantic_loss_ignore_index", 255));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// width_multiplier 0.25 (widths 16 .. 128, attention 32 .. 64 wide), aspp 16 channels, the
// 64-pixel image (the last map 2 x 2, 4 x 4 at output_stride 16).
StatusOr<json> ScaleMobileVitV2(const json& config) {
  TS_ASSIGN_OR_RETURN(MobileVitV2Config c, ParseMobileVitV2(config));
  json t = config;
  t["width_multiplier"] = 0.25;
  t["aspp_out_channels"] = 16;
  t["image_size"] = 2 * TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  TS_RETURN_IF_ERROR(ParseMobileVitV2(t).status());
  return t;
}

class MobileVitV2Trunk : public MobileVitConvTrunk {
 public:
  MobileVitV2Trunk(MobileVitV2Config c, std::string prefix)
      : MobileVitConvTrunk(c.num_channels, c.image_size, c.act, c.expand_ratio),
        c_(std::move(c)),
        p_(std::move(prefix)) {
    const std::vector<int64_t> d = MobileVitV2Widths(c_.width);
    ConvLayer(p_ + "conv_stem.", channels(), d[0], 3, 2);
    const std::string e = p_ + "encoder.layer.";
    mobilenet_.push_back(MakeInverted(e + "0.layer.0.", d[0], d[1], 1, 1));
    for (int i = 0; i < 2; ++i)
      mobilenet_.push_back(MakeInverted(e + "1.layer." + std::to_string(i) + ".",
                                        i == 0 ? d[1] : d[2], d[2], i == 0 ? 2 : 1, 1));
    int64_t dilation = 1;
    for (int b = 0; b < 3; ++b) {
      if ((b == 1 && c_.output_stride == 8) || (b == 2 && c_.output_stride <= 16)) dilation *= 2;
      const int64_t attn = MobileVitDivisible(static_cast<double>(c_.attn_dims[b]) * c_.width);
      Block(e + std::to_string(b + 2) + ".", d[b + 2], d[b + 3], attn, c_.blocks[b], dilation);
    }
    width_ = d[5];
    int64_t side = (image_size() - 1) / 2 + 1;  // conv_stem
    side = (side - 1) / 2 + 1;                  // layer 2
    for (const BlockSpec& b : blocks_) {
      if (b.down.depthwise.stride == 2) side = (side - 1) / 2 + 1;
    }
    side_ = side;
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    at::Tensor x = RunConv(w, p_ + "conv_stem.", pixel_values);
    for (const Inv& l : mobilenet_) x = RunInverted(w, l, x);
    for (const BlockSpec& b : blocks_) x = RunBlock(w, b, x);
    return {x, x.mean({-2, -1}), {x}};
  }

  std::vector<int64_t> LastHiddenShape() const override { return {width_, side_, side_}; }
  int64_t PooledWidth() const override { return width_; }

 private:
  struct BlockSpec {
    std::string p;
    Inv down;
    int64_t layers = 0, attn = 0;
  };

  void AddGroupNorm(const std::string& p, int64_t c) {
    Add(p + "weight", {c});
    Add(p + "bias", {c});
  }

  void Block(const std::string& p, int64_t in, int64_t out, int64_t attn, int64_t layers,
             int64_t dilation) {
    BlockSpec b{p,
                MakeInverted(p + "downsampling_layer.", in, out, dilation == 1 ? 2 : 1,
                             dilation > 1 ? dilation / 2 : 1),
                layers, attn};
    ConvLayer(p + "conv_kxk.", out, out, c_.kernel, 1, out);
    ConvLayer(p + "conv_1x1.", out, attn, 1, 1, 1, 1, false, false);
    const int64_t ffn =
        static_cast<int64_t>(c_.ffn_multiplier * static_cast<double>(attn)) / 16 * 16;
    for (int64_t j = 0; j < layers; ++j) {
      const std::string l = p + "transformer.layer." + std::to_string(j) + ".";
      AddGroupNorm(l + "layernorm_before.", attn);
      ConvLayer(l + "attention.qkv_proj.", attn, 1 + 2 * attn, 1, 1, 1, 1, false, false, true);
      ConvLayer(l + "attention.out_proj.", attn, attn, 1, 1, 1, 1, false, false, true);
      AddGroupNorm(l + "layernorm_after.", attn);
      ConvLayer(l + "ffn.conv1.", attn, ffn, 1, 1, 1, 1, false, true, true);
      ConvLayer(l + "ffn.conv2.", ffn, attn, 1, 1, 1, 1, false, false, true);
    }
    AddGroupNorm(p + "layernorm.", attn);
    ConvLayer(p + "conv_projection.", attn, out, 1, 1, 1, 1, true, false);
    blocks_.push_back(std::move(b));
  }

  // nn.GroupNorm(1, C) over [B, C, P, N], written out.
  at::Tensor OneGroupNorm(const WeightMap& w, const std::string& p, const at::Tensor& x) const {
    const at::Tensor centred = x - x.mean({1, 2, 3}, /*keepdim=*/true);
    const at::Tensor var = centred.pow(2).mean({1, 2, 3}, /*keepdim=*/true);
    return centred / (var + c_.eps).sqrt() * GetWeight(w, p + "weight").view({1, -1, 1, 1}) +
           GetWeight(w, p + "bias").view({1, -1, 1, 1});
  }

  // MobileViTV2TransformerLayer over patches [B, C, area, N].
  at::Tensor RunLayer(const WeightMap& w, const std::string& l, const at::Tensor& in,
                      int64_t attn) const {
    at::Tensor qkv =
        RunConv(w, l + "attention.qkv_proj.", OneGroupNorm(w, l + "layernorm_before.", in));
    std::vector<at::Tensor> parts = at::split_with_sizes(qkv, {1, attn, attn}, 1);
    at::Tensor scores = at::softmax(parts[0], -1);
    at::Tensor context = (parts[1] * scores).sum({-1}, /*keepdim=*/true);
    at::Tensor out = at::relu(parts[2]) * context.expand_as(parts[2]);
    at::Tensor x = RunConv(w, l + "attention.out_proj.", out) + in;
    at::Tensor y = OneGroupNorm(w, l + "layernorm_after.", x);
    y = RunConv(w, l + "ffn.conv2.", RunConv(w, l + "ffn.conv1.", y));
    return y + x;
  }

  // MobileViTV2Layer: F.unfold / F.fold with kernel = stride = patch_size.
  at::Tensor RunBlock(const WeightMap& w, const BlockSpec& blk, const at::Tensor& in) const {
    at::Tensor x = RunInverted(w, blk.down, in);
    x = RunConv(w, blk.p + "conv_kxk.", x);
    x = RunConv(w, blk.p + "conv_1x1.", x);
    const int64_t p = c_.patch_size, b = x.size(0), ch = x.size(1);
    const int64_t h = x.size(2), wd = x.size(3);
    at::Tensor t = at::im2col(x, {p, p}, {1, 1}, {0, 0}, {p, p}).reshape({b, ch, p * p, -1});
    for (int64_t j = 0; j < blk.layers; ++j)
      t = RunLayer(w, blk.p + "transformer.layer." + std::to_string(j) + ".", t, blk.attn);
    t = OneGroupNorm(w, blk.p + "layernorm.", t);
    x = at::col2im(t.reshape({b, ch * p * p, -1}), {h, wd}, {p, p}, {1, 1}, {0, 0}, {p, p});
    return RunConv(w, blk.p + "conv_projection.", x);
  }

  MobileVitV2Config c_;
  std::string p_;
  std::vector<Inv> mobilenet_;
  std::vector<BlockSpec> blocks_;
  int64_t width_ = 0, side_ = 1;
};

StatusOr<DeepLabV3Trunk> MakeMobileVitV2Trunk(const json& tiny, const std::string& prefix,
                                              bool /*segmentation*/) {
  TS_ASSIGN_OR_RETURN(MobileVitV2Config c, ParseMobileVitV2(tiny));
  DeepLabV3Recipe head{.aspp_out = c.aspp_out,
                       .atrous_rates = c.atrous_rates,
                       .num_labels = c.num_labels,
                       .ignore_index = c.ignore_index,
                       .image_size = c.image_size};
  auto trunk = std::make_unique<MobileVitV2Trunk>(std::move(c), prefix);
  head.in_channels = trunk->PooledWidth();
  return DeepLabV3Trunk{std::move(trunk), std::move(head)};
}

std::vector<ArchEntry> MobileVitV2Archs() {
  // apple/mobilevitv2-1.0-imagenet1k-256.
  const json example = {{"model_type", "mobilevitv2"},
                        {"num_channels", 3},
                        {"image_size", 256},
                        {"patch_size", 2},
                        {"expand_ratio", 2.0},
                        {"hidden_act", "swish"},
                        {"conv_kernel_size", 3},
                        {"output_stride", 32},
                        {"classifier_dropout_prob", 0.1},
                        {"initializer_range", 0.02},
                        {"layer_norm_eps", 1e-5},
                        {"n_attn_blocks", {2, 4, 3}},
                        {"base_attn_unit_dims", {128, 192, 256}},
                        {"width_multiplier", 1.0},
                        {"ffn_multiplier", 2},
                        {"attn_dropout", 0.0},
                        {"ffn_dropout", 0.0},
                        {"num_labels", 1000}};
  // apple/mobilevitv2-1.0-voc-deeplabv3: the segmentation class's example.
  return DeepLabV3Archs({"MobileViTV2", "mobilevitv2", "mobilevitv2."}, example,
                        /*aspp_out_channels=*/512, ScaleMobileVitV2, MakeMobileVitV2Trunk);
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(MobileVitV2, MobileVitV2Archs);

}  // namespace ts::zoo::internal
