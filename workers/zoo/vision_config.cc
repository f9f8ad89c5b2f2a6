// Config readers the vision families share (vision_config.h).
#include "workers/zoo/vision_config.h"

namespace ts::zoo::internal {

StatusOr<std::vector<int64_t>> IntList(const nlohmann::json& config, const std::string& field,
                                       std::vector<int64_t> def) {
  auto it = config.find(field);
  if (it == config.end() || it->is_null()) return def;
  if (!it->is_array()) {
    return InvalidArgumentError(field + ": expected array of integers, got " + JsonTypeName(*it));
  }
  std::vector<int64_t> out;
  for (const auto& v : *it) {
    if (!v.is_number_integer()) {
      return InvalidArgumentError(field + ": expected array of integers, got an element of type " +
                                  std::string(JsonTypeName(v)));
    }
    out.push_back(v.get<int64_t>());
  }
  return out;
}

Status CheckLen(const std::string& field, const std::vector<int64_t>& v, size_t n) {
  if (v.size() != n) {
    return InvalidArgumentError(field + ": expected " + std::to_string(n) + " entries, got " +
                                std::to_string(v.size()));
  }
  return OkStatus();
}

Status CheckAllPositive(const std::string& field, const std::vector<int64_t>& v) {
  for (int64_t x : v) {
    if (x <= 0) return InvalidArgumentError(field + ": must be positive, got " + std::to_string(x));
  }
  return OkStatus();
}

StatusOr<int64_t> PositiveInt(const ConfigReader& r, const std::string& field, int64_t def) {
  TS_ASSIGN_OR_RETURN(int64_t v, r.Int(field, def));
  if (v <= 0) return r.Error(field, "must be positive, got " + std::to_string(v));
  return v;
}

StatusOr<VisionActivation> ReadVisionActivation(const ConfigReader& r, const std::string& field,
                                                const std::string& def) {
  TS_ASSIGN_OR_RETURN(std::string name, r.String(field, def));
  VisionActivation a;
  if (name == "relu6") {
    a.relu6 = true;
    return a;
  }
  TS_ASSIGN_OR_RETURN(a.act, ParseActivation(name, r.Name(field)));
  return a;
}

}  // namespace ts::zoo::internal
