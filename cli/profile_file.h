// A device profile named on the command line (`--profile FILE`): read and checked field by field
// before anything starts, so that a bad profile is bad input (exit 2, its field named), never a
// verdict. run-model, run-catalog, sweep, submit and schedule add read theirs here.
//
// Thread-safety: a function over its arguments (prints on stderr).
#pragma once

#include <string>

#include "workers/simdevice/profile.h"

namespace ts::cli {

struct ProfileFile {
  std::string text;             // the document, as sent to workers
  simdevice::ProfileInfo info;  // its name, sdk_version, ...
};

// Returns 0, or 2 with the error printed: "--profile: cannot read PATH" (with the synopsis) or
// "profile PATH: FIELD: why".
int ReadProfileFile(const std::string& path, ProfileFile* out);

}  // namespace ts::cli
