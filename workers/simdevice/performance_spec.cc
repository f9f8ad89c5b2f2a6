#include "workers/simdevice/internal/performance_spec.h"

#include <algorithm>
#include <set>
#include <string>

#include "workers/simdevice/internal/json_field.h"

namespace ts::simdevice::internal {
namespace {

using nlohmann::json;

Status RejectUnknown(const json& obj, const std::string& path, const std::set<std::string>& known) {
  for (const auto& [key, val] : obj.items()) {
    if (!known.count(key)) return FieldError(path + key, "unknown field");
  }
  return OkStatus();
}

// A number > 0 (or >= 0 with `allow_zero`), kept at `*out` when absent.
Status Positive(const json& obj, const std::string& key, const std::string& path, double* out,
                bool allow_zero = false) {
  TS_ASSIGN_OR_RETURN(*out, GetNumber(obj, key, path, *out, false));
  if (allow_zero ? *out < 0 : *out <= 0) {
    return FieldError(path + key, allow_zero ? "must be >= 0" : "must be > 0");
  }
  return OkStatus();
}

Status Efficiency(const json& obj, const std::string& key, const std::string& path, double* out) {
  TS_ASSIGN_OR_RETURN(*out, GetNumber(obj, key, path, *out, false));
  if (!(*out > 0 && *out <= 1)) return FieldError(path + key, "must be in (0, 1]");
  return OkStatus();
}

// {"tflops": {"bfloat16": 667, ...}} of one engine; a given table replaces the default.
Status ParseEngine(const json& perf, const std::string& key, std::map<std::string, double>* out) {
  auto it = perf.find(key);
  if (it == perf.end()) return OkStatus();
  const std::string path = "performance." + key;
  TS_RETURN_IF_ERROR(ExpectType(*it, path, it->is_object(), "object"));
  TS_RETURN_IF_ERROR(RejectUnknown(*it, path + ".", {"tflops"}));
  auto t = it->find("tflops");
  if (t == it->end()) return FieldError(path + ".tflops", "missing");
  TS_RETURN_IF_ERROR(ExpectType(*t, path + ".tflops", t->is_object(), "object"));
  if (t->empty()) return FieldError(path + ".tflops", "must name at least one dtype");
  out->clear();
  for (const auto& [dtype, val] : t->items()) {
    const std::string p = path + ".tflops." + dtype;
    if (!KnownDtypeNames().count(dtype)) return FieldError(p, "unknown dtype '" + dtype + "'");
    TS_RETURN_IF_ERROR(ExpectType(val, p, val.is_number(), "number"));
    const double v = val.get<double>();
    if (!(v > 0)) return FieldError(p, "must be > 0");
    (*out)[dtype] = v;
  }
  return OkStatus();
}

// {"gbps": G, "latency_us": L} style sub-objects.
Status ParseObject(const json& perf, const std::string& key, const std::set<std::string>& known,
                   const json** obj) {
  *obj = nullptr;
  auto it = perf.find(key);
  if (it == perf.end()) return OkStatus();
  TS_RETURN_IF_ERROR(ExpectType(*it, "performance." + key, it->is_object(), "object"));
  TS_RETURN_IF_ERROR(RejectUnknown(*it, "performance." + key + ".", known));
  *obj = &*it;
  return OkStatus();
}

Status ParseKernels(const json& perf, std::map<std::string, KernelPerf>* out) {
  auto it = perf.find("kernels");
  if (it == perf.end()) return OkStatus();
  TS_RETURN_IF_ERROR(ExpectType(*it, "performance.kernels", it->is_object(), "object"));
  for (const auto& [op, val] : it->items()) {
    const std::string path = "performance.kernels." + op;
    const auto sep = op.find("::");
    if (sep == std::string::npos || sep == 0 || sep + 2 >= op.size()) {
      return FieldError(path, "'" + op + "' is not an operator name (expected e.g. aten::mm)");
    }
    TS_RETURN_IF_ERROR(ExpectType(val, path, val.is_object(), "object"));
    TS_RETURN_IF_ERROR(RejectUnknown(val, path + ".", {"efficiency", "launch_us"}));
    if (val.empty()) return FieldError(path, "must set efficiency or launch_us");
    KernelPerf k;
    if (val.contains("efficiency")) {
      k.efficiency = 1;
      TS_RETURN_IF_ERROR(Efficiency(val, "efficiency", path + ".", &k.efficiency));
    }
    if (val.contains("launch_us")) {
      k.launch_us = 0;
      TS_RETURN_IF_ERROR(Positive(val, "launch_us", path + ".", &k.launch_us, true));
    }
    (*out)[op] = k;
  }
  return OkStatus();
}

}  // namespace

double PeakFlops(const PerformanceSpec& spec) {
  double peak = 0;
  for (const auto* table : {&spec.matrix_tflops, &spec.vector_tflops}) {
    for (const auto& [dtype, tflops] : *table) peak = std::max(peak, tflops);
  }
  return peak * 1e12;
}

Status ParsePerformance(const json& perf, PerformanceSpec* out) {
  TS_RETURN_IF_ERROR(ExpectType(perf, "performance", perf.is_object(), "object"));
  const std::string p = "performance.";
  TS_RETURN_IF_ERROR(
      RejectUnknown(perf, p,
                    {"source", "matrix_engine", "vector_engine", "hbm", "efficiency", "launch_us",
                     "host_link", "host", "graph_break_us", "kernels"}));
  if (perf.contains("source")) {
    TS_ASSIGN_OR_RETURN(out->source, GetString(perf, "source", p));
  }
  TS_RETURN_IF_ERROR(ParseEngine(perf, "matrix_engine", &out->matrix_tflops));
  TS_RETURN_IF_ERROR(ParseEngine(perf, "vector_engine", &out->vector_tflops));
  const json* obj = nullptr;
  TS_RETURN_IF_ERROR(ParseObject(perf, "hbm", {"gbps"}, &obj));
  if (obj) TS_RETURN_IF_ERROR(Positive(*obj, "gbps", p + "hbm.", &out->hbm_gbps));
  TS_RETURN_IF_ERROR(ParseObject(perf, "host_link", {"gbps", "latency_us"}, &obj));
  if (obj) {
    TS_RETURN_IF_ERROR(Positive(*obj, "gbps", p + "host_link.", &out->host_link_gbps));
    TS_RETURN_IF_ERROR(
        Positive(*obj, "latency_us", p + "host_link.", &out->host_link_latency_us, true));
  }
  TS_RETURN_IF_ERROR(ParseObject(perf, "host", {"gflops", "gbps"}, &obj));
  if (obj) {
    TS_RETURN_IF_ERROR(Positive(*obj, "gflops", p + "host.", &out->host_gflops));
    TS_RETURN_IF_ERROR(Positive(*obj, "gbps", p + "host.", &out->host_gbps));
  }
  TS_RETURN_IF_ERROR(Efficiency(perf, "efficiency", p, &out->efficiency));
  TS_RETURN_IF_ERROR(Positive(perf, "launch_us", p, &out->launch_us, true));
  TS_RETURN_IF_ERROR(Positive(perf, "graph_break_us", p, &out->graph_break_us, true));
  TS_RETURN_IF_ERROR(ParseKernels(perf, &out->kernels));
  // MFU is relative to the device's highest peak; a host faster than that would let a model
  // whose ops all fall back exceed 1.
  if (out->host_gflops * 1e9 > PeakFlops(*out)) {
    return FieldError("performance.host.gflops", "must not exceed the device's highest peak");
  }
  return OkStatus();
}

}  // namespace ts::simdevice::internal
