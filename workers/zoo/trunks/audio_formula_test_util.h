// What the wav2vec2 lineage's formula tests (audio_lineage_test.cc, audio_sew_test.cc,
// audio_sew_d_test.cc, audio_bert_test.cc) share beyond formula_test_util.h: the feature encoder,
// SEW's squeeze and the weighted-layer-sum head, each once, in double from at:: ops, and the
// check of the sequence-classification and CTC heads against a family's base reference.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo::testing {

// Wav2Vec2FeatureEncoder over input_values [B, T] -> [B, C, T']: conv_dim / conv_stride convs
// without bias, GroupNorm on the first (`group`: feat_extract_norm "group") or a LayerNorm
// (eps 1e-5) on each, gelu.
inline at::Tensor FeatureEncoder(const WeightMap& w, const std::string& p, const nlohmann::json& c,
                                 bool group, const at::Tensor& values) {
  const auto dims = c.at("conv_dim").get<std::vector<int64_t>>();
  const auto strides = c.at("conv_stride").get<std::vector<int64_t>>();
  at::Tensor x = values.unsqueeze(1);
  for (size_t i = 0; i < dims.size(); ++i) {
    const std::string lp = p + "feature_extractor.conv_layers." + std::to_string(i) + ".";
    x = at::conv1d(x, w.at(lp + "conv.weight"), {}, strides[i]);
    if (group && i == 0) {
      x = at::group_norm(x, dims[0], w.at(lp + "layer_norm.weight"), w.at(lp + "layer_norm.bias"));
    } else if (!group) {
      x = Ln(w, lp + "layer_norm", x.transpose(1, 2), 1e-5).transpose(1, 2);
    }
    x = at::gelu(x);
  }
  return x;
}

// SEW's squeeze of hs [B, T, H]: SEWPositionalConvEmbedding (weight norm over dim 2, stride
// squeeze_factor, SEWSamePadLayer, gelu) beside avg_pool1d(squeeze_factor), both cut to the
// shorter; [B, T / squeeze_factor, H].
inline at::Tensor SewSqueeze(const WeightMap& w, const std::string& p, const nlohmann::json& c,
                             const at::Tensor& hs) {
  const int64_t sq = c.at("squeeze_factor").get<int64_t>();
  const int64_t k = c.at("num_conv_pos_embeddings").get<int64_t>();
  const std::string cp = p + "encoder.pos_conv_embed.conv.";
  const at::Tensor& g = w.at(cp + "parametrizations.weight.original0");
  const at::Tensor& v = w.at(cp + "parametrizations.weight.original1");
  at::Tensor weight = g * v / v.norm(2, at::IntArrayRef{0, 1}, /*keepdim=*/true);
  at::Tensor ht = hs.transpose(1, 2);
  at::Tensor pos = at::conv1d(ht, weight, w.at(cp + "bias"), sq, k / 2, 1,
                              c.at("num_conv_pos_embedding_groups").get<int64_t>());
  if (k % 2 == 0) pos = pos.narrow(2, 0, pos.size(2) - 1);
  pos = at::gelu(pos);
  at::Tensor pooled = at::avg_pool1d(ht, {sq}, {sq});
  const int64_t len = std::min(pos.size(-1), pooled.size(-1));
  return (pooled.narrow(2, 0, len) + pos.narrow(2, 0, len)).transpose(1, 2);
}

// transformers starts `layer_weights` all equal (ones / n): under a uniform softmax a head that
// weighted the layers wrongly (another order, another normalisation) would still match its
// reference. The tests set them apart first.
inline void DistinctLayerWeights(WeightMap& w) {
  at::Tensor& lw = w.at("layer_weights");
  lw = at::linspace(-1.5, 1.0, lw.numel(), lw.options()).view(lw.sizes());
}

// Wav2Vec2ForSequenceClassification with use_weighted_layer_sum and no mask:
// classifier(projector(sum_i softmax(layer_weights)_i * states[i]).mean(1)).
inline at::Tensor WeightedLayerSumLogits(const WeightMap& w,
                                         const std::vector<at::Tensor>& states) {
  at::Tensor norm = at::softmax(w.at("layer_weights"), -1).view({-1, 1, 1});
  at::Tensor pooled = (at::stack(states, 1) * norm).sum(1);
  return LinWithBias(w, "classifier", LinWithBias(w, "projector", pooled).mean(1));
}

// A family's base reference: the last hidden state of its base model on weights under `prefix`
// for config `c` and the input `x` in double, pushing each encoder hidden state into `states`
// when not null.
using AudioBaseRef =
    std::function<at::Tensor(const WeightMap& w, const std::string& prefix, const nlohmann::json& c,
                             const at::Tensor& x, std::vector<at::Tensor>* states)>;

// <family>ForSequenceClassification with use_weighted_layer_sum (WeightedLayerSumLogits over
// `ref`'s hidden states) and <family>ForCTC (lm_head over `ref`'s last state), both under
// `prefix` with `input` in double; CTC's state_dict ends with `prefix` masked_spec_embed.
inline void ExpectWeightedSumAndCtcHeads(const std::string& family, const std::string& prefix,
                                         const std::string& input, const AudioBaseRef& ref) {
  nlohmann::json c = *ExampleConfig(family + "ForSequenceClassification");
  c["use_weighted_layer_sum"] = true;
  auto m = Build(family + "ForSequenceClassification", c);
  ASSERT_TRUE(m);
  WeightMap w = m->InitWeights(6, at::kDouble);
  DistinctLayerWeights(w);
  Batch b = m->MakeBatch(4, 2);
  b.inputs[input] = b.inputs.at(input).to(at::kDouble);
  std::vector<at::Tensor> states;
  ref(w, prefix, m->spec().tiny_config, b.inputs.at(input), &states);
  const at::Tensor want = WeightedLayerSumLogits(w, states);
  EXPECT_LT(RelDiff(m->Forward(w, b.inputs)[0], want), 1e-10);
  auto ctc = Build(family + "ForCTC");
  ASSERT_TRUE(ctc);
  const WeightMap wc = ctc->InitWeights(5, at::kDouble);
  Batch bc = ctc->MakeBatch(3, 2);
  bc.inputs[input] = bc.inputs.at(input).to(at::kDouble);
  const at::Tensor hs = ref(wc, prefix, ctc->spec().tiny_config, bc.inputs.at(input), nullptr);
  EXPECT_LT(RelDiff(ctc->Forward(wc, bc.inputs)[0], LinWithBias(wc, "lm_head", hs)), 1e-10);
  EXPECT_EQ(StateDictShapes(*ctc).back().name, prefix + "masked_spec_embed");
}

}  // namespace ts::zoo::testing
