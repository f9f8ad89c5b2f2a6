// The release gate's rules file (`touchstone gate SWEEP --rules FILE`) -> touchstone.v1.GateRules.
//
//   {"baseline": 12, "min": {"eager": 99.0, "compile": 0, "train": 0, "opcov": 90},
//    "min_by_task": {"text-generation": {"eager": 90.0}},
//    "min_by_class": {"LlamaForCausalLM": {"compile": 50}},
//    "max_new_failures": 0, "forbid": ["crash", "timeout"], "must_pass": ["gpt2", ...]}
//
// Every key is optional. An unknown key, a value of the wrong type or out of range is an error
// whose message starts with the key's path ("min_by_task[\"text-generation\"].eagr: unknown key;
// expected one of eager, compile, train, opcov"). Whether the named statuses, tasks and models
// exist is the server's to say (Gate answers INVALID_ARGUMENT naming the field).
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "touchstone/v1/query.pb.h"

namespace ts::cli {

absl::StatusOr<touchstone::v1::GateRules> ParseGateRules(const std::string& json_text);

}  // namespace ts::cli
