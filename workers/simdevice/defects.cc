#include <set>

#include "workers/simdevice/internal/defects.h"
#include "workers/simdevice/internal/json_field.h"
#include "workers/simdevice/profile.h"

namespace ts::simdevice::internal {
namespace {

using nlohmann::json;

StatusOr<DefectMode> ParseMode(const json& v, const std::string& path) {
  TS_RETURN_IF_ERROR(ExpectType(v, path, v.is_string(), "string"));
  const std::string s = v.get<std::string>();
  if (s == "eager") return DefectMode::kEager;
  if (s == "compiled") return DefectMode::kCompiled;
  if (s == "both") return DefectMode::kBoth;
  return FieldError(path, "unknown mode '" + s + "' (expected eager, compiled, both)");
}

Status ParseWhen(const json& w, const std::string& path, Defect* d) {
  TS_RETURN_IF_ERROR(ExpectType(w, path, w.is_object(), "object"));
  const std::string pre = path + ".";
  for (const auto& [key, val] : w.items()) {
    const std::string p = pre + key;
    if (key == "dtype") {
      TS_RETURN_IF_ERROR(ExpectType(val, p, val.is_string(), "string"));
      std::string dt = val.get<std::string>();
      if (!KnownDtypeNames().count(dt)) return FieldError(p, "unknown dtype '" + dt + "'");
      d->when.dtype = dt;
    } else if (key == "min_numel" || key == "max_numel" || key == "min_last_dim" ||
               key == "max_last_dim" || key == "rank") {
      TS_RETURN_IF_ERROR(ExpectType(val, p, val.is_number_integer(), "integer"));
      int64_t n = val.get<int64_t>();
      if (n < 0) return FieldError(p, "must be >= 0");
      if (key == "min_numel") d->when.min_numel = n;
      if (key == "max_numel") d->when.max_numel = n;
      if (key == "min_last_dim") d->when.min_last_dim = n;
      if (key == "max_last_dim") d->when.max_last_dim = n;
      if (key == "rank") d->when.rank = n;
    } else if (key == "mode") {
      TS_ASSIGN_OR_RETURN(d->mode, ParseMode(val, p));
    } else if (key == "probability") {
      TS_RETURN_IF_ERROR(ExpectType(val, p, val.is_number(), "number"));
      double pr = val.get<double>();
      if (!(pr > 0.0 && pr <= 1.0)) return FieldError(p, "must be in (0, 1]");
      d->when.probability = pr;
    } else {
      return FieldError(p, "unknown condition");
    }
  }
  return OkStatus();
}

Status ParseEffect(const json& e, const std::string& path, Defect* d) {
  TS_RETURN_IF_ERROR(ExpectType(e, path, e.is_object(), "object"));
  TS_ASSIGN_OR_RETURN(std::string kind, GetString(e, "kind", path + "."));
  struct KindInfo {
    EffectKind kind;
    bool needs_value;
  };
  static const std::map<std::string, KindInfo> kKinds = {
      {"scale", {EffectKind::kScale, true}},
      {"offset", {EffectKind::kOffset, true}},
      {"zero_tail", {EffectKind::kZeroTail, true}},
      {"nan", {EffectKind::kNan, false}},
      {"error", {EffectKind::kError, false}},
      {"abort", {EffectKind::kAbort, false}},
      {"sleep_ms", {EffectKind::kSleepMs, true}},
      {"slow", {EffectKind::kSlow, true}},
      {"vector_engine", {EffectKind::kVectorEngine, false}}};
  auto k = kKinds.find(kind);
  if (k == kKinds.end()) {
    return FieldError(path + ".kind", "unknown kind '" + kind +
                                          "' (expected scale, offset, zero_tail, nan, error, "
                                          "abort, sleep_ms, slow, vector_engine)");
  }
  d->kind = k->second.kind;
  for (const auto& [key, val] : e.items()) {
    if (key != "kind" && key != "value") return FieldError(path + "." + key, "unknown field");
  }
  TS_ASSIGN_OR_RETURN(d->value, GetNumber(e, "value", path + ".", 0.0, k->second.needs_value));
  if (d->kind == EffectKind::kZeroTail &&
      (d->value < 1 || d->value != static_cast<int64_t>(d->value))) {
    return FieldError(path + ".value", "zero_tail needs a positive integer count");
  }
  if (d->kind == EffectKind::kSleepMs && d->value <= 0) {
    return FieldError(path + ".value", "sleep_ms needs a positive duration");
  }
  if (d->kind == EffectKind::kSlow && !(d->value > 0)) {
    return FieldError(path + ".value", "slow needs a positive factor");
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<Defect>> ParseDefects(const json& defects) {
  TS_RETURN_IF_ERROR(ExpectType(defects, "defects", defects.is_array(), "array"));
  std::vector<Defect> out;
  std::set<std::string> ids;
  for (size_t i = 0; i < defects.size(); ++i) {
    const std::string path = "defects[" + std::to_string(i) + "]";
    const json& j = defects[i];
    TS_RETURN_IF_ERROR(ExpectType(j, path, j.is_object(), "object"));
    Defect d;
    TS_ASSIGN_OR_RETURN(d.id, GetString(j, "id", path + "."));
    if (!ids.insert(d.id).second) return FieldError(path + ".id", "duplicate id '" + d.id + "'");
    TS_ASSIGN_OR_RETURN(d.op, GetString(j, "op", path + "."));
    if (d.op.find("::") == std::string::npos) {
      return FieldError(path + ".op", "'" + d.op + "' is not an operator name");
    }
    for (const auto& [key, val] : j.items()) {
      if (key != "id" && key != "op" && key != "mode" && key != "when" && key != "effect" &&
          key != "note") {
        return FieldError(path + "." + key, "unknown field");
      }
    }
    if (j.contains("mode")) {
      TS_ASSIGN_OR_RETURN(d.mode, ParseMode(j["mode"], path + ".mode"));
    }
    if (j.contains("when")) {
      TS_RETURN_IF_ERROR(ParseWhen(j["when"], path + ".when", &d));
    }
    if (!j.contains("effect")) return FieldError(path + ".effect", "missing");
    TS_RETURN_IF_ERROR(ParseEffect(j["effect"], path + ".effect", &d));
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace ts::simdevice::internal
