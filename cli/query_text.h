// Text forms of the Query answers that only the CLI prints (`touchstone sweeps`, `touchstone
// model`): aligned tables that fit 100 columns (long names are cut with "~"). The tables that
// other readers print too (summary, ops, breaks, compare, gate) are services/query/text_tables.h.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "touchstone/v1/query.pb.h"

namespace ts::cli {

std::string SweepsText(const touchstone::v1::ListSweepsResponse& r);
std::string ModelText(const touchstone::v1::ModelHistory& h);
// Alerts: one line each (id, state, severity, mode, cause, models, classes, first and last
// sweep, clean sweeps), then up to 5 of its models, its classes and its ack note.
std::string AlertsText(const touchstone::v1::ListAlertsResponse& r);
// A detection's counts, the group tests that fired, and the alerts it opened, reopened,
// updated and resolved.
std::string DetectText(const touchstone::v1::DetectRegressionsResponse& r);
// Quarantined models and modes: model, mode, class, the sweep that put it there, passes so far.
std::string QuarantineText(const touchstone::v1::ListQuarantineResponse& r);
// One WatchAlerts message: "-- snapshot: N alerts" or "-- changed: N alerts", then AlertsText.
std::string AlertsUpdateText(const touchstone::v1::AlertsUpdate& u);

// The table as `touchstone sweep --json` and `run-catalog --format json` have always written it:
// {"tasks": [{"task", "models", "eager_pct", "opcov_pct", "compile_pct", "train_pct"}...],
//  "total": {...}, "class_weighted": {..., "classes"}, "statuses": {"pass": N, ...}}
// (rows are whatever the summary is grouped by; statuses summed over modes, skipped left out).
nlohmann::json SummaryJson(const touchstone::v1::Summary& s);

// A protobuf answer as `--format json` prints it: JSON with every field, indented (or one line).
std::string MessageJson(const google::protobuf::Message& m, bool multiline = true);

// `s` cut to `width` characters, the last one "~" when cut.
std::string Fit(const std::string& s, size_t width);

}  // namespace ts::cli
