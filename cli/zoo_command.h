// `touchstone zoo list | supports CONFIG | export ...` (cli/README.md).
//
// Thread-safety: run from main only.
#pragma once

#include <string>
#include <vector>

namespace ts::cli {

// args: what follows `touchstone zoo`. Returns the process exit code (2 usage, 1 failure).
int ZooCommand(const std::vector<std::string>& args);

}  // namespace ts::cli
