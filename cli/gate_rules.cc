#include "cli/gate_rules.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;
using nlohmann::json;

absl::Status Bad(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(path + ": " + why);
}

absl::StatusOr<double> Percent(const json& v, const std::string& path) {
  if (!v.is_number()) return Bad(path, "must be a number (a percentage, 0..100)");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < 0 || d > 100) return Bad(path, "must be in [0, 100]");
  return d;
}

absl::Status ParseThresholds(const json& v, const std::string& path, pb::Thresholds* out) {
  if (!v.is_object()) return Bad(path, "must be an object like {\"eager\": 99.0}");
  for (const auto& [key, value] : v.items()) {
    const std::string p = path + "." + key;
    if (key != "eager" && key != "compile" && key != "train" && key != "opcov") {
      return Bad(p, "unknown key; expected one of eager, compile, train, opcov");
    }
    auto pct = Percent(value, p);
    if (!pct.ok()) return pct.status();
    if (key == "eager") out->set_eager(*pct);
    if (key == "compile") out->set_compile(*pct);
    if (key == "train") out->set_train(*pct);
    if (key == "opcov") out->set_opcov(*pct);
  }
  return absl::OkStatus();
}

absl::Status ParseGroups(const json& v, const std::string& key,
                         google::protobuf::Map<std::string, pb::Thresholds>* out) {
  if (!v.is_object()) return Bad(key, "must be an object of name -> thresholds");
  for (const auto& [name, t] : v.items()) {
    if (name.empty()) return Bad(key, "an empty name");
    const std::string p = key + "[\"" + name + "\"]";
    if (absl::Status st = ParseThresholds(t, p, &(*out)[name]); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status ParseStrings(const json& v, const std::string& key,
                          google::protobuf::RepeatedPtrField<std::string>* out) {
  if (!v.is_array()) return Bad(key, "must be an array of strings");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string() || v[i].get<std::string>().empty()) {
      return Bad(key + "[" + std::to_string(i) + "]", "must be a non-empty string");
    }
    out->Add(v[i].get<std::string>());
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> NonNegativeInt(const json& v, const std::string& key) {
  if (!v.is_number_integer() && !v.is_number_unsigned()) {
    return Bad(key, "must be a non-negative integer");
  }
  const int64_t n = v.get<int64_t>();
  if (n < 0) return Bad(key, "must be a non-negative integer");
  return n;
}

absl::Status ParseKey(const std::string& key, const json& value, pb::GateRules* r) {
  if (key == "baseline") {
    auto id = NonNegativeInt(value, key);
    if (!id.ok()) return id.status();
    if (*id == 0) return Bad(key, "must be a sweep id (> 0)");
    r->set_baseline_sweep_id(*id);
    return absl::OkStatus();
  }
  if (key == "min") return ParseThresholds(value, key, r->mutable_min());
  if (key == "min_by_task") return ParseGroups(value, key, r->mutable_min_by_task());
  if (key == "min_by_class") return ParseGroups(value, key, r->mutable_min_by_class());
  if (key == "max_new_failures") {
    auto n = NonNegativeInt(value, key);
    if (!n.ok()) return n.status();
    r->set_max_new_failures(*n);
    return absl::OkStatus();
  }
  if (key == "forbid") return ParseStrings(value, key, r->mutable_forbid());
  if (key == "must_pass") return ParseStrings(value, key, r->mutable_must_pass());
  return Bad(key,
             "unknown key; expected one of baseline, min, min_by_task, min_by_class, "
             "max_new_failures, forbid, must_pass");
}

}  // namespace

absl::StatusOr<pb::GateRules> ParseGateRules(const std::string& json_text) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(std::string("rules: not JSON: ") + e.what());
  }
  if (!j.is_object()) return absl::InvalidArgumentError("rules: must be a JSON object");
  pb::GateRules rules;
  for (const auto& [key, value] : j.items()) {
    if (absl::Status st = ParseKey(key, value, &rules); !st.ok()) return st;
  }
  return rules;
}

}  // namespace ts::cli
