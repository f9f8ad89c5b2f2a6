// CompareSweeps as pure rules over two sweeps' primary records (pb::ResultRow, as ListResults
// streams them): per model and mode the pass -> not-pass (regressed) and not-pass -> pass
// (fixed) flips, the models that appeared or disappeared, and per-group deltas over the models
// both sweeps recorded (SummaryBuilder, so the percentages are the summary's).
//
// A flip is counted for a mode that both records carry (both sweeps requested it).
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "services/query/summary_builder.h"

namespace ts::query {

// (model_id, mode name) -> "pending" | "deterministic" | "flaky": the head sweep's
// regressions when its baseline is the base sweep (empty otherwise).
using Confirmations = std::map<std::pair<std::string, std::string>, std::string>;

struct CompareInput {
  const std::vector<pb::ResultRow>* base = nullptr;  // any order
  const std::vector<pb::ResultRow>* head = nullptr;
  std::vector<std::string> base_modes;
  std::vector<std::string> head_modes;
  Confirmations confirmations;
  pb::GroupBy group_by = pb::GROUP_BY_TASK;
  pb::ResultFilter filter;
};

// The whole answer, every change included (ordered by model_id, kind, mode); the caller pages
// `changes` and keeps `groups` for the first page.
pb::CompareSweepsResponse Compare(const CompareInput& in);

}  // namespace ts::query
