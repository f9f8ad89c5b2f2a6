// `touchstone db migrate` and `touchstone db prune`: the database's schema and retention.
#pragma once

#include <string>
#include <vector>

namespace ts::cli {

// Returns the process exit code: 0 done, 2 usage or a bad flag or sweep, 1 database failure.
int DbCommand(const std::vector<std::string>& args);

}  // namespace ts::cli
