// convbert: ConvBERT (modeling_convbert.py): ELECTRA's embeddings (embeddings_project when
// embedding_size != hidden_size), no pooler, and a mixed attention (Recipe::conv_kernel):
// num_attention_heads / head_ratio self-attention heads beside the span-based dynamic
// convolution (key_conv_attn_layer: depthwise + pointwise + bias; conv_kernel_layer softmaxed
// over conv_kernel_size; conv_out_layer unfolded), concatenated per head. ELECTRA's heads:
// generator_predictions + generator_lm_head tied, classifier.dense (hidden_act) + out_proj,
// sequence_summary.summary (gelu) for multiple choice. head_ratio other than 2 (transformers'
// view of the concatenation fails), an even conv_kernel_size (the unfold then shortens the
// sequence) and num_groups > 1 (GroupedLinearLayer, not written) are refused naming the field.
// YituTech/conv-bert-base.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

Status ParseConvBert(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(int64_t ratio, r.Int("head_ratio", 2));
  if (ratio != 2)
    return r.Error("head_ratio", "only 2 is supported (got " + std::to_string(ratio) + ")");
  if (c.heads < 2 || c.heads % 2 != 0)
    return r.Error("num_attention_heads", "must be even (head_ratio 2)");
  TS_ASSIGN_OR_RETURN(c.conv_kernel, r.Int("conv_kernel_size", 9));
  TS_RETURN_IF_ERROR(Positive(r, "conv_kernel_size", c.conv_kernel));
  if (c.conv_kernel % 2 == 0) return r.Error("conv_kernel_size", "must be odd");
  TS_ASSIGN_OR_RETURN(int64_t groups, r.Int("num_groups", 1));
  if (groups != 1) return r.Error("num_groups", "only 1 is supported (GroupedLinearLayer)");
  return OkStatus();
}

}  // namespace

EncoderFamily ConvBert() {
  json example = BertExample();
  example["model_type"] = "convbert";
  example["embedding_size"] = 768;
  example["head_ratio"] = 2;
  example["conv_kernel_size"] = 9;
  example["num_groups"] = 1;
  return {
      .model_type = "convbert",
      .defaults = {.embedding = 768},
      .structure = {.projection = Projection::kElectra, .base = "convbert."},
      .names = {.seq_pooled = false,
                .seq_dense = "classifier.dense",
                .seq_act = DenseAct::kHiddenAct,
                .seq_out = "classifier.out_proj",
                .choice_pooled = false,
                .choice_dense = "sequence_summary.summary",
                .choice_act = DenseAct::kGelu,
                .lm_dense = "generator_predictions.dense",
                .lm_norm = "generator_predictions.LayerNorm",
                .lm_bias = "generator_lm_head",
                .lm_hidden_act = false},
      .parse = ParseConvBert,
      .classes = AllHeads("ConvBert", /*causal=*/false),
      .example = example,
      .state_dict = {.tied_projections = {"generator_lm_head"}},
  };
}

TS_ZOO_ENCODER_FAMILY(ConvBert);

}  // namespace ts::zoo::internal::encoder
