// Text forms of the Query API's answers for `touchstone sweeps|summary|model|ops|breaks|compare|
// gate --format text`: aligned tables that fit 100 columns (long names are cut with "~").
// `touchstone sweep` prints its table with SummaryText too, so the table a sweep prints and the
// one `touchstone summary` prints are the same text for the same answer.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "touchstone/v1/query.pb.h"

namespace ts::cli {

std::string SweepsText(const touchstone::v1::ListSweepsResponse& r);
std::string SummaryText(const touchstone::v1::Summary& s);
std::string ModelText(const touchstone::v1::ModelHistory& h);
std::string OpDemandText(const touchstone::v1::OpDemandResponse& r);
std::string GraphBreaksText(const touchstone::v1::GraphBreaksResponse& r);
std::string CompareText(const touchstone::v1::CompareSweepsResponse& r);
std::string GateText(const touchstone::v1::GateResponse& r);

// `s` cut to `width` characters, the last one "~" when cut.
std::string Fit(const std::string& s, size_t width);

}  // namespace ts::cli
