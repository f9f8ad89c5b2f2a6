// xmod: X-MOD (modeling_xmod.py), RoBERTa with a per-language bottleneck adapter after every
// layer's FFN (XmodOutput.lang_adapter: the output LayerNorm reused or adapter_layer_norm,
// dense1, hidden_act, dense2, the residual), pre_norm (attention.output.LayerNorm and
// output.LayerNorm before the attention and the FFN, encoder.LayerNorm at the end) or post-norm.
// The zoo's batches carry no lang_ids: every row runs config.default_language (XmodModel's
// default when lang_ids is None; XmodForMultipleChoice repeats a given lang_ids to a length its
// rows do not have, so only the default serves every head), which the config must name. The
// other languages' adapters are built by transformers and never called: state_dict entries
// (seeded), not weights. facebook/xmod-base (its language list shortened to 8 codes).
#include <algorithm>

#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

StatusOr<std::vector<std::string>> Languages(const ConfigReader& r, const json& config) {
  if (!config.contains("languages")) return std::vector<std::string>{"en_XX"};
  const json& l = config["languages"];
  if (!l.is_array() || l.empty()) return r.Error("languages", "must be a non-empty list");
  std::vector<std::string> out;
  for (const json& v : l) {
    if (!v.is_string()) return r.Error("languages", "must list language codes (strings)");
    out.push_back(v.get<std::string>());
  }
  return out;
}

Status ParseXmod(const ConfigReader& r, const json& config, Recipe& c) {
  TS_ASSIGN_OR_RETURN(std::vector<std::string> langs, Languages(r, config));
  if (!r.Has("default_language")) {
    return r.Error("default_language",
                   "required: the zoo's batches carry no lang_ids, every row runs this language");
  }
  TS_ASSIGN_OR_RETURN(c.adapter_lang, r.String("default_language"));
  if (std::find(langs.begin(), langs.end(), c.adapter_lang) == langs.end())
    return r.Error("default_language", "'" + c.adapter_lang + "' is not in languages");
  TS_ASSIGN_OR_RETURN(int64_t factor, r.Int("adapter_reduction_factor", 2));
  TS_RETURN_IF_ERROR(Positive(r, "adapter_reduction_factor", factor));
  c.adapter = c.hidden / factor;  // XmodAdapter: hidden_size // adapter_reduction_factor
  if (c.adapter <= 0) return r.Error("adapter_reduction_factor", "exceeds hidden_size");
  TS_ASSIGN_OR_RETURN(c.adapter_norm, r.Bool("adapter_layer_norm", false));
  TS_ASSIGN_OR_RETURN(c.adapter_reuse_norm, r.Bool("adapter_reuse_layer_norm", true));
  TS_ASSIGN_OR_RETURN(c.ln_before_adapter, r.Bool("ln_before_adapter", true));
  TS_ASSIGN_OR_RETURN(bool pre_norm, r.Bool("pre_norm", false));
  if (pre_norm) {
    c.pre_attn_norm = "attention.output.LayerNorm";
    c.pre_mlp_norm = "output.LayerNorm";
    c.final_norm = "encoder.LayerNorm";
  }
  return OkStatus();
}

// The tiny model keeps the default language and the first others, at most three in all, in
// their order (the ModuleDict's keys).
void ScaleXmod(const Recipe& real, json& t) {
  if (!t.contains("languages")) return;  // ["en_XX"], XmodConfig's default
  std::vector<std::string> keep;
  for (const json& v : t["languages"]) {
    const std::string l = v.get<std::string>();
    if (l == real.adapter_lang || keep.size() + 1 < 3) keep.push_back(l);
    if (keep.size() == 3) break;
  }
  t["languages"] = keep;  // the default is in the real list (ParseXmod), so in `keep`
}

// Every language's adapter but the default's, in each layer.
void AddUnusedAdapters(StateDictBuilder& sd) {
  const json& cfg = sd.model().spec().tiny_config;
  const std::string p = sd.HasWeight("embeddings.word_embeddings.weight") ? "" : "roberta.";
  const std::string def = cfg.value("default_language", "");
  const json langs = cfg.contains("languages") ? cfg["languages"] : json::array({"en_XX"});
  for (int64_t i = 0;; ++i) {
    const std::string o = p + "encoder.layer." + std::to_string(i) + ".output.";
    const std::string used = o + "adapter_modules." + def + ".dense1.weight";
    if (!sd.HasWeight(used)) break;
    const std::vector<int64_t> d1 = sd.weights().at(used);  // [bottleneck, hidden]
    for (const json& v : langs) {
      const std::string m = o + "adapter_modules." + v.get<std::string>() + ".";
      sd.AddUnused(m + "dense1.weight", d1);
      sd.AddUnused(m + "dense1.bias", {d1[0]});
      sd.AddUnused(m + "dense2.weight", {d1[1], d1[0]});
      sd.AddUnused(m + "dense2.bias", {d1[1]});
    }
  }
}

}  // namespace

EncoderFamily Xmod() {
  json example = RobertaExample("xmod", 250002, 0, 2);
  example["adapter_layer_norm"] = false;
  example["adapter_reduction_factor"] = 2;
  example["adapter_reuse_layer_norm"] = true;
  example["default_language"] = "en_XX";
  example["languages"] = {"en_XX", "id_ID", "vi_VN", "ru_RU", "fa_IR", "sv_SE", "ja_XX", "fr_XX"};
  example["ln_before_adapter"] = true;
  example["pre_norm"] = false;
  example["position_embedding_type"] = "absolute";
  EncoderFamily fam = RobertaLineage("xmod", "Xmod", "roberta.", std::move(example));
  fam.parse = ParseXmod;
  fam.scale_extra = ScaleXmod;
  fam.state_dict.extra = AddUnusedAdapters;
  return fam;
}

TS_ZOO_ENCODER_FAMILY(Xmod);

}  // namespace ts::zoo::internal::encoder
