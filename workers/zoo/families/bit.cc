// bit (modeling_bit.py, configuration_bit.py): BitModel (last_hidden_state: the last stage's map,
// through `norm` (GroupNorm + act) for preactivation layers; pooler_output: its spatial mean
// [B, C, 1, 1]), BitForImageClassification (`classifier.1` over the flattened pooler output) and
// BitBackbone (feature_maps: the encoder's last stage output, before `norm`, the only selection
// the zoo serves; `bit.norm` is then a state_dict entry, not a weight). The trunk lives here (no
// other family uses it): the stem's weight-standardised 7x7 / 2 conv, a constant pad of 1 (or
// none with global_padding SAME), GroupNorm + act for bottleneck layers, a 3x3 / 2 max pool;
// stages of preactivation (norm1 -> conv1, norm2 -> conv2, norm3 -> conv3, the first layer's
// downsample conv on the normed input) or bottleneck (conv -> GroupNorm [+ act], the sum then
// act) layers. Every conv is a WeightStandardizedConv2d: the weight normalised per output
// channel (biased variance, eps 1e-8; the stem's too), with the static padding of
// get_padding_value or DynamicPad2d ("SAME" where a static pad cannot be). Weight
// standardisation and GroupNorm are written out (mean, centred variance), as audio.h's
// ChannelGroupNorm, so that a device computes them as the CPU does.
//
// Refused, naming the field: an output_stride that dilates a stage, an unknown layer_type,
// global_padding VALID (the unpadded 3x3 convs could not add their shortcuts) or unknown,
// channels the num_groups do not divide.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/image_head.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {
namespace {

using json = nlohmann::json;

enum class BitPadding { kNone, kSame };

struct BitConfig {
  int64_t num_channels = 3, embedding_size = 64, num_groups = 32, image_size = 224;
  std::vector<int64_t> widths, depths;  // widths: make_div(hidden_sizes * width_factor)
  bool preactivation = true, embedding_dynamic_padding = false;
  BitPadding padding = BitPadding::kNone;
  VisionActivation act;
  int64_t num_labels = 2;
};

// make_div(value, 8) of modeling_bit.py.
int64_t BitMakeDiv(double value) {
  int64_t v = std::max<int64_t>(8, static_cast<int64_t>(value + 4) / 8 * 8);
  if (static_cast<double>(v) < 0.9 * value) v += 8;
  return v;
}

int64_t BitMid(int64_t out) { return BitMakeDiv(static_cast<double>(out) * 0.25); }

StatusOr<BitConfig> ParseBit(const json& config) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  BitConfig c;
  TS_ASSIGN_OR_RETURN(c.num_channels, PositiveInt(r, "num_channels", 3));
  TS_ASSIGN_OR_RETURN(c.embedding_size, PositiveInt(r, "embedding_size", 64));
  TS_ASSIGN_OR_RETURN(c.num_groups, PositiveInt(r, "num_groups", 32));
  TS_ASSIGN_OR_RETURN(c.image_size, PositiveInt(r, "image_size", 224));
  std::vector<int64_t> hidden;
  TS_ASSIGN_OR_RETURN(hidden, IntList(config, "hidden_sizes", {256, 512, 1024, 2048}));
  TS_ASSIGN_OR_RETURN(c.depths, IntList(config, "depths", {3, 4, 6, 3}));
  if (hidden.empty()) return r.Error("hidden_sizes", "must not be empty");
  TS_RETURN_IF_ERROR(CheckAllPositive("hidden_sizes", hidden));
  TS_RETURN_IF_ERROR(CheckAllPositive("depths", c.depths));
  TS_RETURN_IF_ERROR(CheckLen("depths", c.depths, hidden.size()));
  TS_ASSIGN_OR_RETURN(double width_factor, r.Double("width_factor", 1));
  if (!(width_factor > 0)) return r.Error("width_factor", "must be positive");
  for (int64_t h : hidden) c.widths.push_back(BitMakeDiv(static_cast<double>(h) * width_factor));
  TS_ASSIGN_OR_RETURN(std::string lt, r.String("layer_type", "preactivation"));
  if (lt != "preactivation" && lt != "bottleneck")
    return r.Error("layer_type", "expected preactivation or bottleneck, got '" + lt + "'");
  c.preactivation = lt == "preactivation";
  TS_ASSIGN_OR_RETURN(std::string gp, r.String("global_padding", ""));
  std::transform(gp.begin(), gp.end(), gp.begin(),
                 [](unsigned char ch) { return std::toupper(ch); });
  if (gp == "SAME") {
    c.padding = BitPadding::kSame;
  } else if (gp == "VALID") {
    // Unpadded 3x3 convs shrink the branch, which no longer adds to its shortcut.
    return r.Error("global_padding", "VALID is not supported: the layers' shortcuts would not add");
  } else if (!gp.empty()) {
    return r.Error("global_padding", "expected SAME, VALID or null, got '" + gp + "'");
  }
  TS_ASSIGN_OR_RETURN(c.embedding_dynamic_padding, r.Bool("embedding_dynamic_padding", false));
  TS_ASSIGN_OR_RETURN(c.act, ReadVisionActivation(r, "hidden_act", "relu"));
  TS_ASSIGN_OR_RETURN(int64_t output_stride, r.Int("output_stride", 32));
  int64_t stride = 4;
  for (size_t s = 1; s < c.widths.size(); ++s) {
    if (stride >= output_stride)
      return r.Error("output_stride", "a dilated stage is not supported by the zoo");
    stride *= 2;
  }
  std::vector<int64_t> channels = {c.embedding_size};
  for (int64_t w : c.widths) {
    channels.push_back(w);
    channels.push_back(BitMid(w));
  }
  for (int64_t ch : channels) {
    if (ch % c.num_groups != 0)
      return r.Error("num_groups", "must divide every normalised width (" + std::to_string(ch) +
                                       " % " + std::to_string(c.num_groups) + " != 0)");
  }
  TS_ASSIGN_OR_RETURN(c.num_labels, ParseNumLabels(config));
  return c;
}

