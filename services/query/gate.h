// The release gate as pure rules over measured inputs: GateRules -> GateResponse with every
// check made (rule, group, measured, limit, ok, detail), failed ones also in `failures`.
//
// Checks, in order: sweep.state (the sweep must be done), min.<mode> over the Total row,
// min_by_task.<mode> / min_by_class.<mode> per named group (a group the sweep lacks fails),
// max_new_failures (deterministic flips vs the baseline; flaky and pending flips, and flips of
// quarantined models and modes, are listed, not counted), forbid (per status: the models' verdicts
// with it, over every mode, counted from the tallies), must_pass (per model: every requested mode
// passes), min_geomean_speedup (the Total row's geomean compile speedup),
// min_geomean_speedup_by_task (per named task; a task without one fails), max_perf_regressions
// (models and modes whose device time grew beyond the threshold vs the baseline). Rules are
// validated first (CheckGateRules).
//
// Thread-safety: pure function.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "services/query/summary_builder.h"

namespace ts::query {

// How many models a failed check names.
inline constexpr size_t kGateExamples = 5;

struct GateInputs {
  int64_t sweep_id = 0;
  std::string sweep_state;             // running | done | cancelled
  std::vector<std::string> modes;      // the sweep's requested modes
  const std::vector<GroupTally>* groups = nullptr;  // the sweep's group tallies
  // The sweep's primary records of rules.must_pass (a model it did not record is absent).
  std::vector<pb::ResultRow> must_pass;
  // Per forbidden status the sweep has verdicts with (the tallies count them): the first
  // verdicts, "model_id (mode)" by model_id then mode, kGateExamples of them when there are.
  std::map<std::string, std::vector<std::string>> forbid_examples;
  // Flips vs rules.baseline_sweep_id (Compare's KIND_REGRESSED changes, confirmation set).
  std::vector<pb::ModelChange> regressed;
  // Performance regressions vs rules.baseline_sweep_id (read when max_perf_regressions is set).
  std::vector<pb::PerfRegression> perf_regressions;
};

pb::GateResponse EvaluateGate(const pb::GateRules& rules, const GateInputs& in);

}  // namespace ts::query
