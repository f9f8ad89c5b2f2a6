// ibert: I-BERT (modeling_ibert.py, quant_modules.py) in its float mode, quant_mode false: every
// Quant* / Int* module then computes what RoBERTa's does (QuantLinear: F.linear; QuantEmbedding:
// F.embedding; QuantAct: x, or identity + x; IntLayerNorm: (x - mean) / sqrt(eps + var) * w + b;
// IntGELU: nn.GELU; IntSoftmax: softmax), so it runs on the RoBERTa lineage (positions after the
// pad id, lm_head.*, classifier.dense + out_proj). quant_mode true (integer-only inference) is
// refused naming the field. The quant modules' buffers are state_dict entries with the values a
// freshly built model holds (QuantAct x_min -1e-5 / x_max 1e-5, every other one 0).
// kssteven/ibert-roberta-base.
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo::internal::encoder {
namespace {

// A float32 buffer of `shape`, every element `value`.
StateDictEntry Const(const std::string& name, std::vector<int64_t> shape, double value) {
  StateDictEntry e;
  e.name = name;
  e.shape = std::move(shape);
  e.fill = value;
  return e;
}

// QuantAct(...): x_min, x_max, act_scaling_factor, each [1].
void QuantAct(StateDictBuilder& sd, const std::string& m) {
  sd.Add(Const(m + ".x_min", {1}, -1e-5));
  sd.Add(Const(m + ".x_max", {1}, 1e-5));
  sd.Add(Const(m + ".act_scaling_factor", {1}, 0.0));
}

// QuantLinear `m` [out, in] with bias: weight_integer, fc_scaling_factor, bias_integer.
void QuantLinear(StateDictBuilder& sd, const std::string& m) {
  const std::vector<int64_t>& w = sd.weights().at(m + ".weight");
  sd.Add(Const(m + ".weight_integer", w, 0.0));
  sd.Add(Const(m + ".fc_scaling_factor", {w[0]}, 0.0));
  sd.Add(Const(m + ".bias_integer", {w[0]}, 0.0));
}

// QuantEmbedding `m`: weight_scaling_factor [1], weight_integer (the weight's shape).
void QuantEmbedding(StateDictBuilder& sd, const std::string& m) {
  sd.Add(Const(m + ".weight_scaling_factor", {1}, 0.0));
  sd.Add(Const(m + ".weight_integer", sd.weights().at(m + ".weight"), 0.0));
}

// IntLayerNorm `m`: shift [1] and its output QuantAct `activation`.
void IntLayerNorm(StateDictBuilder& sd, const std::string& m) {
  sd.Add(Const(m + ".shift", {1}, 0.0));
  QuantAct(sd, m + ".activation");
}

// The buffers of IBertEmbeddings and every IBertLayer, under the base prefix the class uses.
void AddQuantBuffers(StateDictBuilder& sd) {
  std::string p;
  if (!sd.HasWeight("embeddings.word_embeddings.weight")) p = "ibert.";
  const std::string e = p + "embeddings.";
  for (const char* t : {"word_embeddings", "token_type_embeddings", "position_embeddings"})
    QuantEmbedding(sd, e + t);
  QuantAct(sd, e + "embeddings_act1");
  QuantAct(sd, e + "embeddings_act2");
  IntLayerNorm(sd, e + "LayerNorm");
  QuantAct(sd, e + "output_activation");
  for (int64_t i = 0;; ++i) {
    const std::string l = p + "encoder.layer." + std::to_string(i) + ".";
    if (!sd.HasWeight(l + "attention.self.query.weight")) break;
    const std::string a = l + "attention.self.";
    for (const char* q : {"query", "key", "value"}) QuantLinear(sd, a + q);
    for (const char* q : {"query_activation", "key_activation", "value_activation",
                          "output_activation", "softmax.act"})
      QuantAct(sd, a + q);
    for (const std::string& o : {l + "attention.output.", l + "output."}) {
      QuantLinear(sd, o + "dense");
      QuantAct(sd, o + "ln_input_act");
      IntLayerNorm(sd, o + "LayerNorm");
      QuantAct(sd, o + "output_activation");
    }
    QuantLinear(sd, l + "intermediate.dense");
    QuantAct(sd, l + "intermediate.output_activation");
    QuantAct(sd, l + "pre_intermediate_act");
    QuantAct(sd, l + "pre_output_act");
  }
}

Status ParseIbert(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(bool quant, r.Bool("quant_mode", false));
  if (quant) {
    return r.Error("quant_mode", "true (integer-only inference) is not supported by the zoo");
  }
  TS_ASSIGN_OR_RETURN(std::string fd, r.String("force_dequant", "none"));
  if (fd != "none" && fd != "gelu" && fd != "layernorm" && fd != "softmax" && fd != "nonlinear")
    return r.Error("force_dequant", "unknown '" + fd + "'");
  // IBertIntermediate: "I-BERT only supports 'gelu' for `config.hidden_act`".
  if (c.act != Activation::kGeluErf) return r.Error("hidden_act", "I-BERT supports only 'gelu'");
  TS_ASSIGN_OR_RETURN(bool decoder, r.Bool("is_decoder", false));
  if (decoder) return r.Error("is_decoder", "I-BERT is an encoder only");
  return OkStatus();
}

}  // namespace

EncoderFamily Ibert() {
  json example = RobertaExample("ibert", 50265, 0, 2);
  example["force_dequant"] = "none";
  example["position_embedding_type"] = "absolute";
  example["quant_mode"] = false;
  EncoderFamily fam = RobertaLineage("ibert", "IBert", "ibert.", std::move(example));
  fam.parse = ParseIbert;
  fam.classes = AllHeads("IBert", /*causal=*/false);
  fam.state_dict.extra = AddQuantBuffers;
  return fam;
}

TS_ZOO_ENCODER_FAMILY(Ibert);

}  // namespace ts::zoo::internal::encoder
