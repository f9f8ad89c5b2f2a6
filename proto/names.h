// The user-facing names of the result record's enums (proto/touchstone/v1/result.proto): the
// value name without its prefix, in lower case ("eager", "fail_accuracy"). These are the names
// stored in PostgreSQL, accepted on the command line and printed; they are derived from the
// generated descriptors, so the enums stay the one list.
//
// Thread-safety: pure functions over tables built once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "touchstone/v1/result.pb.h"

namespace ts::proto {

// "" for the UNSPECIFIED value or a number outside the enum.
const std::string& ModeName(touchstone::v1::Mode mode);
const std::string& VerdictName(touchstone::v1::Verdict verdict);

// std::nullopt for an unknown name (and for "unspecified").
std::optional<touchstone::v1::Mode> ModeFromName(std::string_view name);
std::optional<touchstone::v1::Verdict> VerdictFromName(std::string_view name);

// Every value but UNSPECIFIED, in enum order: modes eager, compile, train; verdicts in stage
// order, skipped first and pass last.
const std::vector<touchstone::v1::Mode>& AllModes();
const std::vector<touchstone::v1::Verdict>& AllVerdicts();

}  // namespace ts::proto
