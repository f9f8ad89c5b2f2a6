// PostgreSQL text forms of values, for COPY rows and array parameters (store_internal.h).
#include <cmath>
#include <cstdio>

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

}  // namespace ts::store
