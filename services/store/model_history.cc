// Store::ModelHistory: one model's full record (results + model_runs, read back into the
// ModelResult the worker reported) in each of its last sweeps, newest first.
#include <algorithm>
#include <cmath>
#include <limits>

#include "proto/names.h"
#include "services/store/store_internal.h"

namespace ts::store {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Rows written before a column existed read back as "not measured".
double D(const pqxx::field& f) { return f.is_null() ? kNaN : f.as<double>(); }
int64_t I(const pqxx::field& f) { return f.is_null() ? 0 : f.as<int64_t>(); }
bool B(const pqxx::field& f) { return !f.is_null() && f.as<bool>(); }

void Doubles(const pqxx::field& f, google::protobuf::RepeatedField<double>* out) {
  for (const auto& s : ParseTextArray(f)) out->Add(std::stod(s));
}

constexpr const char* kRunQuery = R"(
  SELECT mr.sweep_id, mr.distinct_ops, mr.native_ops, mr.opcov_ratio, mr.call_ratio, mr.ops,
         mr.op_calls, mr.op_ms, mr.op_native, mr.total_ms, mr.peak_device_bytes, mr.family,
         coalesce(mr.tiny_config::text, ''), mr.arch, mr.task, mr.config_hash, mr.timing_names,
         mr.timing_ms,
         (SELECT j.job_id FROM jobs j
          WHERE j.sweep_id = mr.sweep_id AND j.model_id = mr.model_id AND j.run = 1)
  FROM model_runs mr
  WHERE mr.sweep_id = ANY($1::bigint[]) AND mr.model_id = $2 AND mr.run = 1
  ORDER BY mr.sweep_id DESC LIMIT $3)";

void RunFields(const pqxx::row& row, const std::string& model_id, pb::ModelResult* r) {
  r->set_job_id(I(row[18]));
  r->set_model_id(model_id);
  r->set_run(1);
  r->set_distinct_ops(static_cast<int32_t>(row[1].as<int64_t>()));
  r->set_native_ops(static_cast<int32_t>(row[2].as<int64_t>()));
  r->set_opcov_ratio(row[3].as<double>());
  r->set_call_ratio(row[4].as<double>());
  const auto ops = ParseTextArray(row[5]);
  const auto calls = ParseTextArray(row[6]);
  const auto ms = ParseTextArray(row[7]);
  const auto native = ParseTextArray(row[8]);
  for (size_t k = 0; k < ops.size(); ++k) {
    pb::OpUse* op = r->add_ops();
    op->set_op(ops[k]);
    if (k < calls.size()) op->set_calls(std::stoll(calls[k]));
    if (k < ms.size()) op->set_ms(std::stod(ms[k]));
    op->set_native(k < native.size() && native[k] == "t");
  }
  r->set_total_ms(row[9].as<double>());
  r->set_peak_device_bytes(row[10].as<int64_t>());
  r->set_family(row[11].c_str());
  r->set_tiny_config_json(row[12].c_str());
  r->set_arch(row[13].c_str());
  r->set_task(row[14].c_str());
  r->set_config_hash(row[15].c_str());
  const auto names = ParseTextArray(row[16]);
  const auto times = ParseTextArray(row[17]);
  for (size_t k = 0; k < names.size() && k < times.size(); ++k) {
    (*r->mutable_timings_ms())[names[k]] = std::stod(times[k]);
  }
}

constexpr const char* kVerdictQuery = R"(
  SELECT sweep_id, mode, status, error, error_signature, ms, has_accuracy, rmse_device,
         rmse_reference, rmse_ratio, max_abs_err, cosine, rmse_vs_declared, max_rel_err,
         allclose, graph_breaks, break_reasons, device_segments, graph_nodes, compile_ms,
         compile_wall_ms, first_run_ms, loss_reference, loss_device, loss_declared, loss_band,
         max_loss_gap_ratio, grad_rmse_ratio, grad_worst_param, audited, suspects, unchecked,
         perf_device_us, perf_flops, perf_bytes, perf_mfu, perf_launches, perf_fallback_us,
         perf_transfer_bytes, perf_peak_bytes, perf_top_ops, perf_speedup, perf_compression
  FROM results
  WHERE sweep_id = ANY($1::bigint[]) AND model_id = $2 AND run = 1)";

