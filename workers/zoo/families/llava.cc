// llava (modeling_llava.py): LlavaForConditionalGeneration (image-text-to-text) and LlavaModel
// on the vision-language kind (trunks/vision_language.h): a CLIP vision tower (clip.cc's
// tower, transformers 5's CLIPVisionModel with its modules at the top, under `vision_tower.`),
// LlavaMultiModalProjector (linear_1, projector_hidden_act, linear_2; biases with
// multimodal_projector_bias) over hidden_states[vision_feature_layer] without the cls token
// ("default"; "full" keeps it), spliced at image_token_index into a llama language model
// (`language_model.`, llama.cc's LlamaLm recipe) with its own lm_head. A list of feature layers
// (vision_feature_layer as a list) is refused. The tiny tower keeps just the layers the feature
// layer reaches (-2: two, the second never run); the layers after the feature layer and
// post_layernorm, which transformers builds and LLaVA never calls, are state_dict entries, not
// weights (they would get no gradient). The image token moves into the tiny vocabulary.
// The lineage's shared pieces (families/llava.h) are defined here.
#include "workers/zoo/families/llava.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "workers/zoo/families/clip.h"
#include "workers/zoo/families/decoder_lineages.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {

using json = nlohmann::json;

json VlmSub(const json& config, const char* field) {
  auto it = config.find(field);
  return it == config.end() || it->is_null() ? json::object() : *it;
}

namespace {

// text_config as LlavaConfig builds it: CONFIG_MAPPING[model_type](**text_config), so a size
// the checkpoint leaves out takes LlamaConfig's default (llava-1.5's config.json gives only the
// vocabulary and positions), and a missing text_config is LlamaConfig().
json TextConfig(const json& config) {
  json text = VlmSub(config, "text_config");
  const std::pair<const char*, int64_t> llama_sizes[] = {{"vocab_size", 32000},
                                                         {"hidden_size", 4096},
                                                         {"intermediate_size", 11008},
                                                         {"num_hidden_layers", 32},
                                                         {"num_attention_heads", 32}};
  if (text.value("model_type", std::string("llama")) == "llama") {
    for (const auto& [field, size] : llama_sizes) {
      if (!text.contains(field) || text[field].is_null()) text[field] = size;
    }
  }
  return text;
}

// text_config's errors under its name.
Status UnderTextConfig(const Status& s) {
  if (s.ok()) return s;
  return Status(s.code(), "text_config." + std::string(s.message()));
}

// The language model of text_config.model_type (llama.cc's LlamaLm, mistral.cc's MistralLm).
decoder::DecoderFamily TextFamily(const json& text) {
  return text.value("model_type", std::string("llama")) == "mistral" ? decoder::MistralLm()
                                                                     : decoder::LlamaLm();
}

}  // namespace

