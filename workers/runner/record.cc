#include "workers/runner/record.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "proto/names.h"

namespace ts::runner {
namespace {

namespace pb = ::touchstone::v1;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Finite(double v) { return std::isfinite(v) ? v : kNaN; }

void AddAll(const std::vector<double>& from, google::protobuf::RepeatedField<double>* to) {
  for (double v : from) to->Add(Finite(v));
}

void SetAccuracy(const engine::ModeResult& m, pb::ModeVerdict* v) {
  if (!m.accuracy) {
    for (auto setter : {&pb::ModeVerdict::set_rmse_device, &pb::ModeVerdict::set_rmse_reference,
                        &pb::ModeVerdict::set_rmse_ratio, &pb::ModeVerdict::set_max_abs_err,
                        &pb::ModeVerdict::set_cosine, &pb::ModeVerdict::set_rmse_vs_declared,
                        &pb::ModeVerdict::set_max_rel_err}) {
      (v->*setter)(kNaN);
    }
    return;
  }
  const engine::Accuracy& a = *m.accuracy;
  v->set_has_accuracy(true);
  v->set_rmse_device(Finite(a.rmse_device));
  v->set_rmse_reference(Finite(a.rmse_reference));
  v->set_rmse_ratio(Finite(a.rmse_ratio));
  v->set_rmse_vs_declared(Finite(a.rmse_vs_declared));
  v->set_max_abs_err(Finite(a.max_abs_err));
  v->set_max_rel_err(Finite(a.max_rel_err));
  v->set_cosine(Finite(a.cosine));
  v->set_allclose(a.allclose);
}

void SetPerf(const engine::ModePerf& p, pb::Perf* out) {
  out->set_device_us(Finite(p.device_us));
  out->set_flops(Finite(p.flops));
  out->set_bytes(Finite(p.bytes));
  out->set_mfu(Finite(p.mfu));
  out->set_launches(p.launches);
  out->set_fallback_us(Finite(p.fallback_us));
  out->set_transfer_bytes(Finite(p.transfer_bytes));
  out->set_peak_device_bytes(p.peak_device_bytes);
  for (const engine::OpTimeShare& t : p.top_ops) {
    pb::OpTime* o = out->add_top_ops();
    o->set_op(t.op);
    o->set_us(Finite(t.us));
    o->set_share(Finite(t.share));
  }
  out->set_speedup(p.speedup ? Finite(*p.speedup) : kNaN);
  out->set_compression(p.compression ? Finite(*p.compression) : kNaN);
}

pb::ModeVerdict ToVerdict(pb::Mode mode, const engine::ModeResult& m) {
  pb::ModeVerdict v;
  v.set_mode(mode);
  v.set_status(ToProto(m.status));
  v.set_error(m.error);
  v.set_ms(Finite(m.ms));
  SetAccuracy(m, &v);
  const bool compile = mode == pb::MODE_COMPILE;
  if (compile) {
    v.set_graph_breaks(m.graph_breaks);
    for (const auto& b : m.break_reasons) v.add_break_reasons(b);
    v.set_device_segments(m.device_segments);
    v.set_graph_nodes(m.graph_nodes);
  }
  v.set_compile_ms(compile ? Finite(m.compile_ms) : kNaN);
  v.set_compile_wall_ms(compile ? Finite(m.compile_wall_ms) : kNaN);
  v.set_first_run_ms(compile ? Finite(m.first_run_ms) : kNaN);
  const bool train = mode == pb::MODE_TRAIN;
  if (train) {
    AddAll(m.loss_reference, v.mutable_loss_reference());
    AddAll(m.loss_device, v.mutable_loss_device());
    AddAll(m.loss_declared, v.mutable_loss_declared());
    AddAll(m.loss_band, v.mutable_loss_band());
  }
  v.set_max_loss_gap_ratio(train ? Finite(m.max_loss_gap_ratio) : kNaN);
  v.set_grad_rmse_ratio(train && m.grad_rmse_ratio ? Finite(*m.grad_rmse_ratio) : kNaN);
  v.set_grad_worst_param(m.grad_worst_param);
  v.set_audited(m.audited);
  for (const engine::Suspect& s : m.suspects) {
    pb::Suspect* o = v.add_suspects();
    o->set_op(s.op);
    o->set_shapes(s.shapes);
    o->set_dtype(s.dtype);
    o->set_ratio(std::isfinite(s.ratio) ? s.ratio : engine::kNonFiniteRatio);
    o->set_calls(s.calls);
    o->set_total_calls(s.total_calls);
  }
  for (const engine::UncheckedOp& u : m.unchecked) {
    pb::UncheckedOp* o = v.add_unchecked();
    o->set_op(u.op);
    o->set_calls(u.calls);
    o->set_error(u.error);
  }
  if (m.perf) SetPerf(*m.perf, v.mutable_perf());
  return v;
}

void AddOps(const std::map<std::string, engine::OpUse>& ops, bool native, pb::ModelResult* r) {
  for (const auto& [op, use] : ops) {
    pb::OpUse* o = r->add_ops();
    o->set_op(op);
    o->set_calls(use.calls);
    o->set_ms(Finite(use.ms));
    o->set_native(native);
  }
}

}  // namespace

pb::Verdict ToProto(engine::Verdict v) { return static_cast<pb::Verdict>(static_cast<int>(v) + 1); }

pb::ModelResult ToRecord(const engine::ModelResult& r) {
  pb::ModelResult out;
  out.set_arch(r.arch);
  out.set_task(r.task);
  out.set_family(r.family);
  out.set_config_hash(r.config_hash);
  for (pb::Mode mode : proto::AllModes()) {
    auto it = r.modes.find(proto::ModeName(mode));
    if (it != r.modes.end()) *out.add_modes() = ToVerdict(mode, it->second);
  }
  out.set_distinct_ops(r.op_coverage.distinct_ops);
  out.set_native_ops(r.op_coverage.native_ops);
  const double ratio = r.op_coverage.ratio;
  out.set_opcov_ratio(std::isfinite(ratio) ? std::clamp(ratio, 0.0, 1.0) : 0.0);
  out.set_call_ratio(Finite(r.op_coverage.call_ratio));
  AddOps(r.native_ops, /*native=*/true, &out);
  AddOps(r.fallback_ops, /*native=*/false, &out);
  for (const auto& [k, v] : r.timings_ms) (*out.mutable_timings_ms())[k] = Finite(v);
  auto total = r.timings_ms.find("total");
  out.set_total_ms(total != r.timings_ms.end() && std::isfinite(total->second) ? total->second : 0);
  out.set_peak_device_bytes(r.peak_device_bytes);
  if (r.tiny_config.is_object()) out.set_tiny_config_json(r.tiny_config.dump());
  if (!r.references.source.empty()) {
    pb::ReferenceUse* refs = out.mutable_references();
    refs->set_source(r.references.source);
    refs->set_key_digest(r.references.key_digest);
    refs->set_content_digest(r.references.content_digest);
    refs->set_warning(r.references.warning);
  }
  return out;
}

}  // namespace ts::runner
