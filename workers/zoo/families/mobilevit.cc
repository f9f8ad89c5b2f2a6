// mobilevit (modeling_mobilevit.py, configuration_mobilevit.py): MobileViTModel
// (last_hidden_state: conv_1x1_exp over the last stage; pooler_output its spatial mean),
// MobileViTForImageClassification (`classifier` on the pooler output) and
// MobileViTForSemanticSegmentation (the model without conv_1x1_exp under `mobilevit.`, then
// MobileViTDeepLabV3 over the last stage, heads/deeplab_v3.h). The trunk lives here (no other
// family uses it): conv_stem, two MobileNetV2 layers of
// inverted residuals, three MobileViT blocks (a downsampling inverted residual, conv_kxk, a
// bias-free conv_1x1, unfold into patch_size x patch_size patches, transformer layers (the ViT
// trunk's PreLnEncoder under the 4.x ViTLayer names), layernorm, fold, conv_projection, fusion over
// cat(residual, x)). Every MobileViTConvLayer is conv (no bias) + eval BatchNorm (eps 1e-5) + act
// unless said otherwise. output_stride 16 / 8 dilate the last one / two blocks as transformers does
// (stride 1, the downsampling 3x3 conv's dilation halved).
//
// Refused, naming the field: neck_hidden_sizes without 7 entries, hidden_sizes without 3,
// atrous_rates without 3, an output_stride other than 8, 16, 32; hidden sizes the heads do not
// divide; for the segmentation class num_labels 1 (transformers' loss raises).
#include <algorithm>
#include <cmath>
#include <optional>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/deeplab_v3.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/vision_mobilevit.h"
#include "workers/zoo/trunks/vision_transformer.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

struct MobileVitConfig {
  int64_t num_channels = 3, image_size = 256, patch_size = 2, heads = 4, kernel = 3;
  int64_t output_stride = 32, aspp_out = 256, ignore_index = 255, num_labels = 2;
  std::vector<int64_t> hidden_sizes, neck;  // 3 and 7 entries
  std::vector<int64_t> atrous_rates;
  double mlp_ratio = 2.0, expand_ratio = 4.0, eps = 1e-5;
  bool qkv_bias = true;
  VisionActivation act;
};

StatusOr<MobileVitConfig> ParseMobileVit(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  MobileVitConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 256));
  TS_ASSIGN_OR_RETURN(c.patch_size, PositiveInt(r, "patch_size", 2));
  TS_ASSIGN_OR_RETURN(c.heads, PositiveInt(r, "num_attention_heads", 4));
  TS_ASSIGN_OR_RETURN(c.kernel, PositiveInt(r, "conv_kernel_size", 3));
  TS_ASSIGN_OR_RETURN(c.hidden_sizes, IntList(config, "hidden_sizes", {144, 192, 240}));
  TS_RETURN_IF_ERROR(CheckLen("hidden_sizes", c.hidden_sizes, 3));
  TS_RETURN_IF_ERROR(CheckAllPositive("hidden_sizes", c.hidden_sizes));
  for (int64_t h : c.hidden_sizes) {
    if (h % c.heads != 0)
      return r.Error("num_attention_heads", "must divide every hidden size (" + std::to_string(h) +
                                                " % " + std::to_string(c.heads) + " != 0)");
  }
  TS_ASSIGN_OR_RETURN(c.neck,
                      IntList(config, "neck_hidden_sizes", {16, 32, 64, 96, 128, 160, 640}));
  TS_RETURN_IF_ERROR(CheckLen("neck_hidden_sizes", c.neck, 7));
  TS_RETURN_IF_ERROR(CheckAllPositive("neck_hidden_sizes", c.neck));
  TS_ASSIGN_OR_RETURN(c.atrous_rates, IntList(config, "atrous_rates", {6, 12, 18}));
  TS_RETURN_IF_ERROR(CheckLen("atrous_rates", c.atrous_rates, 3));
  TS_RETURN_IF_ERROR(CheckAllPositive("atrous_rates", c.atrous_rates));
  TS_ASSIGN_OR_RETURN(c.mlp_ratio, r.Double("mlp_ratio", 2.0));
  TS_ASSIGN_OR_RETURN(c.expand_ratio, r.Double("expand_ratio", 4.0));
  if (!(c.mlp_ratio > 0)) return r.Error("mlp_ratio", "must be positive");
  if (!(c.expand_ratio > 0)) return r.Error("expand_ratio", "must be positive");
  TS_ASSIGN_OR_RETURN(c.eps, r.Double("layer_norm_eps", 1e-5));
  TS_ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("qkv_bias", true));
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "silu"));
  TS_ASSIGN_OR_RETURN(c.output_stride, r.Int("output_stride", 32));
  if (c.output_stride != 8 && c.output_stride != 16 && c.output_stride != 32)
    return r.Error("output_stride", "expected 8, 16 or 32");
  TS_ASSIGN_OR_RETURN(c.aspp_out, PositiveInt(r, "aspp_out_channels", 256));
  TS_ASSIGN_OR_RETURN(c.ignore_index, r.Int("semantic_loss_ignore_index", 255));
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// Widths / 4 (multiples of 8), hidden sizes / 8 rounded up to multiples of 8 heads' width with 2
// heads, aspp 16 channels; the 64-pixel image, so that the last block's map is 2 x 2 (4 x 4 at
// output_stride 16) and the unfold has whole patches.
StatusOr<json> ScaleMobileVit(const json& config) {
  TS_ASSIGN_OR_RETURN(MobileVitConfig c, ParseMobileVit(config));
  json t = config;
  std::vector<int64_t> neck, hidden;
  for (int64_t n : c.neck) neck.push_back(std::max<int64_t>(8, (n / 4 + 7) / 8 * 8));
  for (int64_t h : c.hidden_sizes) hidden.push_back(std::max<int64_t>(16, (h / 8 + 7) / 8 * 8));
  t["neck_hidden_sizes"] = neck;
  t["hidden_sizes"] = hidden;
  t["num_attention_heads"] = 2;
  t["aspp_out_channels"] = 16;
  t["image_size"] = 2 * TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  TS_RETURN_IF_ERROR(ParseMobileVit(t).status());
  return t;
}

