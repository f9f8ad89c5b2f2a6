// A decoder family as data (README.md "Decoder families"): the config field names of its
// structural sizes, its config-class defaults, its HF names, the parse step that reads its own
// fields into the Recipe, its tiny-scaling extras, its example config and its head classes. Each
// families/<model_type>.cc defines one DecoderFamily and registers it with
// TS_ZOO_DECODER_FAMILY, which turns its head classes into registry entries. Private to the zoo.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/trunks/decoder.h"

namespace ts::zoo::internal::decoder {

using json = nlohmann::json;

// Config field names of a family's structural sizes ("" = the family has no such field).
struct Fields {
  std::string vocab = "vocab_size", hidden = "hidden_size", inter = "intermediate_size",
              layers = "num_hidden_layers", heads = "num_attention_heads",
              kv = "num_key_value_heads", head_dim = "", max_pos = "max_position_embeddings",
              act = "hidden_act", eps = "rms_norm_eps";
};

// The family's config-class defaults for fields a config may omit.
struct Defaults {
  int64_t inter_mult = 0;  // > 0: intermediate defaults to inter_mult * hidden
  int64_t max_pos = 2048;
  std::string act = "silu";
  double eps = 1e-6;
  bool tie = false;
  double theta = 10000.0;
  int64_t head_dim = 0;  // > 0: default head_dim when the field is absent
  // A field holding inter_mult (MPT "expansion_ratio"), read and checked before the sizes.
  std::string inter_mult_field = "";
  int64_t kv = 0;  // > 0: kv heads when the field is absent (starcoder2: 2); else the heads
};

// Which layers a classic family's sliding_window applies to (decoder_classic.cc).
enum class WindowPattern {
  kNone,       // no window
  kAll,        // every layer (mistral, mixtral, starcoder2, phi3)
  kAlternate,  // sliding, full, sliding, ... (gemma2; 4096 when absent, off when null)
  kQwen,       // layers >= max_window_layers when use_sliding_window (qwen2, qwen3, qwen2_moe)
};

// Class names of the heads transformers has for the family ("" = none).
struct HeadClasses {
  std::string causal_lm = "", seq_cls = "", token_cls = "", qa = "", base = "";
};

using ParseFn = std::function<Status(const ConfigReader& r, const json& config, Recipe& c)>;
using ScaleFn = std::function<void(const json& real, const Recipe& rc, json& tiny)>;

// Written as one designated initializer per family file; every member has a default.
struct DecoderFamily {
  std::string model_type = "";
  Fields fields = {};
  Defaults defaults = {};
  Names names = {};  // HF names; parse may still adjust them
  // Llama-style attention_bias / mlp_bias flags, read before `parse`.
  bool llama_biases = true;
  // The HF class reads rope_theta / rope_scaling / rope_parameters. False (learned, sinusoidal
  // or ALiBi positions, GPT-J's fixed-base rotary): those fields are not read, so that a value
  // transformers ignores (GPT-J's `rope_scaling: {"rope_type": "gptj"}`) cannot fail the load.
  bool reads_rope = true;
  // The llama-style lineage (Recipe::classic): its own config reading (no relu2, rope parsed by
  // the family, qk_layernorm rejected, windows by `windows`, num_labels last) and tiny scaling.
  bool classic = false;
  WindowPattern windows = WindowPattern::kNone;
  // Classic: the field names when they depend on the config (phi: n_embd or hidden_size).
  std::function<Fields(const json& config)> config_fields = nullptr;
  // The family's own fields, read after the sizes (may be empty).
  ParseFn parse = nullptr;
  // Classic: per-layer fields read after the windows (MoE; may be empty).
  ParseFn parse_layers = nullptr;
  // Family-specific tiny fields after the common scaling (may be empty).
  ScaleFn scale_extra = nullptr;
  // Legacy field names (alias -> the name the config class keeps), resolved before parsing.
  std::vector<std::pair<std::string, std::string>> aliases = {};
  HeadClasses classes = {};
  // The QuestionAnswering class's base-model prefix when it is not `names.head_base`
  // (transformers 5's llama-lineage *ForQuestionAnswering hold the model as `transformer.`).
  std::string qa_base = "";
  const char* example = "{}";  // modelled on a public checkpoint (named in the family file)
  // The first llama-style heads (llama, mistral, qwen2 CausalLM and SequenceClassification)
  // read and scale their configs with config.cc's ParseDecoderConfig and scaling.cc's
  // ScaleToTiny; these replace ParseRecipe and Scale for them (may be empty).
  std::function<StatusOr<Recipe>(const json& config)> recipe = nullptr;
  std::function<StatusOr<json>(const json& config)> scale = nullptr;
  // What the classes' transformers state_dict holds beyond their weights (BioGPT's tied
  // output_projection).
  StateDictRules state_dict = {};
};

// ---- Parsing (decoder_family.cc).

// The recipe of `config` (already normalised): sizes, then the family's own fields.
StatusOr<Recipe> ParseRecipe(const DecoderFamily& fam, const json& config);
// Legacy field names resolved to the ones the config class keeps.
json Normalize(const DecoderFamily& fam, const json& config);
Status Positive(const ConfigReader& r, const std::string& field, int64_t v);
// A rotary fraction field (partial_rotary_factor, ...): rotary_dim = int(head_dim * factor).
Status ReadPartial(const ConfigReader& r, const std::string& field, double def, Recipe& c);
// An absolute rotary_dim field (GPT-J, CodeGen); null: the whole head.
Status ReadRotaryDim(const ConfigReader& r, Recipe& c);
// "sliding_window" when present and not null.
Status ReadWindow(const ConfigReader& r, std::optional<int64_t>& w);
// Per-layer kinds: "layer_types" (transformers' list of "sliding_attention" /
// "full_attention"), else sliding_window_pattern p (layer i slides iff (i + 1) % p != 0, or an
// EXAONE-4 "LLLG" string), else `def_sliding`.
StatusOr<std::vector<bool>> SlidingLayers(const json& config, int64_t layers, bool def_sliding);
// Mistral-style window on every layer (or per layer_types), off when null or >= the context.
Status MistralWindow(const ConfigReader& r, const json& config, Recipe& c);
// Windows on the sliding layers (`pattern_default`: sliding_window_pattern when the config has
// no pattern), with rotary only there (`rope_local` false: full layers are NoPE) or with the
// local rotary base there (`rope_local` true, gemma3).
Status SlidingWithPattern(const ConfigReader& r, const json& config, int64_t pattern_default,
                          bool rope_local, Recipe& c);

// OPT, XGLM, BioGPT: BART-style decoder layers (self_attn_layer_norm, biased q/k/v/out_proj,
// fc1/fc2, final_layer_norm, LayerNorm, plain MLP).
void BartDecoderLayers(Recipe& c);

// ---- The classic lineage's parsing and scaling (decoder_classic.cc).

// ParseRope on `rope_config`, then the rotated fraction: `partial_field` (default
// `def_partial`; "" = the whole head) as a fraction, or as an absolute rotary_dim when
// `is_dim`. Errors name the field ("head_dim" without one).
Status ReadClassicRotary(const ConfigReader& r, const json& rope_config,
                         const std::string& partial_field, double def_partial, bool is_dim,
                         Recipe& c);
// Llama-style attention_bias (default false) on q, k, v and o.
Status ReadAttentionBias(const ConfigReader& r, Recipe& c);
// `qk_layernorm` true (per-head q/k LayerNorm, read by PhiAttention and StableLmAttention) is not
// supported by the zoo; the families whose HF class does not read it leave it unread.
Status RejectQkLayerNorm(const ConfigReader& r);
// Phi-3 longrope factors (rope_scaling.short_factor / long_factor, rotary_dim / 2 each).
Status ReadLongRope(const ConfigReader& r, const json& config, Recipe& c);
// Windows per `pattern` (after the family's parse).
Status ClassicWindows(const ConfigReader& r, WindowPattern pattern, Recipe& c);
// num_experts_per_tok positive and at most the experts.
Status CheckExperts(const ConfigReader& r, const Recipe& c);
StatusOr<json> ScaleClassic(const DecoderFamily& fam, const json& config);
// The recipe of a config.cc DecoderConfig (`family`: "llama", "mistral", "qwen2"): classic, with
// separate q/k/v viewed into heads in turn.
StatusOr<Recipe> RecipeFromDecoderConfig(const json& config, const std::string& family);

// ---- Tiny scaling (decoder_scaling.cc).

// The README tiny policy for any family (heads ratio, width, depth, vocab, positions, labels),
// then the family's own scale_extra; the result is checked to parse.
StatusOr<json> Scale(const DecoderFamily& fam, const json& real);
// Tiny depth of a recipe: two layers when its per-layer kinds (window, rotary) differ, else one.
int64_t TinyLayers(const Recipe& real);
// A per-layer pattern at the tiny depth: the first layer's kind, then the other kind if any.
std::vector<bool> TinyPattern(const std::vector<bool>& real, const Recipe& real_recipe);
// transformers' layer_types list for a sliding pattern.
json LayerTypes(const std::vector<bool>& sliding);
// Tiny window fields of a Mistral-style family (pairs MistralWindow).
void ScaleWindowPattern(const json& real, const Recipe& rc, json& t);
// Tiny sliding_window and layer_types for SlidingWithPattern families (window default 4096).
void ScaleSlidingPattern(const std::vector<bool>& sliding, const json& real, const Recipe& rc,
                         json& t);

// ---- Registration.

// The registry entries of `family`'s head classes.
std::vector<ArchEntry> Archs(DecoderFamily family);

}  // namespace ts::zoo::internal::decoder

// In a family file, inside namespace ts::zoo::internal::decoder: registers the family that
// `fn()` returns (families_internal.h TS_ZOO_REGISTER_FAMILY).
#define TS_ZOO_DECODER_FAMILY(fn) \
  TS_ZOO_REGISTER_FAMILY(fn, [] { return ::ts::zoo::internal::decoder::Archs(fn()); })
