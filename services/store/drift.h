// Numeric drift in detection (issue 11): the head sweep's passing models whose rmse ratio or
// compile time stepped up against their own history in the line's window of sweeps. The test
// is services/query/drift_stats.h; detection.cc raises one warning alert per (mode, metric).
//
// Private to services/store.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

namespace ts::store {

struct DriftRow {
  std::string model_id, mode, metric, arch, task;
  double before = 0, after = 0;
  int64_t first_sweep = 0;  // the first sweep of the step
  std::string detail;       // "rmse_ratio 0.62 -> 1.41 (x2.3) from sweep 12"
};

// `window`: the line's done sweeps, oldest first, the head last (at most 8 are read).
// `quarantined`: (model_id, mode) pairs left out. Reads only; the candidates are narrowed in
// SQL (tonight at least twice the smallest value and the floor above it) before the test.
std::vector<DriftRow> FindDrift(pqxx::transaction_base& w, const std::vector<int64_t>& window,
                                const std::vector<std::string>& modes,
                                const std::set<std::pair<std::string, std::string>>& quarantined);

}  // namespace ts::store
