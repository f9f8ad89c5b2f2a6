// The result record as the JSON `touchstone run-model` and `run-catalog` print:
//   {"model": {arch, task, family, config_hash}, "modes": {"eager": {status, error, ms,
//    rmse_ratio, ...}, ...}, "op_coverage": {...}, "fallback_ops": {op: {calls, ms}},
//    "native_ops": {...}, "timings_ms": {...}, "peak_device_bytes": N, "tiny_config": {...}}
// Statuses and modes by their names (proto/names.h); NaN and infinities are null; a mode's
// accuracy fields appear when measured (rmse_ratio, max_abs_err and cosine are null for an
// eager or compile mode that measured none), compile fields only under "compile", loss curves
// only under "train" with the gradient check ("grad_rmse_ratio", null when not measured, and
// "grad_worst_param", null when none). Every mode says whether it was replayed op by op
// ("audited") and its "suspects": [{op, shapes, dtype, ratio, calls, total_calls}] ([] when
// none; a ratio of 1e300 stands for a non-finite mismatch) and its "perf" (PerfJson; null when
// the mode did not pass). A view of the record for people
// and scripts, not a second record: the stored and reported form is the protobuf message.
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "touchstone/v1/result.pb.h"

namespace ts::runner {

nlohmann::json RecordToJson(const ::touchstone::v1::ModelResult& r);

// A mode's perf: {device_us, flops, bytes, mfu, launches, fallback_us, transfer_bytes,
// peak_device_bytes, top_ops: [{op, us, share}], speedup, compression} (speedup and compression
// null outside a passing compile).
nlohmann::json PerfJson(const ::touchstone::v1::Perf& p);

// Adds a blank `skipped` verdict for every mode the record lacks, keeping Mode order.
void AddSkippedModes(::touchstone::v1::ModelResult* r);

}  // namespace ts::runner