absl::StatusOr<pb::ModeVerdict> VerdictOf(const pqxx::row& row) {
  pb::ModeVerdict v;
  v.set_mode(proto::ModeFromName(row[1].c_str()).value_or(pb::MODE_UNSPECIFIED));
  v.set_status(proto::VerdictFromName(row[2].c_str()).value_or(pb::VERDICT_UNSPECIFIED));
  v.set_error(row[3].c_str());
  v.set_error_signature(row[4].c_str());
  v.set_ms(D(row[5]));
  v.set_has_accuracy(B(row[6]));
  v.set_rmse_device(D(row[7]));
  v.set_rmse_reference(D(row[8]));
  v.set_rmse_ratio(D(row[9]));
  v.set_max_abs_err(D(row[10]));
  v.set_cosine(D(row[11]));
  v.set_rmse_vs_declared(D(row[12]));
  v.set_max_rel_err(D(row[13]));
  v.set_allclose(B(row[14]));
  v.set_graph_breaks(static_cast<int32_t>(I(row[15])));
  for (auto& s : ParseTextArray(row[16])) v.add_break_reasons(std::move(s));
  v.set_device_segments(static_cast<int32_t>(I(row[17])));
  v.set_graph_nodes(I(row[18]));
  v.set_compile_ms(D(row[19]));
  v.set_compile_wall_ms(D(row[20]));
  v.set_first_run_ms(D(row[21]));
  Doubles(row[22], v.mutable_loss_reference());
  Doubles(row[23], v.mutable_loss_device());
  Doubles(row[24], v.mutable_loss_declared());
  Doubles(row[25], v.mutable_loss_band());
  v.set_max_loss_gap_ratio(D(row[26]));
  v.set_grad_rmse_ratio(D(row[27]));
  v.set_grad_worst_param(row[28].is_null() ? "" : row[28].c_str());
  v.set_audited(B(row[29]));
  if (auto st = ParseSuspects(row[30], v.mutable_suspects()); !st.ok()) return st;
  if (auto st = ParseUnchecked(row[31], v.mutable_unchecked()); !st.ok()) return st;
  if (auto st = ParsePerf(row, 32, &v); !st.ok()) return st;
  return v;
}

}  // namespace

absl::StatusOr<pb::ModelHistory> Store::ModelHistory(const std::string& model_id, int last) {
  std::vector<int64_t> ids, order;
  pb::ModelHistory out;
  out.set_model_id(model_id);
  absl::Status st = impl_->Run("ModelHistory", [&]() -> absl::Status {
    pqxx::read_transaction t(*impl_->conn);
    // The model's last `last` runs, probed by primary key in each sweep that has results (the
    // list lets the planner prune partitions); their sweeps are the history.
    std::vector<int64_t> live;
    for (const auto& row : t.exec("SELECT sweep_id FROM sweeps WHERE state <> 'pruned'")) {
      live.push_back(row[0].as<int64_t>());
    }
    std::map<int64_t, pb::ModelSweepRecord> by_sweep;
    for (const auto& row : t.exec_params(kRunQuery, IdArray(live), model_id, last)) {
      ids.push_back(row[0].as<int64_t>());
      RunFields(row, model_id, by_sweep[ids.back()].mutable_result());
    }
    pqxx::result cat =
        t.exec_params("SELECT task, arch, family FROM models WHERE model_id = $1", model_id);
    if (cat.empty() && ids.empty()) {
      return absl::NotFoundError("model_id: no model '" + model_id + "'");
    }
    if (!cat.empty()) {
      out.set_task(cat[0][0].c_str());
      out.set_arch(cat[0][1].c_str());
      out.set_family(cat[0][2].c_str());
    }
    std::vector<std::pair<int64_t, pb::ModeVerdict>> verdicts;
    for (const auto& row : t.exec_params(kVerdictQuery, IdArray(ids), model_id)) {
      auto v = VerdictOf(row);
      if (!v.ok()) return v.status();
      verdicts.emplace_back(row[0].as<int64_t>(), std::move(*v));
    }
    std::sort(verdicts.begin(), verdicts.end(), [](const auto& a, const auto& b) {
      return std::make_pair(a.first, static_cast<int>(a.second.mode())) <
             std::make_pair(b.first, static_cast<int>(b.second.mode()));
    });
    for (auto& [sweep, v] : verdicts) *by_sweep[sweep].mutable_result()->add_modes() = v;
    for (const auto& row : t.exec_params(
             "SELECT sweep_id, mode, confirmation FROM regressions "
             "WHERE sweep_id = ANY($1::bigint[]) AND model_id = $2",
             IdArray(ids), model_id)) {
      (*by_sweep[row[0].as<int64_t>()].mutable_confirmation())[row[1].c_str()] = row[2].c_str();
    }
    for (auto it = by_sweep.rbegin(); it != by_sweep.rend(); ++it) {
      order.push_back(it->first);
      *out.add_sweeps() = std::move(it->second);
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  // Each sweep's identity and counts, in one transaction (it may keep a done sweep's counts).
  absl::Status info = impl_->Run("ModelHistory", [&]() -> absl::Status {
    pqxx::work w(*impl_->conn);
    auto infos = SweepInfos(w, order);
    if (!infos.ok()) return infos.status();
    for (size_t i = 0; i < infos->size(); ++i) {
      *out.mutable_sweeps(static_cast<int>(i))->mutable_sweep() = std::move((*infos)[i]);
    }
    w.commit();
    return absl::OkStatus();
  });
  if (!info.ok()) return info;
  return out;
}

}  // namespace ts::store
