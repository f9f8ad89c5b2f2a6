// Performance regressions in detection (issue 30): the head sweep's models whose device time
// grew beyond the threshold against the baseline, grouped by the op whose time grew most, and
// the classes and tasks whose geomean compile speedup fell (the line rule). They become alerts
// of kind `performance` (cause_kind perf_op / perf_line) on the same table, raised and aged
// here, apart from the accuracy alerts of detection.cc. The rules are
// services/query/perf_regression.h.
//
// Private to services/store.
#pragma once

#include <cstdint>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "touchstone/v1/query.pb.h"

namespace ts::store {

struct PerfDetection {
  int64_t head = 0, baseline = 0;
  std::string line;
  std::vector<std::string> modes;    // requested by both sweeps
  std::vector<int64_t> line_sweeps;  // the line's done sweeps up to the head, newest first
  bool writes = true;                // false: report only (a newer sweep was detected)
  double threshold = 0.02;           // StoreOptions::perf_threshold
};

// Finds the head's performance regressions into `report` (perf_regressions, speedup_lines) and,
// when `in.writes`, raises one alert per (mode, op) and per fallen class or task, and ages the
// line's other performance alerts (3 clean sweeps resolve one). Reads the kept group counters
// (sweep_groups) of the line's sweeps: the head's must be kept already.
void DetectPerformance(pqxx::transaction_base& w, const PerfDetection& in,
                       ::touchstone::v1::DetectRegressionsResponse* report);

}  // namespace ts::store
