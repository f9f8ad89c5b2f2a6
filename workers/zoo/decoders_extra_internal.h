// Private to the zoo: the recipe-driven decoder behind decoders_extra.cc (the model and the
// tiny scaling) and decoders_extra_families.cc (the families, their configs and registration).
// A family parses its HF config.json into a Recipe: sizes, norm / position / attention / MLP /
// block kinds, per-layer windows and rotary use, and the HF state_dict names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/model.h"

namespace ts::zoo::internal::dextra {

using json = nlohmann::json;

enum class Head { kCausalLM, kSeqCls, kTokenCls, kQA, kBase };
enum class Norm { kRms, kGemmaRms, kLayerNorm, kLayerNormNoBias, kLayerNorm1P, kNonParam };
enum class QkNorm { kNone, kPerHeadRms, kPerHeadGemma, kPerHeadLayerNorm, kFullRms };
enum class Pos { kNone, kRotary, kLearned, kSinusoidal };
enum class Alibi { kNone, kBloom, kMpt, kFalcon };
enum class Qkv { kSeparate, kFused, kPerHead, kGrouped, kCodeGen };
enum class Mlp { kGated, kFusedGateUp, kPlain };
enum class Block { kPre, kParallel1, kParallel2, kPost, kSandwich };

struct Act {
  Activation a = Activation::kSilu;
  bool relu2 = false;  // squared ReLU (HF "relu2")
};

// HF state_dict names below the base prefix ("model." under a head, "" for the base model).
struct Names {
  std::string head_base = "model.", model_base = "";
  std::string embed = "embed_tokens", pos = "", emb_ln = "";
  std::string layers = "layers.";
  std::string ln1 = "input_layernorm", ln2 = "post_attention_layernorm";
  std::string post1 = "", post2 = "";  // sandwich / post norms
  std::string attn = "self_attn.";
  std::string q = "q_proj", k = "k_proj", v = "v_proj", qkv = "", o = "o_proj";
  std::string qn = "q_norm", kn = "k_norm";
  std::string mlp = "mlp.";
  std::string gate = "gate_proj", up = "up_proj", down = "down_proj";
  std::string final_norm = "norm";
  std::string lm_head = "lm_head", seq_cls = "score", token_cls = "score";
};

struct Recipe {
  int64_t vocab = 0, hidden = 0, inter = 0, layers = 0, heads = 0, kv = 0, head_dim = 0;
  int64_t max_pos = 2048;
  Act act;
  double eps = 1e-5, init_range = 0.02;
  bool tie = false;
  std::optional<int64_t> pad;
  bool embed_padding_idx = true;  // nn.Embedding(padding_idx=pad): row zeroed at init
  Norm norm = Norm::kRms;
  QkNorm qk_norm = QkNorm::kNone;
  Pos pos = Pos::kRotary;
  RopeConfig rope, rope_local;  // rope_local: sliding layers (gemma3)
  bool interleaved = false;     // rotate_every_two (GPT-J, Cohere, GLM) vs rotate_half
  int64_t rotary_dim = 0;
  int64_t pos_offset = 0;      // learned / sinusoidal table offset (OPT, BioGPT, XGLM: 2)
  bool pos_from_mask = false;  // positions = cumsum(mask) * mask - 1
  Alibi alibi = Alibi::kNone;
  double alibi_bias_max = 8.0;
  double attn_scale = 0.0;  // 0: 1/sqrt(head_dim)
  double clip_qkv = 0.0;
  bool q_bias = false, k_bias = false, v_bias = false, o_bias = false, mlp_bias = false;
  bool lm_head_bias = false, seq_cls_bias = false, token_cls_bias = true;
  Qkv qkv = Qkv::kSeparate;
  Mlp mlp = Mlp::kGated;
  Block block = Block::kPre;
  bool two_parallel_norms = false;
  double embed_scale = 1.0, residual_mult = 1.0, logit_mult = 1.0;
  std::vector<std::optional<int64_t>> window;  // per layer
  std::vector<bool> rope_on, rope_local_on;    // per layer
  int64_t num_labels = 2;
  Names n;
};

// Config field names of a family's structural sizes ("" = the family has no such field).
struct Fields {
  std::string vocab = "vocab_size", hidden = "hidden_size", inter = "intermediate_size",
              layers = "num_hidden_layers", heads = "num_attention_heads",
              kv = "num_key_value_heads", head_dim = "", max_pos = "max_position_embeddings",
              act = "hidden_act", eps = "rms_norm_eps";
};

struct Defaults {
  int64_t inter_mult = 0;  // > 0: intermediate defaults to inter_mult * hidden
  int64_t max_pos = 2048;
  std::string act = "silu";
  double eps = 1e-6;
  bool tie = false;
  double theta = 10000.0;
  int64_t head_dim = 0;  // > 0: default head_dim when the field is absent
};

struct Family {
  std::string model_type;
  Fields f;
  std::function<StatusOr<Recipe>(const json&)> parse;
  // Family-specific tiny fields after the common scaling (may be empty).
  std::function<void(const json& real, const Recipe& rc, json& tiny)> scale_extra;
  // Legacy field names (alias -> the name the config class keeps), resolved before parsing.
  std::vector<std::pair<std::string, std::string>> aliases;
};

// Legacy field names resolved to the ones the config class keeps.
json Normalize(const Family& fam, const json& config);
// The README tiny policy for any family (heads ratio, width, depth, vocab, positions, labels),
// then the family's own scale_extra; the result is checked to parse.
StatusOr<json> Scale(const Family& fam, const json& real);
// Tiny depth of a recipe: two layers when its per-layer kinds (window, rotary) differ, else one.
int64_t TinyLayers(const Recipe& real);
// A per-layer pattern at the tiny depth: the first layer's kind, then the other kind if any.
std::vector<bool> TinyPattern(const std::vector<bool>& real, const Recipe& real_recipe);
StatusOr<std::unique_ptr<Model>> BuildRecipeModel(ModelSpec spec, Recipe recipe, Head head);
// Every family, by model_type (decoders_extra_families.cc).
std::vector<Family> Families();

}  // namespace ts::zoo::internal::dextra