// Stem 16 wide, the last stage 64 (the others keep their ratio, multiples of 8), two layers per
// stage (the first with its downsample, the second with the identity shortcut), 4 groups.
StatusOr<json> ScaleBit(const json& config) {
  TS_ASSIGN_OR_RETURN(BitConfig c, ParseBit(config));
  json t = config;
  const int64_t last = c.widths.back();
  std::vector<int64_t> hidden, depths;
  for (size_t s = 0; s < c.widths.size(); ++s) {
    hidden.push_back(std::max<int64_t>(16, ScaleRatio(c.widths[s], last, 64, 8)));
    depths.push_back(std::min<int64_t>(c.depths[s], 2));
  }
  t["hidden_sizes"] = hidden;
  t["depths"] = depths;
  t["width_factor"] = 1;
  t["embedding_size"] = 16;
  t["num_groups"] = 4;
  t["image_size"] = TinyProfile::kImageSize;
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, 1);
  TS_RETURN_IF_ERROR(ParseBit(t).status());
  return t;
}

// One WeightStandardizedConv2d.
struct BitConv {
  std::string weight;
  int64_t k = 1, stride = 1, pad = 0;
  bool dynamic = false;  // DynamicPad2d ("SAME" where the static pad cannot be)
};

BitConv MakeBitConv(std::string weight, int64_t k, int64_t stride, BitPadding padding) {
  BitConv c{std::move(weight), k, stride, 0, false};
  if (padding == BitPadding::kNone) {
    c.pad = ((stride - 1) + (k - 1)) / 2;
  } else if (padding == BitPadding::kSame) {
    if (stride == 1 && (k - 1) % 2 == 0) {
      c.pad = (k - 1) / 2;
    } else {
      c.dynamic = true;
    }
  }
  return c;
}

