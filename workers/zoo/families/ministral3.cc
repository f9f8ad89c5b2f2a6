// ministral3 (modeling_ministral3.py, transformers 5): mistral's layout and window, RoPE from
// rope_parameters (yarn in its checkpoints), and Ministral3Attention's query scaling after the
// rotary: q * (1 + llama_4_scaling_beta * log(1 + floor(position /
// original_max_position_embeddings))), both read from rope_parameters (transformers reads them
// there unconditionally, so a config without them is refused, naming the field).
#include "workers/zoo/families/decoder_lineages.h"

namespace ts::zoo::internal::decoder {
namespace {

Status ReadLlama4Scaling(const ConfigReader& r, const json& config, Recipe& c) {
  std::optional<RopeParamsRef> ref = FindRopeParams(config);
  const std::string prefix = ref ? ref->Prefix() : "rope_parameters.";
  if (!ref) return r.Error("rope_parameters", "missing (llama_4_scaling_beta is read from it)");
  const json& p = RopeParams(config, *ref);
  auto number = [&](const char* key) -> StatusOr<double> {
    auto it = p.find(key);
    if (it == p.end() || it->is_null()) {
      return InvalidArgumentError(prefix + key + ": missing");
    }
    if (!it->is_number()) {
      return InvalidArgumentError(prefix + key + ": expected number, got " + JsonTypeName(*it));
    }
    return it->get<double>();
  };
  TS_ASSIGN_OR_RETURN(c.q_pos_scale_beta, number("llama_4_scaling_beta"));
  TS_ASSIGN_OR_RETURN(double orig, number("original_max_position_embeddings"));
  if (orig < 1) {
    return InvalidArgumentError(prefix + "original_max_position_embeddings: must be positive");
  }
  c.q_pos_scale_orig = static_cast<int64_t>(orig);
  return OkStatus();
}

}  // namespace

DecoderFamily Ministral3() {
  return {
      .model_type = "ministral3",
      .fields = {.head_dim = "head_dim"},
      .defaults = {.max_pos = 262144, .eps = 1e-5},
      .parse = [](const ConfigReader& r, const json& config, Recipe& c) -> Status {
        TS_RETURN_IF_ERROR(MistralWindow(r, config, c));
        return ReadLlama4Scaling(r, config, c);
      },
      .scale_extra = ScaleWindowPattern,
      .classes = {"Ministral3ForCausalLM", "Ministral3ForSequenceClassification",
                  "Ministral3ForTokenClassification", "Ministral3ForQuestionAnswering",
                  "Ministral3Model"},
      // Ministral3ForQuestionAnswering(GenericForQuestionAnswering): the model as `transformer`.
      .qa_base = "transformer.",
      // mistralai/Ministral-3-3B-Base-2512's text_config (../shared/data/hf-configs).
      .example = R"({"model_type":"ministral3","hidden_size":3072,"intermediate_size":9216,
         "num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,"num_hidden_layers":26,
         "vocab_size":131072,"max_position_embeddings":262144,"rms_norm_eps":1e-5,
         "hidden_act":"silu","sliding_window":null,"tie_word_embeddings":true,
         "rope_parameters":{"beta_fast":32.0,"beta_slow":1.0,"factor":16.0,
           "llama_4_scaling_beta":0.1,"mscale":1.0,"mscale_all_dim":1.0,
           "original_max_position_embeddings":16384,"rope_theta":1000000.0,"rope_type":"yarn",
           "type":"yarn"}})",
  };
}

TS_ZOO_DECODER_FAMILY(Ministral3);

}  // namespace ts::zoo::internal::decoder
