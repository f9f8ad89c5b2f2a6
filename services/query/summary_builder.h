// The conformance table's arithmetic, one code path for every reader: the Query service's
// GetSummary, CompareSweeps and Gate, and the CLI's `touchstone sweep` / `run-catalog` tables.
//
// Definitions (query.proto, Summary):
//   Eager % / Compile % / Train %  the share of a row's measured models whose primary verdict
//                                  in that mode is pass (a mode the sweep did not request: 0);
//   measured                       the row's models less those recorded `lost` (the worker
//                                  running them was lost: no verdict of the model's own);
//   Mean OpCov %                   the mean of the measured models' opcov_ratio, x100;
//   Total                          the same over every model (model-weighted);
//   Class-weighted                 the mean of the per-class (transformers arch) rates: every
//                                  class with a measured model counts once whatever its
//                                  number of models;
//   status counts                  per requested mode, non-zero, in Verdict order; `skipped`
//                                  is not counted;
//   perf (SummaryRow.perf_models, geomean_speedup, median_mfu, mean_compression)
//                                  over the models whose compile passed with a speedup: the
//                                  geometric mean of the speedups, the median compiled MFU, the
//                                  mean compression (absent: no such model); Class-weighted: the
//                                  geomean of the classes' geomeans, the median of their
//                                  medians, the mean of their means.
//
// Fed one primary record at a time (Add) or one pre-aggregated (task, family, arch) group at a
// time (AddGroup + AddStatus): both sum the same counters, so a summary read from materialized
// groups equals one built from the records.
//
// Thread-safety: a value; not synchronised.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "touchstone/v1/query.pb.h"

namespace ts::query {

namespace pb = ::touchstone::v1;

// The catalog identity a model is grouped by.
struct GroupKey {
  std::string task;
  std::string family;
  std::string arch;
};

// Per-model figures are summed on a grid of 2^-30 (OnSumGrid): each term is rounded to it, here
// and in the store's SQL alike (round(x * 2^30) / 2^30), so a sum of any terms in any order, less
// any of them, is exact in a double (below 2^23 in value). No summary figure then depends on the
// order results arrived in, and removing a model's terms leaves exactly the others' sum.
inline constexpr double kSumGridUnits = 1073741824.0;  // 2^30
inline double OnSumGrid(double x) { return std::nearbyint(x * kSumGridUnits) / kSumGridUnits; }

// The perf of a set of models whose compile passed with a speedup: how many, the sum of the
// logs of their speedups, their compressions (how many, the sum) and their compiled MFUs.
struct PerfTally {
  int64_t models = 0;
  double log_speedup_sum = 0;
  int64_t compression_n = 0;
  double compression_sum = 0;
  std::vector<double> mfus;
};

// A record's PerfTally (one model or none): its compile perf, when it has a speedup.
PerfTally PerfOfRow(const pb::ResultRow& row);

// A sweep's models of one (task, family, arch): how many, their opcov_ratio sum, how many had
// each verdict per mode, and their perf (the store's kept or live group counters).
struct GroupTally {
  std::string task, family, arch;
  int64_t models = 0;
  double opcov_sum = 0;
  struct Status {
    std::string mode, status;
    int64_t models = 0;
  };
  std::vector<Status> statuses;
  PerfTally perf;
};

// How many verdicts `status` the tallies count, over every mode.
int64_t VerdictCount(const std::vector<GroupTally>& groups, const std::string& status);

// Whether the model passes `filter` (OR within a list, AND across lists; empty lists match).
bool FilterMatches(const pb::ResultFilter& filter, const GroupKey& key);

class SummaryBuilder {
 public:
  // `modes`: the sweep's requested modes by name ("eager", ...), as stored.
  SummaryBuilder(pb::GroupBy group_by, std::vector<std::string> modes,
                 pb::ResultFilter filter = {});

  // One primary record (ResultRow: its catalog identity, statuses by mode name, opcov_ratio).
  void Add(const pb::ResultRow& row);
  // A pre-aggregated group: `models` models with opcov_ratio summing to `opcov_sum`; then
  // AddStatus once per (mode, status) with the number of its models that had it.
  void AddGroup(const GroupKey& key, int64_t models, double opcov_sum);
  void AddStatus(const GroupKey& key, const std::string& mode, const std::string& status,
                 int64_t models);
  // A group's perf (PerfTally); `sign` -1 takes it out again.
  void AddPerf(const GroupKey& key, const PerfTally& perf, int sign = 1);
  // AddGroup + AddStatus of one tally.
  void AddTally(const GroupTally& g);
  // Takes one primary record out again (a model of a sweep's tallies that a comparison leaves
  // out). A row or class left with no model is not built.
  void Remove(const pb::ResultRow& row);

  // INVALID_ARGUMENT "filter.tasks[i]: ..." for a filter value that matched no model added: a
  // typo would otherwise select nothing silently.
  absl::Status CheckFilterMatched(int64_t sweep_id) const;

  pb::Summary Build() const;

 private:
  static constexpr int kModes = 3;                    // eager, compile, train
  static constexpr int kVerdicts = pb::Verdict_ARRAYSIZE;
  struct Acc {
    int64_t models = 0;
    double opcov_sum = 0;
    std::array<std::array<int64_t, kVerdicts>, kModes> counts{};  // [mode - 1][verdict]
    PerfTally perf;
  };
  // The accumulators a model of `key` adds to (its row, its class, the total); null when the
  // filter leaves it out.
  std::array<Acc*, 3> Targets(const GroupKey& key);
  pb::SummaryRow Row(const std::string& group, const Acc& a) const;
  // Class-weighted perf: each class with a perf model counts once.
  void SetClassWeightedPerf(pb::SummaryRow* cw) const;
  // a.models less the models recorded `lost`.
  int64_t Measured(const Acc& a) const;

  pb::GroupBy group_by_;
  std::vector<std::string> modes_;
  pb::ResultFilter filter_;
  std::map<std::string, Acc> rows_;
  std::map<std::string, Acc> classes_;
  Acc total_;
  std::set<std::string> seen_tasks_, seen_families_, seen_archs_;
  // GROUP_BY_ARCH: each class's tasks and families (SummaryRow.tasks, .families).
  std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> arch_names_;
};

// The Summary rows' percentages for two summaries of the same grouping, paired by group:
// per-group deltas, then Total and Class-weighted (CompareSweeps).
std::vector<pb::GroupDelta> Deltas(const pb::Summary& base, const pb::Summary& head);

}  // namespace ts::query
