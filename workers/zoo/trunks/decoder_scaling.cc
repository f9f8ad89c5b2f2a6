// The tiny scaling every decoder family shares (README.md policy), and the helpers family
// files use for their per-layer patterns (decoder_family.h).
#include <algorithm>

#include "workers/zoo/scaling.h"
#include "workers/zoo/trunks/decoder_family.h"

namespace ts::zoo::internal::decoder {

using P = TinyProfile;

int64_t TinyLayers(const Recipe& c) {
  return TinyDepth(c.layers, VariesByLayer(c.window) || VariesByLayer(c.rope_on) ||
                                 VariesByLayer(c.rope_local_on) || c.moe.pattern);
}

std::vector<bool> TinyPattern(const std::vector<bool>& real, const Recipe& real_recipe) {
  std::vector<bool> t(static_cast<size_t>(TinyLayers(real_recipe)), real.empty() ? false : real[0]);
  for (bool b : real)
    if (t.size() > 1 && b != real[0]) t[1] = b;
  return t;
}

json LayerTypes(const std::vector<bool>& sliding) {
  json out = json::array();
  for (bool s : sliding) out.push_back(s ? "sliding_attention" : "full_attention");
  return out;
}

namespace {

// Positions: max_position_embeddings, and the RoPE dict's original context scaled with it.
void ScalePositions(const DecoderFamily& fam, const Recipe& c, json& t) {
  const bool dynamic = c.pos == Pos::kRotary && c.rope.kind == RopeKind::kDynamic;
  const int64_t max_pos = dynamic ? P::kDynamicPositions : P::kMaxPositions;
  if (!fam.fields.max_pos.empty()) t[fam.fields.max_pos] = max_pos;
  const std::optional<RopeParamsRef> ref = FindRopeParams(t);
  if (!ref) return;
  json& rs = RopeParams(t, *ref);
  if (!rs.contains("original_max_position_embeddings")) return;
  if (dynamic) {
    rs["original_max_position_embeddings"] = max_pos;
    return;
  }
  const int64_t orig = ScaleRatio(c.rope.original_max_position_embeddings, c.max_pos, max_pos, 1);
  rs["original_max_position_embeddings"] = std::clamp<int64_t>(orig, P::kSeqLen / 2, max_pos);
}

}  // namespace

StatusOr<json> Scale(const DecoderFamily& fam, const json& real_in) {
  if (fam.scale) return fam.scale(real_in);
  if (fam.classic) return ScaleClassic(fam, real_in);
  const json real = Normalize(fam, real_in);
  TS_ASSIGN_OR_RETURN(Recipe c, ParseRecipe(fam, real));
  const Fields& f = fam.fields;
  json t = real;
  const TinyAttention a = TinyAttentionShape(c.heads, c.kv);
  t[f.hidden] = a.hidden;
  t[f.heads] = a.heads;
  if (!f.kv.empty() && (real.contains(f.kv) || a.kv_heads != a.heads)) t[f.kv] = a.kv_heads;
  if (!f.head_dim.empty()) t[f.head_dim] = a.head_dim;
  if (!f.inter.empty() && real.contains(f.inter) && !real[f.inter].is_null()) {
    t[f.inter] = ScaleRatio(c.inter, c.hidden, a.hidden, 8);
  }
  t[f.layers] = TinyLayers(c);
  const int64_t vocab = std::min(c.vocab, P::kVocab);
  t[f.vocab] = vocab;
  for (const char* fld : {"pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"})
    MapTokenId(t, fld, vocab);
  ScalePositions(fam, c, t);
  ScaleLabels(t, c.num_labels);
  SetTinyRunProfile(t, P::kSeqLen);
  if (fam.scale_extra) fam.scale_extra(real, c, t);
  TS_RETURN_IF_ERROR(ParseRecipe(fam, t).status());  // the tiny config must build
  return t;
}

void ScaleWindowPattern(const json& real, const Recipe& rc, json& t) {
  bool any = false;
  for (const auto& w : rc.window) any = any || w.has_value();
  if (!any) {
    if (t.contains("sliding_window") && t["sliding_window"].is_number())
      t["sliding_window"] = nullptr;
    t.erase("layer_types");
    return;
  }
  std::vector<bool> sl;
  for (const auto& w : rc.window) sl.push_back(w.has_value());
  t["sliding_window"] = std::min<int64_t>(real["sliding_window"].get<int64_t>(), P::kWindow);
  if (real.contains("layer_types") || real.contains("sliding_window_pattern")) {
    t.erase("sliding_window_pattern");
    t["layer_types"] = LayerTypes(TinyPattern(sl, rc));
  }
}

void ScaleSlidingPattern(const std::vector<bool>& sliding, const json& real, const Recipe& rc,
                         json& t) {
  t["sliding_window"] = std::min<int64_t>(real.value("sliding_window", int64_t{4096}), P::kWindow);
  t.erase("sliding_window_pattern");
  t["layer_types"] = LayerTypes(TinyPattern(sliding, rc));
}

}  // namespace ts::zoo::internal::decoder