class MobileVitTrunk : public MobileVitConvTrunk {
 public:
  // `expand`: MobileViTModel's conv_1x1_exp (false under the segmentation head).
  MobileVitTrunk(MobileVitConfig c, std::string prefix, bool expand)
      : MobileVitConvTrunk(c.num_channels, c.image_size, c.act, c.expand_ratio),
        c_(std::move(c)),
        p_(std::move(prefix)),
        expand_(expand) {
    ConvLayer(p_ + "conv_stem.", channels(), c_.neck[0], 3, 2);
    const std::string e = p_ + "encoder.layer.";
    Inverted(e + "0.layer.0.", c_.neck[0], c_.neck[1], 1, 1);
    for (int i = 0; i < 3; ++i)
      Inverted(e + "1.layer." + std::to_string(i) + ".", i == 0 ? c_.neck[1] : c_.neck[2],
               c_.neck[2], i == 0 ? 2 : 1, 1);
    const int layers[3] = {2, 4, 3};
    int64_t dilation = 1;
    for (int b = 0; b < 3; ++b) {
      if ((b == 1 && c_.output_stride == 8) || (b == 2 && c_.output_stride <= 16)) dilation *= 2;
      Block(e + std::to_string(b + 2) + ".", c_.neck[b + 2], c_.neck[b + 3], c_.hidden_sizes[b],
            layers[b], dilation);
    }
    if (expand_) ConvLayer(p_ + "conv_1x1_exp.", c_.neck[5], c_.neck[6], 1);
    int64_t side = (image_size() + 2 - 3) / 2 + 1;  // conv_stem
    side = (side - 1) / 2 + 1;                      // layer 2
    for (const BlockSpec& b : blocks_) {
      if (b.down.depthwise.stride == 2) side = (side - 1) / 2 + 1;
    }
    side_ = side;
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    at::Tensor x = RunConv(w, p_ + "conv_stem.", pixel_values);
    for (const Inv& l : mobilenet_) x = RunInverted(w, l, x);
    for (const BlockSpec& b : blocks_) x = RunBlock(w, b, x);
    if (!expand_) return {x, at::Tensor(), {x}};
    x = RunConv(w, p_ + "conv_1x1_exp.", x);
    return {x, x.mean({-2, -1})};
  }

  std::vector<int64_t> LastHiddenShape() const override {
    return {expand_ ? c_.neck[6] : c_.neck[5], side_, side_};
  }
  int64_t PooledWidth() const override { return c_.neck[6]; }

 private:
  struct BlockSpec {
    std::string p;
    Inv down;
    std::optional<PreLnEncoder> transformer;  // built after conv_1x1 (weight order)
  };

  void Inverted(const std::string& p, int64_t in, int64_t out, int64_t stride, int64_t dilation) {
    mobilenet_.push_back(MakeInverted(p, in, out, stride, dilation));
  }

  void Block(const std::string& p, int64_t in, int64_t out, int64_t hidden, int layers,
             int64_t dilation) {
    BlockSpec b;
    b.p = p;
    b.down = MakeInverted(p + "downsampling_layer.", in, out, dilation == 1 ? 2 : 1,
                          dilation > 1 ? dilation / 2 : 1);
    ConvLayer(p + "conv_kxk.", out, out, c_.kernel);
    ConvLayer(p + "conv_1x1.", out, hidden, 1, 1, 1, 1, false, false);
    // MobileViTTransformerLayer: the 4.x ViTLayer, its norms registered last.
    using S = EncoderSlot;
    PreLnEncoderRecipe e{
        .hidden = hidden,
        .intermediate = static_cast<int64_t>(static_cast<double>(hidden) * c_.mlp_ratio),
        .layers = layers,
        .heads = c_.heads,
        .act = c_.act.act,
        .relu6 = c_.act.relu6,
        .eps = c_.eps,
        .qkv_bias = c_.qkv_bias,
        .naming = VitV4EncoderNaming(
            "transformer.layer.",
            {S::kQuery, S::kKey, S::kValue, S::kOut, S::kFc1, S::kFc2, S::kNorm1, S::kNorm2})};
    WeightList weights;
    b.transformer.emplace(std::move(e), p, weights);
    for (auto& [name, shape] : weights) Add(name, std::move(shape));
    Add(p + "layernorm.weight", {hidden});
    Add(p + "layernorm.bias", {hidden});
    ConvLayer(p + "conv_projection.", hidden, out, 1);
    ConvLayer(p + "fusion.", 2 * out, out, c_.kernel);
    blocks_.push_back(std::move(b));
  }

