#include "services/worker/result_convert.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ts::worker {
namespace {

double Num(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return j[key].get<double>();
}

void Nums(const nlohmann::json& j, const char* key, google::protobuf::RepeatedField<double>* out) {
  if (!j.contains(key) || !j[key].is_array()) return;
  for (const auto& v : j[key]) {
    out->Add(v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN());
  }
}

}  // namespace

::touchstone::v1::ModelResult ToModelResult(const ::touchstone::v1::Job& job,
                                            const std::set<std::string>& modes,
                                            const nlohmann::json& r) {
  ::touchstone::v1::ModelResult out;
  out.set_job_id(job.job_id());
  out.set_model_id(job.model_id());
  out.set_run(job.run());
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& all = r.contains("modes") && r["modes"].is_object() ? r["modes"] : empty;
  for (const auto& mode : modes) {
    auto* v = out.add_modes();
    v->set_mode(mode);
    const nlohmann::json& m = all.contains(mode) ? all[mode] : empty;
    v->set_status(m.value("status", std::string("skipped")));
    if (m.contains("error") && m["error"].is_string()) v->set_error(m["error"].get<std::string>());
    v->set_ms(Num(m, "ms"));
    v->set_rmse_device(Num(m, "rmse_device"));
    v->set_rmse_reference(Num(m, "rmse_reference"));
    v->set_rmse_ratio(Num(m, "rmse_ratio"));
    v->set_max_abs_err(Num(m, "max_abs_err"));
    v->set_cosine(Num(m, "cosine"));
    v->set_graph_breaks(m.value("graph_breaks", 0));
    if (m.contains("break_reasons") && m["break_reasons"].is_array()) {
      for (const auto& b : m["break_reasons"]) {
        if (b.is_string()) v->add_break_reasons(b.get<std::string>());
      }
    }
    v->set_device_segments(m.value("device_segments", 0));
    v->set_compile_ms(Num(m, "compile_ms"));
    v->set_first_run_ms(Num(m, "first_run_ms"));
    Nums(m, "loss_reference", v->mutable_loss_reference());
    Nums(m, "loss_device", v->mutable_loss_device());
    v->set_max_loss_gap_ratio(Num(m, "max_loss_gap_ratio"));
  }
  if (r.contains("op_coverage") && r["op_coverage"].is_object()) {
    const auto& c = r["op_coverage"];
    out.set_distinct_ops(c.value("distinct_ops", 0));
    out.set_native_ops(c.value("native_ops", 0));
    const double ratio = Num(c, "ratio");
    out.set_opcov_ratio(std::isfinite(ratio) ? std::clamp(ratio, 0.0, 1.0) : 0.0);
  }
  for (const char* kind : {"native_ops", "fallback_ops"}) {
    if (!r.contains(kind) || !r[kind].is_object()) continue;
    for (const auto& [op, use] : r[kind].items()) {
      auto* o = out.add_ops();
      o->set_op(op);
      o->set_calls(use.value("calls", int64_t{0}));
      o->set_ms(Num(use, "ms"));
      o->set_native(std::string(kind) == "native_ops");
    }
  }
  if (r.contains("timings_ms") && r["timings_ms"].is_object()) {
    const double total = Num(r["timings_ms"], "total");
    out.set_total_ms(std::isfinite(total) ? total : 0);
  }
  out.set_peak_device_bytes(r.value("peak_device_bytes", int64_t{0}));
  if (r.contains("model") && r["model"].is_object()) {
    out.set_family(r["model"].value("family", std::string()));
  }
  if (r.contains("tiny_config") && r["tiny_config"].is_object()) {
    out.set_tiny_config_json(r["tiny_config"].dump());
  }
  return out;
}

}  // namespace ts::worker
