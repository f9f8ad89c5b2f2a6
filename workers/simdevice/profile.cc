#include "workers/simdevice/profile.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "workers/simdevice/internal/defects.h"
#include "workers/simdevice/internal/json_field.h"
#include "workers/simdevice/internal/performance_spec.h"

namespace ts::simdevice {
namespace {

using internal::FieldError;
using nlohmann::json;

// Op names in profiles look like "aten::mm" or "aten::add.Tensor".
Status ValidateOpName(const std::string& op, const std::string& path) {
  auto sep = op.find("::");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= op.size()) {
    return FieldError(path, "'" + op + "' is not an operator name (expected e.g. aten::mm)");
  }
  return OkStatus();
}

StatusOr<std::set<std::string>> GetOpList(const json& obj, const std::string& key,
                                          const std::string& path, bool required) {
  std::set<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return FieldError(path + key, "missing");
    return out;
  }
  TS_RETURN_IF_ERROR(internal::ExpectType(*it, path + key, it->is_array(), "array"));
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string p = path + key + "[" + std::to_string(i) + "]";
    const json& e = (*it)[i];
    TS_RETURN_IF_ERROR(internal::ExpectType(e, p, e.is_string(), "string"));
    std::string op = e.get<std::string>();
    TS_RETURN_IF_ERROR(ValidateOpName(op, p));
    out.insert(std::move(op));
  }
  return out;
}

StatusOr<MatmulNumerics> ParseMatmul(const std::string& v, const std::string& path) {
  if (v == "fp32") return MatmulNumerics::kFp32;
  if (v == "bf16_in_fp32_acc") return MatmulNumerics::kBf16InFp32Acc;
  if (v == "bf16") return MatmulNumerics::kBf16;
  return FieldError(path, "unknown value '" + v + "' (expected fp32, bf16_in_fp32_acc, bf16)");
}

StatusOr<Precision> ParsePrecision(const std::string& v, const std::string& path) {
  if (v == "fp32") return Precision::kFp32;
  if (v == "bf16") return Precision::kBf16;
  return FieldError(path, "unknown value '" + v + "' (expected fp32, bf16)");
}

Status ParseNumerics(const json& root, Numerics* out) {
  auto it = root.find("numerics");
  if (it == root.end()) return OkStatus();  // all fp32
  TS_RETURN_IF_ERROR(internal::ExpectType(*it, "numerics", it->is_object(), "object"));
  for (auto& [key, val] : it->items()) {
    if (key != "matmul" && key != "reductions" && key != "elementwise") {
      return FieldError("numerics." + key, "unknown field");
    }
    TS_RETURN_IF_ERROR(internal::ExpectType(val, "numerics." + key, val.is_string(), "string"));
  }
  if (it->contains("matmul")) {
    TS_ASSIGN_OR_RETURN(out->matmul, ParseMatmul((*it)["matmul"], "numerics.matmul"));
  }
  if (it->contains("reductions")) {
    TS_ASSIGN_OR_RETURN(out->reductions,
                        ParsePrecision((*it)["reductions"], "numerics.reductions"));
  }
  if (it->contains("elementwise")) {
    TS_ASSIGN_OR_RETURN(out->elementwise,
                        ParsePrecision((*it)["elementwise"], "numerics.elementwise"));
  }
  return OkStatus();
}

Status ParseCompiler(const json& root, CompilerSpec* out) {
  auto it = root.find("compiler");
  if (it == root.end()) return FieldError("compiler", "missing");
  TS_RETURN_IF_ERROR(internal::ExpectType(*it, "compiler", it->is_object(), "object"));
  const json& c = *it;
  TS_ASSIGN_OR_RETURN(out->supported_ops, GetOpList(c, "supported_ops", "compiler.", true));
  TS_ASSIGN_OR_RETURN(out->data_dependent_ops,
                      GetOpList(c, "data_dependent_ops", "compiler.", false));
  TS_ASSIGN_OR_RETURN(out->cost_ms_per_node,
                      internal::GetNumber(c, "cost_ms_per_node", "compiler.", 1.0, false));
  TS_ASSIGN_OR_RETURN(out->cost_ms_per_mflop,
                      internal::GetNumber(c, "cost_ms_per_mflop", "compiler.", 0.0, false));
  TS_ASSIGN_OR_RETURN(out->budget_ms,
                      internal::GetNumber(c, "budget_ms", "compiler.", 60000.0, false));
  TS_ASSIGN_OR_RETURN(out->max_nodes, internal::GetInt(c, "max_nodes", "compiler.", 4000, false));
  if (out->cost_ms_per_node < 0) return FieldError("compiler.cost_ms_per_node", "must be >= 0");
  if (out->cost_ms_per_mflop < 0) return FieldError("compiler.cost_ms_per_mflop", "must be >= 0");
  if (out->budget_ms <= 0) return FieldError("compiler.budget_ms", "must be > 0");
  if (out->max_nodes <= 0) return FieldError("compiler.max_nodes", "must be > 0");
  for (const auto& [key, val] : c.items()) {
    static const std::set<std::string> kKnown = {"supported_ops",     "data_dependent_ops",
                                                 "cost_ms_per_node",  "cost_ms_per_mflop",
                                                 "budget_ms",         "max_nodes"};
    if (!kKnown.count(key)) return FieldError("compiler." + key, "unknown field");
  }
  return OkStatus();
}

}  // namespace

