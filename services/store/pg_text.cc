// PostgreSQL text forms of values, for COPY rows and array parameters (store_internal.h).
#include <cmath>
#include <cstdio>
#include <limits>
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

std::string TopOpsJson(const google::protobuf::RepeatedPtrField<pb::OpTime>& v) {
  const auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nullptr; };
  nlohmann::json a = nlohmann::json::array();
  for (const pb::OpTime& t : v) {
    a.push_back({{"op", t.op()}, {"us", num(t.us())}, {"share", num(t.share())}});
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

absl::Status ParsePerf(const pqxx::row& row, int first, pb::ModeVerdict* out) {
  if (row[first].is_null()) return absl::OkStatus();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const auto d = [&](int k) {
    return row[first + k].is_null() ? kNaN : row[first + k].as<double>();
  };
  const auto i = [&](int k) { return row[first + k].is_null() ? 0 : row[first + k].as<int64_t>(); };
  pb::Perf* p = out->mutable_perf();
  p->set_device_us(d(0));
  p->set_flops(d(1));
  p->set_bytes(d(2));
  p->set_mfu(d(3));
  p->set_launches(i(4));
  p->set_fallback_us(d(5));
  p->set_transfer_bytes(d(6));
  p->set_peak_device_bytes(i(7));
  p->set_speedup(d(9));
  p->set_compression(d(10));
  const pqxx::field f = row[first + 8];
  if (f.is_null()) return absl::OkStatus();
  return ParseTopOps(nlohmann::json::parse(f.c_str(), nullptr, false), p);
}

absl::Status PerfFromJson(const nlohmann::json& j, pb::Perf* p) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (!j.is_object()) return absl::DataLossError("results.perf_*: not an object");
  const auto d = [&](const char* k) {
    const nlohmann::json v = j.value(k, nlohmann::json());
    return v.is_number() ? v.get<double>() : kNaN;
  };
  const auto i = [&](const char* k) {
    const nlohmann::json v = j.value(k, nlohmann::json());
    return v.is_number() ? v.get<int64_t>() : int64_t{0};
  };
  p->set_device_us(d("device_us"));
  p->set_flops(d("flops"));
  p->set_bytes(d("bytes"));
  p->set_mfu(d("mfu"));
  p->set_launches(i("launches"));
  p->set_fallback_us(d("fallback_us"));
  p->set_transfer_bytes(d("transfer_bytes"));
  p->set_peak_device_bytes(i("peak_device_bytes"));
  p->set_speedup(d("speedup"));
  p->set_compression(d("compression"));
  const nlohmann::json top = j.value("top_ops", nlohmann::json());
  return top.is_null() ? absl::OkStatus() : ParseTopOps(top, p);
}

absl::Status ParseTopOps(const nlohmann::json& a, pb::Perf* p) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const auto bad = [] { return absl::DataLossError("results.perf_top_ops: not an array of ops"); };
  if (a.is_discarded() || !a.is_array()) return bad();
  for (const auto& j : a) {
    if (!j.is_object() || !j.value("op", nlohmann::json()).is_string()) return bad();
    pb::OpTime* t = p->add_top_ops();
    t->set_op(j["op"].get<std::string>());
    const nlohmann::json us = j.value("us", nlohmann::json()),
                         share = j.value("share", nlohmann::json());
    t->set_us(us.is_number() ? us.get<double>() : kNaN);
    t->set_share(share.is_number() ? share.get<double>() : kNaN);
  }
  return absl::OkStatus();
}

}  // namespace ts::store
