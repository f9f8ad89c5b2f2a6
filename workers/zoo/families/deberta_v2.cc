// deberta-v2: disentangled attention (c2p / p2c over log-bucketed relative positions,
// share_att_key or pos_key_proj / pos_query_proj, rel_embeddings LayerNorm), no position
// embeddings unless position_biased_input, embed_proj when embedding_size != hidden_size, a
// ContextPooler (pooler.dense, pooler_hidden_act) before the classifiers. Simplifications:
// trunks/encoder.h.
#include <algorithm>
#include <cctype>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {

// pos_att_type: "p2c|c2p" (lower-cased, each part stripped, as the configs do) or
// ["p2c", "c2p"].
Status ParsePosAttType(const ConfigReader& r, const json& config, Recipe& c) {
  if (!r.Has("pos_att_type")) return OkStatus();
  const json& p = config.at("pos_att_type");
  std::vector<std::string> kinds;
  if (p.is_string()) {
    std::string s = p.get<std::string>();
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    size_t start = 0;
    while (start <= s.size()) {
      size_t bar = s.find('|', start);
      if (bar == std::string::npos) bar = s.size();
      std::string part = s.substr(start, bar - start);
      const size_t first = part.find_first_not_of(" \t");
      part = first == std::string::npos
                 ? ""
                 : part.substr(first, part.find_last_not_of(" \t") - first + 1);
      if (!part.empty()) kinds.push_back(part);
      start = bar + 1;
    }
  } else if (p.is_array()) {
    for (const auto& k : p) {
      if (!k.is_string()) return r.Error("pos_att_type", "expected strings");
      kinds.push_back(k.get<std::string>());
    }
  } else {
    return r.Error("pos_att_type", std::string("expected string or array, got ") + JsonTypeName(p));
  }
  for (const std::string& k : kinds) {
    if (k == "c2p") {
      c.c2p = true;
    } else if (k == "p2c") {
      c.p2c = true;
    } else {
      return r.Error("pos_att_type", "unknown '" + k + "'");
    }
  }
  return OkStatus();
}

Status ParseDebertaPooler(const ConfigReader& r, Recipe& c) {
  TS_ASSIGN_OR_RETURN(int64_t pool_h, r.Int("pooler_hidden_size", c.hidden));
  if (pool_h != c.hidden) return r.Error("pooler_hidden_size", "must equal hidden_size");
  TS_ASSIGN_OR_RETURN(std::string pooler_act, r.String("pooler_hidden_act", "gelu"));
  TS_ASSIGN_OR_RETURN(c.pooler_act, ParseActivation(pooler_act, r.Name("pooler_hidden_act")));
  return OkStatus();
}

HeadNames DebertaHeadNames() {
  return {.seq_pooled = false,
          .seq_dense = "pooler.dense",
          .seq_act = DenseAct::kPoolerAct,
          .choice_pooled = false,
          .choice_dense = "pooler.dense",
          .choice_act = DenseAct::kPoolerAct,
          .lm_dense = "cls.predictions.transform.dense",
          .lm_norm = "cls.predictions.transform.LayerNorm",
          .lm_bias = "cls.predictions"};
}

void ScaleDeberta(const Recipe& real, json& t) {
  using P = TinyProfile;
  t.erase("attention_head_size");
  t["pooler_hidden_size"] = t["hidden_size"];
  const int64_t max_pos = std::min(real.max_pos, P::kMaxPositions);
  if (real.buckets > 0) {
    // 256 of 512 positions -> 32 of 64: positions beyond 16 are log-bucketed within 32 tokens.
    int64_t b = ScaleRatio(real.buckets, real.max_pos, max_pos, 4) / 2 * 2;
    t["position_buckets"] = std::clamp<int64_t>(b, 4, max_pos);
  }
  if (t.contains("max_relative_positions") && t["max_relative_positions"].is_number_integer() &&
      t["max_relative_positions"].get<int64_t>() > 0) {
    t["max_relative_positions"] = max_pos;
  }
}

namespace {

Status ParseDeberta(const ConfigReader& r, const json& config, Recipe& c) {
  TS_ASSIGN_OR_RETURN(c.relative, r.Bool("relative_attention", false));
  TS_ASSIGN_OR_RETURN(c.share_att_key, r.Bool("share_att_key", false));
  TS_ASSIGN_OR_RETURN(c.pos_biased_input, r.Bool("position_biased_input", true));
  TS_ASSIGN_OR_RETURN(c.buckets, r.Int("position_buckets", -1));
  TS_ASSIGN_OR_RETURN(c.max_rel, r.Int("max_relative_positions", -1));
  if (c.max_rel < 1) c.max_rel = c.max_pos;
  if (c.buckets > 0 && c.buckets < 2) return r.Error("position_buckets", "must be >= 2 or <= 0");
  if (c.buckets > 0 && c.max_rel <= c.buckets / 2 + 1) {
    return r.Error("max_relative_positions", "must exceed position_buckets / 2 + 1");
  }
  TS_ASSIGN_OR_RETURN(std::string norm_rel, r.String("norm_rel_ebd", "none"));
  c.norm_rel = norm_rel.find("layer_norm") != std::string::npos;
  TS_RETURN_IF_ERROR(ParsePosAttType(r, config, c));
  c.att_scale_factor = 1 + (c.c2p ? 1 : 0) + (c.p2c ? 1 : 0);
  if (!c.relative) c.c2p = c.p2c = false;  // no c2p / p2c terms, but the scale stays
  TS_ASSIGN_OR_RETURN(int64_t conv, r.Int("conv_kernel_size", 0));
  if (conv > 0) return r.Error("conv_kernel_size", "unsupported (> 0)");
  TS_RETURN_IF_ERROR(ParseDebertaPooler(r, c));
  if (r.Has("attention_head_size")) {
    TS_ASSIGN_OR_RETURN(int64_t ahs, r.Int("attention_head_size"));
    if (ahs != c.hidden / c.heads) {
      return r.Error("attention_head_size", "must equal hidden_size / num_attention_heads");
    }
  }
  return OkStatus();
}

}  // namespace

EncoderFamily DebertaV2() {
  return {
      .model_type = "deberta-v2",
      .defaults = {.type_vocab = 0, .eps = 1e-7, .embedding = -1},
      .structure = {.layout = Layout::kDeberta,
                    .projection = Projection::kDeberta,
                    .base = "deberta."},
      .names = DebertaHeadNames(),
      .parse_late = ParseDeberta,
      .scale_extra = ScaleDeberta,
      .classes = AllHeads("DebertaV2", /*causal=*/false),
      // microsoft/deberta-v3-base
      .example = json{{"model_type", "deberta-v2"},   {"attention_probs_dropout_prob", 0.1},
                      {"hidden_act", "gelu"},         {"hidden_dropout_prob", 0.1},
                      {"hidden_size", 768},           {"initializer_range", 0.02},
                      {"intermediate_size", 3072},    {"max_position_embeddings", 512},
                      {"relative_attention", true},   {"position_buckets", 256},
                      {"norm_rel_ebd", "layer_norm"}, {"share_att_key", true},
                      {"pos_att_type", "p2c|c2p"},    {"layer_norm_eps", 1e-7},
                      {"max_relative_positions", -1}, {"position_biased_input", false},
                      {"num_attention_heads", 12},    {"num_hidden_layers", 12},
                      {"type_vocab_size", 0},         {"pad_token_id", 0},
                      {"vocab_size", 128100}},
  };
}

TS_ZOO_ENCODER_FAMILY(DebertaV2);

}  // namespace ts::zoo::internal::encoder
