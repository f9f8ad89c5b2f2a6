// Text renderings of Query answers for the CLI: aligned tables that fit 100 columns.
//
// FormatSummary prints the columns `touchstone sweep` has always printed (group, Models,
// Eager %, Mean OpCov %, Compile %, Train %), then Total, Class-weighted (with its number of
// classes) and the status counts summed over modes. Names longer than their column are cut
// with a trailing '~'.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "touchstone/v1/query.pb.h"

namespace ts::query {

namespace pb = ::touchstone::v1;

std::string FormatSummary(const pb::Summary& s);
// `touchstone summary SWEEP --perf`: per group, Models, the models whose compile passed with a
// speedup, Geomean speedup, Median MFU, Mean compression and Compile %; then Total and
// Class-weighted. "-" where no model has a speedup.
std::string FormatPerfSummary(const pb::Summary& s);
std::string FormatOpDemand(const pb::OpDemandResponse& r);
std::string FormatGraphBreaks(const pb::GraphBreaksResponse& r);
// Ops by the models they break; a ratio of 1e300 (a non-finite mismatch) prints "non-finite".
std::string FormatSuspectOps(const pb::SuspectOpsResponse& r);
std::string FormatCompare(const pb::CompareSweepsResponse& r);
std::string FormatGate(const pb::GateResponse& r);

}  // namespace ts::query