// DynamicPad2d: pad so that the output has ceil(x / stride) positions, the extra on the right.
at::Tensor BitDynamicPad(const at::Tensor& x, int64_t k, int64_t stride) {
  auto amount = [&](int64_t n) {
    return std::max<int64_t>((n + stride - 1) / stride * stride - stride + k - n, 0);
  };
  const int64_t ph = amount(x.size(2)), pw = amount(x.size(3));
  if (ph == 0 && pw == 0) return x;
  return at::constant_pad_nd(x, {pw / 2, pw - pw / 2, ph / 2, ph - ph / 2}, 0);
}

// nn.GroupNorm(groups, C) over [B, C, H, W], written out (mean, centred variance per group).
at::Tensor BitGroupNorm(const WeightMap& w, const std::string& p, const at::Tensor& x,
                        int64_t groups) {
  const int64_t b = x.size(0), ch = x.size(1);
  at::Tensor g = x.reshape({b, groups, -1});
  const at::Tensor centred = g - g.mean({2}, /*keepdim=*/true);
  const at::Tensor var = centred.pow(2).mean({2}, /*keepdim=*/true);
  at::Tensor y = (centred / (var + 1e-5).sqrt()).reshape(x.sizes());
  return y * GetWeight(w, p + "weight").view({1, ch, 1, 1}) +
         GetWeight(w, p + "bias").view({1, ch, 1, 1});
}

class BitTrunk : public VisionTrunk {
 public:
  // `final_norm`: BitModel's `norm` (preactivation) is applied; false for the backbone, whose
  // feature map is the encoder's output.
  BitTrunk(BitConfig c, std::string prefix, bool final_norm)
      : VisionTrunk(c.num_channels, c.image_size), c_(std::move(c)), p_(std::move(prefix)) {
    const BitPadding pad = c_.padding;
    stem_ = MakeBitConv(
        Add(p_ + "embedder.convolution.weight", {c_.embedding_size, channels(), 7, 7}), 7, 2, pad);
    if (!c_.preactivation) AddNorm(p_ + "embedder.norm.", c_.embedding_size);
    int64_t in = c_.embedding_size;
    for (size_t s = 0; s < c_.widths.size(); ++s) {
      const int64_t out = c_.widths[s], mid = BitMid(out);
      for (int64_t l = 0; l < c_.depths[s]; ++l) {
        const std::string lp =
            p_ + "encoder.stages." + std::to_string(s) + ".layers." + std::to_string(l) + ".";
        const int64_t stride = (l == 0 && s > 0) ? 2 : 1;
        Layer layer;
        layer.p = lp;
        if (l == 0) {
          layer.downsample =
              MakeBitConv(Add(lp + "downsample.conv.weight", {out, in, 1, 1}), 1, stride, pad);
          if (!c_.preactivation) AddNorm(lp + "downsample.norm.", out);
        }
        const int64_t conv_in[3] = {in, mid, mid}, conv_out[3] = {mid, mid, out};
        const int64_t ks[3] = {1, 3, 1};
        for (int i = 0; i < 3; ++i) {
          const std::string n = std::to_string(i + 1);
          // preactivation: norm_i before conv_i (over its input); bottleneck: after (its output).
          if (c_.preactivation) AddNorm(lp + "norm" + n + ".", conv_in[i]);
          layer.convs[i] =
              MakeBitConv(Add(lp + "conv" + n + ".weight", {conv_out[i], conv_in[i], ks[i], ks[i]}),
                          ks[i], i == 1 ? stride : 1, pad);
          if (!c_.preactivation) AddNorm(lp + "norm" + n + ".", conv_out[i]);
        }
        layers_.push_back(std::move(layer));
        in = out;
      }
    }
    final_norm_ = final_norm && c_.preactivation;
    if (final_norm_) AddNorm(p_ + "norm.", in);
    side_ = StemSide();
    for (size_t s = 1; s < c_.widths.size(); ++s) side_ = StrideSide(side_, 2, pad);
  }

