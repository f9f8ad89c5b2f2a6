// CompareSweeps as pure rules over what the store reads of two sweeps: each sweep's group
// tallies (GroupTally) and the models where they differ (ModelPair: a model recorded by one sweep
// only, or whose pass/not-pass differs in a mode both recorded). It yields per model and mode
// the pass -> not-pass (regressed) and not-pass -> pass (fixed) flips, the models that appeared
// or disappeared, and per-group deltas over the models both sweeps recorded: each sweep's tallies
// less its models the other lacks (SummaryBuilder, so the percentages are the summary's).
//
// A flip is counted for a mode that both records carry (both sweeps requested it). Pairs that
// do not differ may be given too: they change nothing.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "services/query/summary_builder.h"

namespace ts::query {

// (model_id, mode name) -> "pending" | "deterministic" | "flaky": the head sweep's
// regressions when its baseline is the base sweep (empty otherwise).
using Confirmations = std::map<std::pair<std::string, std::string>, std::string>;

// One model's primary records in the base and head sweeps (at least one present).
struct ModelPair {
  std::optional<pb::ResultRow> base, head;
  const pb::ResultRow& Any() const { return head ? *head : *base; }
};

struct CompareInput {
  const std::vector<GroupTally>* base_groups = nullptr;
  const std::vector<GroupTally>* head_groups = nullptr;
  const std::vector<ModelPair>* differing = nullptr;  // any order
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
