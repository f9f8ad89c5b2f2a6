// The engine's verdicts as the result record (touchstone.v1.ModelResult): the one place where
// the engine's types become the record that travels to the database. Runs in the runner child.
//
// Conversion rules: the engine's Verdict k maps to the proto Verdict of the same name (value
// k + 1; tested name by name); every mode the engine reports is kept, in Mode order; a double
// that is not finite, or that the mode did not measure, is NaN; ops are native then fallback,
// each sorted by name; opcov_ratio is clamped to [0, 1] (NaN: 0).
//
// Thread-safety: pure function.
#pragma once

#include "touchstone/v1/result.pb.h"
#include "workers/engine/verdict.h"

namespace ts::runner {

::touchstone::v1::ModelResult ToRecord(const engine::ModelResult& r);

::touchstone::v1::Verdict ToProto(engine::Verdict v);

}  // namespace ts::runner
