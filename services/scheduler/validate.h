// Checks for every scheduler request, before anything reaches the database: every string's
// limits (NUL bytes, lengths; services/common/field_limits.h), then the shape. Each error is
// INVALID_ARGUMENT whose message starts with the field's path ("results[2].modes[0].status:
// unknown status 'passs'"), as proto/touchstone/v1/scheduler.proto documents.
//
// Thread-safety: pure functions.
#pragma once

#include "absl/status/status.h"
#include "touchstone/v1/scheduler.pb.h"

namespace ts::scheduler {

namespace pb = ::touchstone::v1;

absl::Status Validate(const pb::RegisterWorkerRequest& r);
absl::Status Validate(const pb::LeaseShardRequest& r);
absl::Status Validate(const pb::HeartbeatRequest& r);
absl::Status Validate(const pb::ReportResultsRequest& r);
absl::Status Validate(const pb::FinishShardRequest& r);
absl::Status Validate(const pb::UpsertModelsRequest& r);
absl::Status Validate(const pb::CreateSweepRequest& r);
absl::Status Validate(const pb::GetSweepRequest& r);
absl::Status Validate(const pb::CancelSweepRequest& r);
absl::Status Validate(const pb::ListResultsRequest& r);
// Schedules: name [A-Za-z0-9._-]{1,64}, the cron spec parses, the sweep as CreateSweep's
// ("sweep.profile.name: required") with baseline_sweep_id 0, baseline "", previous or none.
absl::Status Validate(const pb::AddScheduleRequest& r);
absl::Status Validate(const pb::ListSchedulesRequest& r);
absl::Status Validate(const pb::RemoveScheduleRequest& r);
absl::Status Validate(const pb::SetScheduleEnabledRequest& r);
// Reference bundles: wants (model_id required) with zoo_version and torch_version, or a
// sweep_id, at most kMaxReferenceWants; digests are SHA-256 (64 lowercase hex digits).
absl::Status Validate(const pb::ListReferencesRequest& r);
absl::Status Validate(const pb::FetchReferencesRequest& r);
absl::Status Validate(const pb::ReferenceStatsRequest& r);
absl::Status Validate(const pb::PruneReferencesRequest& r);
// One chunk of an upload (its data is bytes, unchecked here: the whole bundle is checked by
// its digest and header once its last chunk is in).
absl::Status Validate(const pb::ReferenceChunk& r);
inline constexpr int kMaxReferenceWants = 2000;
// A chunk's data, and a whole bundle.
inline constexpr size_t kMaxReferenceChunkBytes = 1 << 20;
inline constexpr size_t kMaxReferenceBundleBytes = 256 << 20;

// Most models per UpsertModels call and results per ReportResults call.
inline constexpr int kMaxModelsPerUpsert = 5000;
inline constexpr int kMaxResultsPerReport = 1000;
// CreateSweep's shard_target_s, when not 0, and model_timeout_s (a day).
inline constexpr double kMinShardTargetS = 1;
inline constexpr double kMaxShardTargetS = 1e9;
inline constexpr double kMaxModelTimeoutS = 86400;

}  // namespace ts::scheduler
