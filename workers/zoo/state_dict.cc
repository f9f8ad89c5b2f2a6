// A zoo model's transformers state_dict (state_dict.h).
#include "workers/zoo/state_dict.h"

#include <ATen/CPUGeneratorImpl.h>

#include <initializer_list>
#include <map>
#include <set>

namespace ts::zoo {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool HasPrefix(const std::string& arch, std::initializer_list<const char*> prefixes) {
  for (const char* p : prefixes)
    if (arch.rfind(p, 0) == 0) return true;
  return false;
}

bool HasSuffix(const std::string& arch, std::initializer_list<const char*> suffixes) {
  for (const char* s : suffixes)
    if (EndsWith(arch, s)) return true;
  return false;
}

// The input word embedding: "shared.weight" (encoder-decoders) first, else the usual names.
std::string InputEmbedding(const std::map<std::string, std::vector<int64_t>>& w) {
  for (const char* suffix : {"shared.weight", "embed_tokens.weight", "word_embeddings.weight",
                             "wte.weight", "embed_in.weight", "tokens_embed.weight",
                             "transformer.embeddings.weight"}) {  // XLM's words
    for (const auto& [n, s] : w)
      if (EndsWith(n, suffix) && s.size() == 2) return n;
  }
  return "";
}

}  // namespace

