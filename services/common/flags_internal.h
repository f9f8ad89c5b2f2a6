// What flags.cc and flags_builtins.cc share. Not for users of flags.h.
#pragma once

#include <string>
#include <vector>

namespace ts::flags::internal {

// The parts with `sep` between them.
std::string Join(const std::vector<std::string>& parts, const std::string& sep);
// `s` with only the characters a bash word in the completion script may hold unquoted.
std::string ShellWord(const std::string& s);

}  // namespace ts::flags::internal