  // MobileViTLayer: unfolding, the transformer, folding (transformers' reshapes in order).
  at::Tensor RunBlock(const WeightMap& w, const BlockSpec& blk, const at::Tensor& in) const {
    at::Tensor x = RunInverted(w, blk.down, in);
    const at::Tensor residual = x;
    x = RunConv(w, blk.p + "conv_kxk.", x);
    x = RunConv(w, blk.p + "conv_1x1.", x);
    const int64_t p = c_.patch_size, area = p * p, b = x.size(0), ch = x.size(1);
    const int64_t h0 = x.size(2), w0 = x.size(3);
    const int64_t h = (h0 + p - 1) / p * p, wd = (w0 + p - 1) / p * p;
    const bool resize = h != h0 || wd != w0;
    if (resize) x = at::upsample_bilinear2d(x, {h, wd}, /*align_corners=*/false);
    const int64_t nph = h / p, npw = wd / p, n = nph * npw;
    at::Tensor t = x.reshape({b * ch * nph, p, npw, p}).transpose(1, 2);
    t = t.reshape({b, ch, n, area}).transpose(1, 3).reshape({b * area, n, -1});
    t = blk.transformer->Forward(w, t, at::Tensor());
    t = nn::LayerNorm(t, GetWeight(w, blk.p + "layernorm.weight"),
                      GetWeight(w, blk.p + "layernorm.bias"), c_.eps);
    x = t.contiguous().view({b, area, n, -1}).transpose(1, 3);
    x = x.reshape({b * ch * nph, npw, p, p}).transpose(1, 2).reshape({b, ch, nph * p, npw * p});
    if (resize) x = at::upsample_bilinear2d(x, {h0, w0}, /*align_corners=*/false);
    x = RunConv(w, blk.p + "conv_projection.", x);
    return RunConv(w, blk.p + "fusion.", at::cat({residual, x}, 1));
  }

  MobileVitConfig c_;
  std::string p_;
  bool expand_;
  std::vector<Inv> mobilenet_;
  std::vector<BlockSpec> blocks_;
  int64_t side_ = 1;
};

StatusOr<DeepLabV3Trunk> MakeMobileVitTrunk(const json& tiny, const std::string& prefix,
                                            bool segmentation) {
  TS_ASSIGN_OR_RETURN(MobileVitConfig c, ParseMobileVit(tiny));
  DeepLabV3Recipe head{.in_channels = c.neck[5],
                       .aspp_out = c.aspp_out,
                       .atrous_rates = c.atrous_rates,
                       .num_labels = c.num_labels,
                       .ignore_index = c.ignore_index,
                       .image_size = c.image_size};
  // MobileViTForSemanticSegmentation's model has no conv_1x1_exp.
  return DeepLabV3Trunk{std::make_unique<MobileVitTrunk>(std::move(c), prefix, !segmentation),
                        std::move(head)};
}

std::vector<ArchEntry> MobileVitArchs() {
  // apple/mobilevit-small.
  const json example = {{"model_type", "mobilevit"},
                        {"num_channels", 3},
                        {"image_size", 256},
                        {"patch_size", 2},
                        {"hidden_sizes", {144, 192, 240}},
                        {"neck_hidden_sizes", {16, 32, 64, 96, 128, 160, 640}},
                        {"num_attention_heads", 4},
                        {"mlp_ratio", 2.0},
                        {"expand_ratio", 4.0},
                        {"hidden_act", "silu"},
                        {"conv_kernel_size", 3},
                        {"output_stride", 32},
                        {"hidden_dropout_prob", 0.1},
                        {"attention_probs_dropout_prob", 0.0},
                        {"classifier_dropout_prob", 0.1},
                        {"initializer_range", 0.02},
                        {"layer_norm_eps", 1e-5},
                        {"qkv_bias", true},
                        {"num_labels", 1000}};
  // apple/deeplabv3-mobilevit-small: the segmentation class's example.
  return DeepLabV3Archs({"MobileViT", "mobilevit", "mobilevit."}, example,
                        /*aspp_out_channels=*/256, ScaleMobileVit, MakeMobileVitTrunk);
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(MobileVit, MobileVitArchs);

}  // namespace ts::zoo::internal
