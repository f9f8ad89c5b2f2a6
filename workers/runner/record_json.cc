#include "workers/runner/record_json.h"

#include <cmath>
#include <map>

#include "proto/names.h"
#include "workers/runner/protocol.h"

namespace ts::runner {
namespace {

nlohmann::json Num(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

nlohmann::json Nums(const google::protobuf::RepeatedField<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(Num(x));
  return a;
}

// {op, shapes, dtype, ratio, calls, total_calls}; a ratio of 1e300 (a non-finite mismatch)
// stays the number it is.
nlohmann::json SuspectsJson(const google::protobuf::RepeatedPtrField<pb::Suspect>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const pb::Suspect& s : v) {
    a.push_back({{"op", s.op()}, {"shapes", s.shapes()}, {"dtype", s.dtype()},
                 {"ratio", Num(s.ratio())}, {"calls", s.calls()},
                 {"total_calls", s.total_calls()}});
  }
  return a;
}

}  // namespace

nlohmann::json PerfJson(const pb::Perf& p) {
  nlohmann::json top = nlohmann::json::array();
  for (const pb::OpTime& t : p.top_ops()) {
    top.push_back({{"op", t.op()}, {"us", Num(t.us())}, {"share", Num(t.share())}});
  }
  return {{"device_us", Num(p.device_us())},
          {"flops", Num(p.flops())},
          {"bytes", Num(p.bytes())},
          {"mfu", Num(p.mfu())},
          {"launches", p.launches()},
          {"fallback_us", Num(p.fallback_us())},
          {"transfer_bytes", Num(p.transfer_bytes())},
          {"peak_device_bytes", p.peak_device_bytes()},
          {"top_ops", top},
          {"speedup", Num(p.speedup())},
          {"compression", Num(p.compression())}};
}

namespace {

nlohmann::json ModeJson(const pb::ModeVerdict& m) {
  nlohmann::json j;
  j["status"] = proto::VerdictName(m.status());
  j["error"] = m.error().empty() ? nlohmann::json(nullptr) : nlohmann::json(m.error());
  j["ms"] = Num(m.ms());
  if (m.has_accuracy()) {
    j["rmse_ratio"] = Num(m.rmse_ratio());
    j["rmse_device"] = Num(m.rmse_device());
    j["rmse_reference"] = Num(m.rmse_reference());
    j["rmse_vs_declared"] = Num(m.rmse_vs_declared());
    j["max_abs_err"] = Num(m.max_abs_err());
    j["max_rel_err"] = Num(m.max_rel_err());
    j["cosine"] = Num(m.cosine());
    j["allclose"] = m.allclose();
  } else if (m.mode() != pb::MODE_TRAIN) {
    j["rmse_ratio"] = nullptr;
    j["max_abs_err"] = nullptr;
    j["cosine"] = nullptr;
  }
  if (m.mode() == pb::MODE_COMPILE) {
    j["graph_breaks"] = m.graph_breaks();
    j["break_reasons"] = std::vector<std::string>(m.break_reasons().begin(), m.break_reasons().end());
    j["device_segments"] = m.device_segments();
    j["graph_nodes"] = m.graph_nodes();
    j["compile_ms"] = Num(m.compile_ms());
    j["compile_wall_ms"] = Num(m.compile_wall_ms());
    j["first_run_ms"] = Num(m.first_run_ms());
  }
  if (m.mode() == pb::MODE_TRAIN) {
    j["loss_reference"] = Nums(m.loss_reference());
    j["loss_device"] = Nums(m.loss_device());
    j["loss_declared"] = Nums(m.loss_declared());
    j["loss_band"] = Nums(m.loss_band());
    j["max_loss_gap_ratio"] = Num(m.max_loss_gap_ratio());
    j["grad_rmse_ratio"] = Num(m.grad_rmse_ratio());
    j["grad_worst_param"] = m.grad_worst_param().empty() ? nlohmann::json(nullptr)
                                                         : nlohmann::json(m.grad_worst_param());
  }
  j["audited"] = m.audited();
  j["suspects"] = SuspectsJson(m.suspects());
  nlohmann::json unchecked = nlohmann::json::array();
  for (const pb::UncheckedOp& u : m.unchecked()) {
    unchecked.push_back({{"op", u.op()}, {"calls", u.calls()}, {"error", u.error()}});
  }
  j["unchecked"] = unchecked;
  j["perf"] = m.has_perf() ? PerfJson(m.perf()) : nlohmann::json(nullptr);
  return j;
}

}  // namespace

nlohmann::json RecordToJson(const pb::ModelResult& r) {
  nlohmann::json j;
  j["model"] = {{"arch", r.arch()}, {"task", r.task()}, {"family", r.family()},
                {"config_hash", r.config_hash()}};
  nlohmann::json modes = nlohmann::json::object();
  for (const auto& m : r.modes()) modes[proto::ModeName(m.mode())] = ModeJson(m);
  j["modes"] = modes;
  j["op_coverage"] = {{"distinct_ops", r.distinct_ops()},
                      {"native_ops", r.native_ops()},
                      {"ratio", Num(r.opcov_ratio())},
                      {"call_ratio", Num(r.call_ratio())}};
  nlohmann::json native = nlohmann::json::object(), fallback = nlohmann::json::object();
  for (const auto& o : r.ops()) {
    (o.native() ? native : fallback)[o.op()] = {{"calls", o.calls()}, {"ms", Num(o.ms())}};
  }
  j["fallback_ops"] = fallback;
  j["native_ops"] = native;
  nlohmann::json t = nlohmann::json::object();
  for (const auto& [k, v] : r.timings_ms()) t[k] = Num(v);
  j["timings_ms"] = t;
  j["peak_device_bytes"] = r.peak_device_bytes();
  if (!r.tiny_config_json().empty()) {
    auto tiny = nlohmann::json::parse(r.tiny_config_json(), nullptr, false);
    if (!tiny.is_discarded()) j["tiny_config"] = tiny;
  }
  if (!r.references().source().empty()) {
    j["references"] = {{"source", r.references().source()},
                       {"key_digest", r.references().key_digest()},
                       {"content_digest", r.references().content_digest()},
                       {"warning", r.references().warning()}};
  }
  return j;
}

void AddSkippedModes(pb::ModelResult* r) {
  std::map<pb::Mode, pb::ModeVerdict> by_mode;
  for (const auto& v : r->modes()) by_mode.emplace(v.mode(), v);
  r->clear_modes();
  for (pb::Mode m : proto::AllModes()) {
    auto it = by_mode.find(m);
    *r->add_modes() = it != by_mode.end() ? it->second : BlankVerdict(m);
  }
}

}  // namespace ts::runner