StatusOr<VisionLanguageRecipe> ParseLlavaBase(const json& config, TextHeadKind head, bool mistral) {
  if (!config.is_object()) return InvalidArgumentError("config: expected object");
  ConfigReader r(config);
  VisionLanguageRecipe v;
  v.head = head;
  v.base = head == TextHeadKind::kBase ? "" : "model.";
  const json text = TextConfig(config);
  const std::string text_type = text.value("model_type", std::string("llama"));
  if (text_type != "llama" && !(mistral && text_type == "mistral")) {
    return r.Error("text_config.model_type", std::string("only llama") +
                                                 (mistral ? " and mistral are" : " is") +
                                                 " supported by the zoo, got '" + text_type + "'");
  }
  StatusOr<decoder::Recipe> lm = TextFamily(text).recipe(text);
  if (!lm.ok()) return UnderTextConfig(lm.status());
  v.text = std::move(*lm);
  const json vision = VlmSub(config, "vision_config");
  const std::string vision_type = vision.value("model_type", std::string("clip_vision_model"));
  if (vision_type != "clip_vision_model") {
    return r.Error("vision_config.model_type",
                   "only clip_vision_model is supported by the zoo, got '" + vision_type + "'");
  }
  TS_ASSIGN_OR_RETURN(v.vision, ParseClipTower(vision, "vision_config.", false));
  TS_ASSIGN_OR_RETURN(std::string act, r.String("projector_hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(v.projector_act, ParseActivation(act, "projector_hidden_act"));
  TS_ASSIGN_OR_RETURN(v.image_token, r.Int("image_token_index", 32000));
  if (v.image_token < 0 || v.image_token >= v.text.vocab)
    return r.Error("image_token_index", "must be below text_config.vocab_size");
  if (v.text.pad && *v.text.pad == v.image_token)
    return r.Error("image_token_index", "must differ from the pad token");
  return v;
}

StatusOr<json> ScaleLlavaLike(const json& config, const VlmParseFn& parse,
                              const VlmScaleFn& extra) {
  TS_ASSIGN_OR_RETURN(VisionLanguageRecipe v, parse(config, TextHeadKind::kCausalLM));
  json t = config;
  const json real_text = TextConfig(config);
  StatusOr<json> text = TextFamily(real_text).scale(real_text);
  if (!text.ok()) return UnderTextConfig(text.status());
  json tiny_text = std::move(*text);
  tiny_text.erase("touchstone_tiny");
  const int64_t vocab = tiny_text["vocab_size"].get<int64_t>();
  json vision = VlmSub(config, "vision_config");
  ScaleClipTower(vision, v.vision, false);
  int64_t image = v.image_token < vocab ? v.image_token : vocab - 2;
  if (tiny_text.contains("pad_token_id") && tiny_text["pad_token_id"] == image) image = vocab - 3;
  t["image_token_index"] = image;
  t["text_config"] = std::move(tiny_text);
  t["vision_config"] = std::move(vision);
  if (t.contains("vocab_size")) t["vocab_size"] = vocab;
  for (const char* f : {"pad_token_id", "bos_token_id", "eos_token_id"}) MapTokenId(t, f, vocab);
  extra(v, t);
  SetTinyRunProfile(t, TinyProfile::kSeqLen);
  return t;
}

ArchEntry LlavaLikeEntry(const std::string& arch, const std::string& model_type, TextHeadKind head,
                         const char* task, const json& example, VlmParseFn parse,
                         VlmScaleFn extra) {
  ArchEntry e;
  e.info = {arch, model_type, task};
  e.example_config = WithArchitecture(example, arch);
  e.scale = [parse, extra](const json& c) { return ScaleLlavaLike(c, parse, extra); };
  e.build = [head, parse](ModelSpec spec) -> StatusOr<std::unique_ptr<Model>> {
    TS_ASSIGN_OR_RETURN(VisionLanguageRecipe v, parse(spec.tiny_config, head));
    return BuildVisionLanguageModel(std::move(spec), std::move(v));
  };
  // The tower's modules the features never reach are in transformers' state_dict: seeded
  // entries, not weights (trunks/vision_language.h).
  e.state_dict.extra = [head, parse](StateDictBuilder& sd) {
    StatusOr<VisionLanguageRecipe> v = parse(sd.model().spec().tiny_config, head);
    if (!v.ok()) return;
    v->vision.prefix = (head == TextHeadKind::kBase ? "" : "model.") + std::string("vision_tower.");
    const ClipVisionTrunk full(v->vision);
    for (const auto& [n, s] : full.Weights()) {
      if (!VisionTowerReads(*v, n)) sd.AddUnused(n, s);
    }
  };
  return e;
}

namespace {

StatusOr<VisionLanguageRecipe> ParseLlava(const json& config, TextHeadKind head) {
  TS_ASSIGN_OR_RETURN(VisionLanguageRecipe v, ParseLlavaBase(config, head, false));
  ConfigReader r(config);
  if (r.Has("vision_feature_layer") && !config["vision_feature_layer"].is_number_integer())
    return r.Error("vision_feature_layer", "a list of layers is not supported by the zoo");
  TS_ASSIGN_OR_RETURN(v.feature_layer, r.Int("vision_feature_layer", -2));
  if (v.feature_layer < -(v.vision.layers + 1) || v.feature_layer > v.vision.layers) {
    return r.Error("vision_feature_layer",
                   "outside the tower's " + std::to_string(v.vision.layers + 1) + " hidden states");
  }
  TS_ASSIGN_OR_RETURN(std::string strategy, r.String("vision_feature_select_strategy", "default"));
  if (strategy != "default" && strategy != "full")
    return r.Error("vision_feature_select_strategy", "unknown '" + strategy + "'");
  v.drop_cls = strategy == "default";
  TS_ASSIGN_OR_RETURN(v.projector_bias, r.Bool("multimodal_projector_bias", true));
  return v;
}

// The tower's layers up to the feature layer (the ones after it compute nothing LLaVA reads).
void ScaleLlavaTower(const VisionLanguageRecipe& v, json& t) {
  const int64_t reach =
      v.feature_layer < 0 ? -v.feature_layer : std::max<int64_t>(v.feature_layer, 1);
  t["vision_config"]["num_hidden_layers"] = std::min(v.vision.layers, reach);
}

std::vector<ArchEntry> LlavaArchs() {
  // llava-hf/llava-1.5-7b-hf (its text_config's llama sizes written out)
  const json example = json::parse(R"({"model_type":"llava","image_token_index":32000,
      "pad_token_id":32001,"projector_hidden_act":"gelu","tie_word_embeddings":false,
      "vision_feature_layer":-2,"vision_feature_select_strategy":"default","vocab_size":32064,
      "image_seq_length":576,
      "text_config":{"model_type":"llama","hidden_size":4096,"intermediate_size":11008,
        "num_attention_heads":32,"num_key_value_heads":32,"num_hidden_layers":32,
        "vocab_size":32064,"max_position_embeddings":4096,"rms_norm_eps":1e-5,
        "rope_theta":10000.0,"hidden_act":"silu","tie_word_embeddings":false,
        "pad_token_id":32001},
      "vision_config":{"model_type":"clip_vision_model","hidden_size":1024,"image_size":336,
        "intermediate_size":4096,"num_attention_heads":16,"num_hidden_layers":24,
        "patch_size":14,"projection_dim":768,"hidden_act":"quick_gelu","layer_norm_eps":1e-5}})");
  return {LlavaLikeEntry("LlavaForConditionalGeneration", "llava", TextHeadKind::kCausalLM,
                         "image-text-to-text", example, ParseLlava, ScaleLlavaTower),
          LlavaLikeEntry("LlavaModel", "llava", TextHeadKind::kBase, "feature-extraction", example,
                         ParseLlava, ScaleLlavaTower)};
}

}  // namespace

TS_ZOO_REGISTER_FAMILY(Llava, LlavaArchs);

}  // namespace ts::zoo::internal
