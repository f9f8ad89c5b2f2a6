// A zoo model's transformers state_dict (state_dict.h).
#include "workers/zoo/state_dict.h"

#include <ATen/CPUGeneratorImpl.h>

#include <initializer_list>
#include <map>

#include "workers/zoo/families_internal.h"

namespace ts::zoo {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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

// Encoder-decoders: the stacks' embed_tokens are "shared" under their own names.
void AddSharedCopies(internal::StateDictBuilder& sd) {
  for (const auto& [n, s] : sd.weights()) {
    if (!EndsWith(n, "shared.weight") || s.size() != 2) continue;
    const std::string p = n.substr(0, n.size() - std::string("shared.weight").size());
    bool encoder = false, decoder = false;
    for (const auto& kv : sd.weights()) {
      encoder = encoder || kv.first.rfind(p + "encoder.", 0) == 0;
      decoder = decoder || kv.first.rfind(p + "decoder.", 0) == 0;
    }
    if (encoder) sd.AddTied(p + "encoder.embed_tokens.weight", n);
    if (decoder) sd.AddTied(p + "decoder.embed_tokens.weight", n);
  }
}

// Output projections tied to the input embedding.
void AddTiedOutputs(const internal::StateDictRules& rules, internal::StateDictBuilder& sd) {
  const std::string embed = InputEmbedding(sd.weights());
  if (embed.empty()) return;
  // Masked LM heads (and the encoders' causal LM heads, which are the same module): the
  // decoder Linear is the embedding, its bias the head's own bias parameter.
  bool mlm = false;
  for (const char* head : {"cls.predictions", "predictions", "lm_head"}) {
    const std::string h = head;
    const bool transform =
        sd.HasWeight(h + ".transform.dense.weight") || sd.HasWeight(h + ".dense.weight");
    const bool bare = h == "lm_head" && !sd.HasWeight("lm_head.weight") && rules.bare_lm_head;
    if (sd.HasWeight(h + ".bias") && (transform || bare) && !sd.HasWeight(h + ".decoder.weight")) {
      sd.AddTied(h + ".decoder.weight", embed);
      if (rules.decoder_bias) sd.AddTied(h + ".decoder.bias", h + ".bias");
      mlm = true;
    }
  }
  for (const std::string& proj : rules.tied_projections) {
    if (sd.HasWeight(proj + ".bias")) {
      sd.AddTied(proj + ".weight", embed);
      mlm = true;
    }
  }
  const std::string& arch = sd.model().spec().arch;
  if (!mlm &&
      HasSuffix(arch, {"ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "MTModel"})) {
    sd.AddTied(rules.tied_output + ".weight", embed);
  }
}

// BatchNorm's step counter beside its running statistics.
void AddBatchNormCounters(internal::StateDictBuilder& sd) {
  std::vector<std::string> names;
  for (const auto& [n, s] : sd.weights()) {
    if (!EndsWith(n, ".running_var")) continue;
    const std::string name =
        n.substr(0, n.size() - std::string("running_var").size()) + "num_batches_tracked";
    if (!sd.HasWeight(name)) names.push_back(name);
  }
  for (std::string& name : names) sd.Add({std::move(name), {}, at::kLong, ""});
}

// XIELUActivation's constant buffers beside its learnable alphas (apertus): beta 0.5, eps -1e-6,
// 0-dim.
void AddXieluBuffers(internal::StateDictBuilder& sd) {
  std::vector<std::string> prefixes;
  for (const auto& [n, s] : sd.weights()) {
    if (EndsWith(n, "act_fn.alpha_p")) prefixes.push_back(n.substr(0, n.size() - 7));
  }
  for (const std::string& p : prefixes) {
    sd.Add({p + "beta", {}, at::kFloat, "", 0.5});
    sd.Add({p + "eps", {}, at::kFloat, "", -1e-6});
  }
}

}  // namespace

namespace internal {

StateDictBuilder::StateDictBuilder(const Model& model) : model_(model) {
  for (const auto& [n, s] : model.WeightShapes()) {
    out_.push_back({n, s, at::kFloat, ""});
    weights_[n] = s;
  }
}

void StateDictBuilder::AddTied(const std::string& name, const std::string& from) {
  if (weights_.count(name) || added_.count(name) || !weights_.count(from)) return;
  out_.push_back({name, weights_.at(from), at::kFloat, from});
  added_.insert(name);
}

void StateDictBuilder::AddUnused(const std::string& name, std::vector<int64_t> shape) {
  if (weights_.count(name) || added_.count(name)) return;
  out_.push_back({name, std::move(shape), at::kFloat, ""});
  added_.insert(name);
}

void StateDictBuilder::Add(StateDictEntry entry) { out_.push_back(std::move(entry)); }

}  // namespace internal

std::vector<StateDictEntry> StateDictShapes(const Model& model) {
  internal::StateDictBuilder sd(model);
  const internal::ArchEntry* entry = internal::FindArch(model.spec().arch);
  const internal::StateDictRules rules = entry ? entry->state_dict : internal::StateDictRules();
  AddSharedCopies(sd);
  AddTiedOutputs(rules, sd);
  AddBatchNormCounters(sd);
  AddXieluBuffers(sd);
  if (rules.extra) rules.extra(sd);
  return sd.Take();
}

TensorMap StateDict(const Model& model, const WeightMap& weights, uint64_t seed) {
  TensorMap out;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x5eedull);
  for (const StateDictEntry& e : StateDictShapes(model)) {
    auto it = weights.find(e.tied_to.empty() ? e.name : e.tied_to);
    if (it != weights.end()) {
      out[e.name] = it->second;
    } else if (!e.values.empty()) {
      out[e.name] =
          at::tensor(e.values, at::TensorOptions().dtype(at::kDouble)).to(e.dtype).view(e.shape);
    } else if (e.fill) {
      out[e.name] = at::full(e.shape, *e.fill, at::TensorOptions().dtype(e.dtype));
    } else if (e.dtype == at::kLong) {
      out[e.name] = at::zeros(e.shape, at::TensorOptions().dtype(at::kLong));
    } else {
      out[e.name] = at::rand(e.shape, gen, at::TensorOptions().dtype(at::kFloat));
    }
  }
  return out;
}

}  // namespace ts::zoo
