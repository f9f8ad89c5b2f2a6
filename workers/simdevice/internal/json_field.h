// Small helpers for validated JSON field access with the field path in every error message.
// Private to workers/simdevice.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "workers/base/status.h"

namespace ts::simdevice::internal {

inline std::string JsonTypeName(const nlohmann::json& j) { return j.type_name(); }

inline Status FieldError(const std::string& path, const std::string& what) {
  return InvalidArgumentError(path + ": " + what);
}

inline Status ExpectType(const nlohmann::json& j, const std::string& path, bool ok,
                         const char* expected) {
  if (ok) return OkStatus();
  return FieldError(path, std::string("expected ") + expected + ", got " + JsonTypeName(j));
}

inline StatusOr<std::string> GetString(const nlohmann::json& obj, const std::string& key,
                                       const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) return FieldError(path + key, "missing");
  TS_RETURN_IF_ERROR(ExpectType(*it, path + key, it->is_string(), "string"));
  return it->get<std::string>();
}

inline StatusOr<double> GetNumber(const nlohmann::json& obj, const std::string& key,
                                  const std::string& path, double fallback, bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return FieldError(path + key, "missing");
    return fallback;
  }
  TS_RETURN_IF_ERROR(ExpectType(*it, path + key, it->is_number(), "number"));
  return it->get<double>();
}

inline StatusOr<int64_t> GetInt(const nlohmann::json& obj, const std::string& key,
                                const std::string& path, int64_t fallback, bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return FieldError(path + key, "missing");
    return fallback;
  }
  TS_RETURN_IF_ERROR(ExpectType(*it, path + key, it->is_number_integer(), "integer"));
  return it->get<int64_t>();
}

}  // namespace ts::simdevice::internal
