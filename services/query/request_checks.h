// Validation of Query requests that needs no database, and page tokens. Every error is
// INVALID_ARGUMENT and its message starts with the field's path (query.proto), e.g.
// `rules.min_by_task["text-generation"].eager: must be in [0, 100]`.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "touchstone/v1/query.pb.h"

namespace ts::query {

namespace pb = ::touchstone::v1;

// The checks of each request (the summary filter's names are checked against the sweep by
// SummaryBuilder::CheckFilterMatched).
absl::Status Check(const pb::ListSweepsRequest& r);
absl::Status Check(const pb::GetSummaryRequest& r);
absl::Status Check(const pb::GetModelRequest& r);
absl::Status Check(const pb::OpDemandRequest& r);
absl::Status Check(const pb::GraphBreaksRequest& r);
absl::Status Check(const pb::SuspectOpsRequest& r);
absl::Status Check(const pb::CompareSweepsRequest& r);
absl::Status Check(const pb::GateRequest& r);
absl::Status Check(const pb::WatchSweepRequest& r);
// Alerts: a known state or none; an alert id, a note of 1..2000 characters, `by` up to 200; a
// sweep id and a baseline id >= 0 (0: the sweep's own).
absl::Status Check(const pb::ListAlertsRequest& r);
absl::Status Check(const pb::WatchAlertsRequest& r);  // a known state or none; interval as above
absl::Status Check(const pb::ListQuarantineRequest& r);
absl::Status Check(const pb::AckAlertRequest& r);
absl::Status Check(const pb::DetectRegressionsRequest& r);

// The parts, for callers that check a piece (the CLI's gate rules file).
absl::Status CheckGroupBy(pb::GroupBy g, const std::string& field);
absl::Status CheckFilter(const pb::ResultFilter& f, const std::string& field);
absl::Status CheckGateRules(const pb::GateRules& rules, const std::string& field);

// The page size to use: 0 -> `def`, above `max` -> `max`; negative is INVALID_ARGUMENT
// "page_size: ...".
absl::StatusOr<int> PageSize(int32_t requested, int def, int max);

// Opaque page tokens: a position (an offset, or the last key served) bound to the method that
// issued it. Decode gives 0 for the empty token (the first page); a token that does not decode,
// or that another method issued, is INVALID_ARGUMENT "page_token: ...".
std::string EncodePageToken(std::string_view method, int64_t position);
absl::StatusOr<int64_t> DecodePageToken(std::string_view method, const std::string& token);

// WatchSweep's and WatchAlerts' interval: 0 -> 1000 ms.
int WatchIntervalMs(int32_t requested);

}  // namespace ts::query