  VisionFeatures Forward(const WeightMap& w, const at::Tensor& pixel_values) const override {
    at::Tensor x = Conv(w, stem_, pixel_values, 1e-8);
    if (c_.padding != BitPadding::kSame) x = at::constant_pad_nd(x, {1, 1, 1, 1}, 0);
    if (!c_.preactivation) x = Norm(w, p_ + "embedder.norm.", x, true);
    if (c_.embedding_dynamic_padding) x = BitDynamicPad(x, 3, 2);
    x = at::max_pool2d(x, {3, 3}, {2, 2});
    for (const Layer& l : layers_) x = c_.preactivation ? PreAct(w, l, x) : Bottleneck(w, l, x);
    if (final_norm_) x = Norm(w, p_ + "norm.", x, true);
    return {x, x.mean({2, 3}, /*keepdim=*/true)};
  }

  std::vector<int64_t> LastHiddenShape() const override { return {c_.widths.back(), side_, side_}; }
  int64_t PooledWidth() const override { return c_.widths.back(); }

 private:
  struct Layer {
    std::string p;
    std::optional<BitConv> downsample;
    BitConv convs[3];
  };

  void AddNorm(const std::string& p, int64_t ch) {
    Add(p + "weight", {ch});
    Add(p + "bias", {ch});
  }

  int64_t StemSide() const {
    int64_t side = StrideSide(image_size(), 2, c_.padding, 7);
    if (c_.padding != BitPadding::kSame) side += 2;
    return c_.embedding_dynamic_padding ? (side + 1) / 2 : (side - 3) / 2 + 1;
  }

  // A conv's output side (k x k, stride, the padding rule).
  static int64_t StrideSide(int64_t n, int64_t stride, BitPadding pad, int64_t k = 3) {
    const BitConv c = MakeBitConv("", k, stride, pad);
    if (c.dynamic) return (n + stride - 1) / stride;
    return (n + 2 * c.pad - k) / stride + 1;
  }

  // WeightStandardizedConv2d: the weight normalised per output channel, biased variance.
  at::Tensor Conv(const WeightMap& w, const BitConv& c, const at::Tensor& in, double eps) const {
    const at::Tensor& weight = GetWeight(w, c.weight);
    at::Tensor flat = weight.reshape({1, weight.size(0), -1});
    const at::Tensor centred = flat - flat.mean({2}, /*keepdim=*/true);
    const at::Tensor var = centred.pow(2).mean({2}, /*keepdim=*/true);
    at::Tensor standard = (centred / (var + eps).sqrt()).reshape(weight.sizes());
    const at::Tensor x = c.dynamic ? BitDynamicPad(in, c.k, c.stride) : in;
    return nn::Conv2d(x, standard, at::Tensor(), c.stride, c.pad);
  }

  // BitGroupNormActivation.
  at::Tensor Norm(const WeightMap& w, const std::string& p, const at::Tensor& x, bool act) const {
    at::Tensor y = BitGroupNorm(w, p, x, c_.num_groups);
    return act ? Activate(y, c_.act) : y;
  }

  at::Tensor PreAct(const WeightMap& w, const Layer& l, const at::Tensor& in) const {
    at::Tensor pre = Norm(w, l.p + "norm1.", in, true);
    at::Tensor shortcut = l.downsample ? Conv(w, *l.downsample, pre, 1e-8) : in;
    at::Tensor x = Conv(w, l.convs[0], pre, 1e-8);
    x = Conv(w, l.convs[1], Norm(w, l.p + "norm2.", x, true), 1e-8);
    x = Conv(w, l.convs[2], Norm(w, l.p + "norm3.", x, true), 1e-8);
    return x + shortcut;
  }

  at::Tensor Bottleneck(const WeightMap& w, const Layer& l, const at::Tensor& in) const {
    at::Tensor shortcut = in;
    if (l.downsample)
      shortcut = Norm(w, l.p + "downsample.norm.", Conv(w, *l.downsample, in, 1e-8), false);
    at::Tensor x = Norm(w, l.p + "norm1.", Conv(w, l.convs[0], in, 1e-8), true);
    x = Norm(w, l.p + "norm2.", Conv(w, l.convs[1], x, 1e-8), true);
    x = Norm(w, l.p + "norm3.", Conv(w, l.convs[2], x, 1e-8), false);
    return Activate(x + shortcut, c_.act);
  }