std::vector<StateDictEntry> StateDictShapes(const Model& model) {
  std::vector<StateDictEntry> out;
  std::map<std::string, std::vector<int64_t>> have;
  for (const auto& [n, s] : model.WeightShapes()) {
    out.push_back({n, s, at::kFloat, ""});
    have[n] = s;
  }
  std::set<std::string> added;
  auto add = [&](const std::string& name, const std::string& from) {
    if (have.count(name) || added.count(name) || !have.count(from)) return;
    out.push_back({name, have.at(from), at::kFloat, from});
    added.insert(name);
  };
  const std::string& arch = model.spec().arch;
  const std::string embed = InputEmbedding(have);
  // Encoder-decoders: the stacks' embed_tokens are "shared" under their own names.
  for (const auto& [n, s] : have) {
    if (!EndsWith(n, "shared.weight") || s.size() != 2) continue;
    const std::string p = n.substr(0, n.size() - std::string("shared.weight").size());
    bool encoder = false, decoder = false;
    for (const auto& kv : have) {
      encoder = encoder || kv.first.rfind(p + "encoder.", 0) == 0;
      decoder = decoder || kv.first.rfind(p + "decoder.", 0) == 0;
    }
    if (encoder) add(p + "encoder.embed_tokens.weight", n);
    if (decoder) add(p + "decoder.embed_tokens.weight", n);
  }
  // Output projections tied to the input embedding.
  if (!embed.empty()) {
    // Masked LM heads (and the encoders' causal LM heads, which are the same module): the
    // decoder Linear is the embedding, its bias the head's own bias parameter.
    bool mlm = false;
    for (const char* head : {"cls.predictions", "predictions", "lm_head"}) {
      const std::string h = head;
      const bool transform =
          have.count(h + ".transform.dense.weight") || have.count(h + ".dense.weight");
      // BertGenerationDecoder's lm_head is a bare decoder Linear with its own bias parameter.
      const bool bare =
          h == "lm_head" && !have.count("lm_head.weight") && arch.rfind("BertGeneration", 0) == 0;
      if (have.count(h + ".bias") && (transform || bare) && !have.count(h + ".decoder.weight")) {
        add(h + ".decoder.weight", embed);
        add(h + ".decoder.bias", h + ".bias");
        mlm = true;
      }
    }
    for (const char* proj : {"vocab_projector", "generator_lm_head", "pred_layer.proj"}) {
      if (have.count(std::string(proj) + ".bias")) {
        add(std::string(proj) + ".weight", embed);
        mlm = true;
      }
    }
    if (!mlm &&
        HasSuffix(arch, {"ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "MTModel"})) {
      // Tied output projections under the class's own name (Whisper proj_out, BioGPT
      // output_projection), else lm_head.
      const char* head = arch.rfind("Whisper", 0) == 0  ? "proj_out.weight"
                         : arch.rfind("BioGpt", 0) == 0 ? "output_projection.weight"
                                                        : "lm_head.weight";
      add(head, embed);
    }
  }
  // Modules transformers builds but the class never calls (the zoo builds no weight for them;
  // the export writes them, seeded, for a strict load): every BigBird head holds BigBirdModel
  // with its pooler (add_pooling_layer defaults to True); the BART lineage's decoder-only CausalLM
  // (Marian, Pegasus, Blenderbot and BlenderbotSmall too) keeps each layer's cross-attention
  // (encoder_attn, encoder_attn_layer_norm).
  auto unused = [&](const std::string& name, const std::vector<int64_t>& shape) {
    if (have.count(name) || added.count(name)) return;
    out.push_back({name, shape, at::kFloat, ""});
    added.insert(name);
  };
  if (arch.rfind("BigBird", 0) == 0 && have.count("bert.embeddings.word_embeddings.weight")) {
    const int64_t h = have.at("bert.embeddings.word_embeddings.weight")[1];
    unused("bert.pooler.weight", {h, h});
    unused("bert.pooler.bias", {h});
  }
  if (EndsWith(arch, "ForCausalLM") &&
      HasPrefix(arch, {"Bart", "MBart", "Mvp", "PLBart", "Marian", "Pegasus", "Blenderbot"})) {
    for (const auto& [n, s] : have) {
      for (const char* from : {".self_attn.", ".self_attn_layer_norm."}) {
        const size_t at = n.find(from);
        if (n.rfind("model.decoder.layers.", 0) != 0 || at == std::string::npos) continue;
        const std::string to =
            std::string(from) == ".self_attn." ? ".encoder_attn." : ".encoder_attn_layer_norm.";
        unused(n.substr(0, at) + to + n.substr(at + std::string(from).size()), s);
      }
    }
  }
  // BatchNorm's step counter beside its running statistics.
  for (const auto& [n, s] : have) {
    if (!EndsWith(n, ".running_var")) continue;
    const std::string name =
        n.substr(0, n.size() - std::string("running_var").size()) + "num_batches_tracked";
    if (!have.count(name)) out.push_back({name, {}, at::kLong, ""});
  }
  // wav2vec2: masked_spec_embed [hidden] under the base model's prefix.
  const nlohmann::json& cfg = model.spec().tiny_config;
  for (const auto& [n, s] : have) {
    if (!EndsWith(n, "feature_projection.projection.weight") || s.size() != 2) continue;
    auto prob = [&](const char* field, double def) {
      if (!cfg.is_object() || !cfg.contains(field) || !cfg[field].is_number()) return def;
      return cfg[field].get<double>();
    };
    // Wav2Vec2Config defaults: mask_time_prob 0.05, mask_feature_prob 0.
    const double time = prob("mask_time_prob", 0.05);
    const double feature = prob("mask_feature_prob", 0.0);
    // UniSpeechSatModel builds it whatever the probabilities (modular_unispeech_sat.py).
    if (time > 0.0 || feature > 0.0 || arch.rfind("UniSpeechSat", 0) == 0) {
      const std::string p =
          n.substr(0, n.size() - std::string("feature_projection.projection.weight").size());
      out.push_back({p + "masked_spec_embed", {s[0]}, at::kFloat, ""});
    }
  }
  return out;
}

TensorMap StateDict(const Model& model, const WeightMap& weights, uint64_t seed) {
  TensorMap out;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x5eedull);
  for (const StateDictEntry& e : StateDictShapes(model)) {
    auto it = weights.find(e.tied_to.empty() ? e.name : e.tied_to);
    if (it != weights.end()) {
      out[e.name] = it->second;
    } else if (e.dtype == at::kLong) {
      out[e.name] = at::zeros(e.shape, at::TensorOptions().dtype(at::kLong));
    } else {
      out[e.name] = at::rand(e.shape, gen, at::TensorOptions().dtype(at::kFloat));
    }
  }
  return out;
}

}  // namespace ts::zoo