const std::set<std::string>& KnownDtypeNames() {
  static const std::set<std::string> kNames = {
      "float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int8",
      "uint8",   "int16",   "int32",   "int64",    "bool"};
  return kNames;
}

std::string StripOverload(const std::string& op) {
  auto sep = op.find("::");
  auto dot = op.find('.', sep == std::string::npos ? 0 : sep + 2);
  return dot == std::string::npos ? op : op.substr(0, dot);
}

bool OpListMatches(const std::set<std::string>& list, const std::string& op) {
  if (list.count(op)) return true;
  auto base = StripOverload(op);
  return base != op && list.count(base);
}

StatusOr<ProfileInfo> ParseProfile(const std::string& json_text) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return InvalidArgumentError("profile: not valid JSON");
  if (!root.is_object()) return InvalidArgumentError("profile: expected a JSON object");

  static const std::set<std::string> kTopLevel = {
      "name",       "sdk_version", "memory_bytes", "dtypes",      "numerics",
      "native_ops", "compiler",    "defects",      "description", "performance"};
  for (const auto& [key, val] : root.items()) {
    if (!kTopLevel.count(key)) return FieldError(key, "unknown field");
  }

  ProfileInfo p;
  TS_ASSIGN_OR_RETURN(p.name, internal::GetString(root, "name", ""));
  if (p.name.empty()) return FieldError("name", "must not be empty");
  TS_ASSIGN_OR_RETURN(p.sdk_version, internal::GetString(root, "sdk_version", ""));
  TS_ASSIGN_OR_RETURN(p.memory_bytes, internal::GetInt(root, "memory_bytes", "", 0, true));
  if (p.memory_bytes <= 0) return FieldError("memory_bytes", "must be > 0");

  if (auto it = root.find("dtypes"); it != root.end()) {
    TS_RETURN_IF_ERROR(internal::ExpectType(*it, "dtypes", it->is_object(), "object"));
    for (const auto& [key, val] : it->items()) {
      if (key != "unsupported") return FieldError("dtypes." + key, "unknown field");
    }
    if (auto u = it->find("unsupported"); u != it->end()) {
      TS_RETURN_IF_ERROR(
          internal::ExpectType(*u, "dtypes.unsupported", u->is_array(), "array"));
      for (size_t i = 0; i < u->size(); ++i) {
        const std::string path = "dtypes.unsupported[" + std::to_string(i) + "]";
        const json& e = (*u)[i];
        TS_RETURN_IF_ERROR(internal::ExpectType(e, path, e.is_string(), "string"));
        std::string d = e.get<std::string>();
        if (!KnownDtypeNames().count(d)) return FieldError(path, "unknown dtype '" + d + "'");
        if (d == "float32") return FieldError(path, "float32 cannot be unsupported");
        p.unsupported_dtypes.insert(d);
      }
    }
  }
  TS_RETURN_IF_ERROR(ParseNumerics(root, &p.numerics));
  TS_ASSIGN_OR_RETURN(p.native_ops, GetOpList(root, "native_ops", "", true));
  TS_RETURN_IF_ERROR(ParseCompiler(root, &p.compiler));
  if (auto it = root.find("performance"); it != root.end()) {
    TS_RETURN_IF_ERROR(internal::ParsePerformance(*it, &p.performance));
  }

  if (auto it = root.find("defects"); it != root.end()) {
    TS_ASSIGN_OR_RETURN(auto defects, internal::ParseDefects(*it));
    p.num_defects = static_cast<int>(defects.size());
  }
  return p;
}

StatusOr<ProfileInfo> ParseProfileFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("profile: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto parsed = ParseProfile(ss.str());
  if (!parsed.ok()) {
    return Status(parsed.status().code(), path + ": " + parsed.status().message());
  }
  return parsed;
}

}  // namespace ts::simdevice