  BitConfig c_;
  std::string p_;
  BitConv stem_;
  std::vector<Layer> layers_;
  bool final_norm_ = false;
  int64_t side_ = 1;
};

StatusOr<PooledVisionTrunk> MakeBitTrunk(const json& tiny, const std::string& prefix) {
  TS_ASSIGN_OR_RETURN(BitConfig c, ParseBit(tiny));
  const int64_t labels = c.num_labels;
  return PooledVisionTrunk{std::make_unique<BitTrunk>(std::move(c), prefix, true), labels};
}

StatusOr<json> ScaleBitBackbone(const json& config) {
  TS_ASSIGN_OR_RETURN(BitConfig c, ParseBit(config));
  TS_RETURN_IF_ERROR(CheckLastStageBackbone(config, static_cast<int64_t>(c.depths.size())));
  TS_ASSIGN_OR_RETURN(json t, ScaleBit(config));
  for (const char* f : {"num_labels", "id2label", "label2id"}) t.erase(f);
  return t;
}

StatusOr<std::unique_ptr<Model>> BuildBitBackbone(ModelSpec spec) {
  TS_ASSIGN_OR_RETURN(BitConfig c, ParseBit(spec.tiny_config));
  TS_RETURN_IF_ERROR(
      CheckLastStageBackbone(spec.tiny_config, static_cast<int64_t>(c.depths.size())));
  auto trunk = std::make_unique<BitTrunk>(std::move(c), "bit.", false);
  auto head = BackboneHead({.prefix_tokens = -1, .map_shape = trunk->LastHiddenShape()});
  return MakeVisionModel(std::move(spec), std::move(trunk), std::move(head));
}

// BitBackbone's BitModel builds `norm` (preactivation) and never reads it.
void BitBackboneUnused(StateDictBuilder& sd) {
  auto c = ParseBit(sd.model().spec().tiny_config);
  if (!c.ok() || !c->preactivation) return;
  sd.AddUnused("bit.norm.weight", {c->widths.back()});
  sd.AddUnused("bit.norm.bias", {c->widths.back()});
}

std::vector<ArchEntry> BitArchs() {
  // google/bit-50 (BiT-M R50x1, ImageNet-1k head).
  const json example = {{"model_type", "bit"},
                        {"num_channels", 3},
                        {"embedding_size", 64},
                        {"hidden_sizes", {256, 512, 1024, 2048}},
                        {"depths", {3, 4, 6, 3}},
                        {"layer_type", "preactivation"},
                        {"hidden_act", "relu"},
                        {"global_padding", nullptr},
                        {"num_groups", 32},
                        {"drop_path_rate", 0.0},
                        {"embedding_dynamic_padding", false},
                        {"output_stride", 32},
                        {"width_factor", 1},
                        {"num_labels", 1000}};
  std::vector<ArchEntry> out =
      PooledVisionArchs({"Bit", "bit", "bit.", "classifier.1."}, example, ScaleBit, MakeBitTrunk);
  // DPT-hybrid's backbone settings (layer_type bottleneck, SAME padding, dynamic embedding pad).
  json backbone = WithArchitecture(example, "BitBackbone");
  backbone.erase("num_labels");
  backbone["layer_type"] = "bottleneck";
  backbone["global_padding"] = "same";
  backbone["embedding_dynamic_padding"] = true;
  backbone["out_features"] = {"stage4"};
  ArchEntry e = {
      {"BitBackbone", "bit", "backbone"}, std::move(backbone), ScaleBitBackbone, BuildBitBackbone};
  e.state_dict.extra = BitBackboneUnused;
  out.push_back(std::move(e));
  return out;
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Bit, BitArchs);

}  // namespace ts::zoo::internal
