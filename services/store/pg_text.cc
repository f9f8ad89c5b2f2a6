// PostgreSQL text forms of values, for COPY rows and array parameters (store_internal.h).
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "services/store/store_internal.h"

namespace ts::store {

namespace {

template <typename It, typename F>
std::string Array(It begin, It end, F f) {
  std::string out = "{";
  for (It it = begin; it != end; ++it) {
    if (it != begin) out += ',';
    out += f(*it);
  }
  return out + "}";
}

}  // namespace

std::string Num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string TextArray(const std::vector<std::string>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char c : v[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string DoubleArray(const google::protobuf::RepeatedField<double>& v) {
  return Array(v.begin(), v.end(), [](double d) { return Num(d); });
}

std::string IdArray(const std::vector<int64_t>& v) {
  return Array(v.begin(), v.end(), [](int64_t d) { return std::to_string(d); });
}

std::vector<std::string> ParseTextArray(const pqxx::field& f) {
  std::vector<std::string> out;
  if (f.is_null()) return out;
  pqxx::array_parser p = f.as_array();
  for (auto e = p.get_next(); e.first != pqxx::array_parser::done; e = p.get_next()) {
    if (e.first == pqxx::array_parser::string_value) out.push_back(e.second);
  }
  return out;
}

std::string SuspectsJson(const google::protobuf::RepeatedPtrField<pb::Suspect>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const pb::Suspect& s : v) {
    a.push_back({{"op", s.op()}, {"shapes", s.shapes()}, {"dtype", s.dtype()},
                 {"ratio", s.ratio()}, {"calls", s.calls()}, {"total_calls", s.total_calls()}});
  }
  return a.dump();
}

absl::Status ParseSuspects(const pqxx::field& f,
                           google::protobuf::RepeatedPtrField<pb::Suspect>* out) {
  if (f.is_null()) return absl::OkStatus();
  const auto a = nlohmann::json::parse(f.c_str(), nullptr, false);
  const auto bad = [] { return absl::DataLossError("results.suspects: not an array of suspects"); };
  if (a.is_discarded() || !a.is_array()) return bad();
  for (const auto& j : a) {
    if (!j.is_object() || !j.value("op", nlohmann::json()).is_string() ||
        !j.value("ratio", nlohmann::json()).is_number()) {
      return bad();
    }
    pb::Suspect* s = out->Add();
    s->set_op(j["op"].get<std::string>());
    s->set_shapes(j.value("shapes", ""));
    s->set_dtype(j.value("dtype", ""));
    s->set_ratio(j["ratio"].get<double>());
    s->set_calls(j.value("calls", int64_t{0}));
    s->set_total_calls(j.value("total_calls", int64_t{0}));
  }
  return absl::OkStatus();
}

std::string UncheckedJson(const google::protobuf::RepeatedPtrField<pb::UncheckedOp>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const pb::UncheckedOp& u : v) {
    a.push_back({{"op", u.op()}, {"calls", u.calls()}, {"error", u.error()}});
  }
  return a.dump();
}

absl::Status ParseUnchecked(const pqxx::field& f,
                            google::protobuf::RepeatedPtrField<pb::UncheckedOp>* out) {
  if (f.is_null()) return absl::OkStatus();
  const auto a = nlohmann::json::parse(f.c_str(), nullptr, false);
  const auto bad = [] {
    return absl::DataLossError("results.unchecked: not an array of unchecked ops");
  };
  if (a.is_discarded() || !a.is_array()) return bad();
  for (const auto& j : a) {
    if (!j.is_object() || !j.value("op", nlohmann::json()).is_string()) return bad();
    pb::UncheckedOp* u = out->Add();
    u->set_op(j["op"].get<std::string>());
    u->set_calls(j.value("calls", int64_t{0}));
    u->set_error(j.value("error", ""));
  }
  return absl::OkStatus();
}

}  // namespace ts::store
