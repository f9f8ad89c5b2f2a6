// How a `touchstone` command reports on stderr: bad usage (exit 2: the reason, then the
// command's usage text) and failures (exit 1: the reason alone). One CommandText per command;
// main.cc, sweep.cc and db.cc print through these two functions only. Also the integer parser
// their flags share.
//
// Thread-safety: pure functions over stderr.
#pragma once

#include <cstdint>
#include <string>

namespace ts::cli {

struct CommandText {
  const char* usage_prefix;  // "touchstone": a usage error reads "touchstone: WHY"
  const char* fail_prefix;   // "touchstone sweep": a failure reads "touchstone sweep: WHY"
  const char* usage;         // printed after a usage error's reason
};

// Prints "<usage_prefix>: why" and the usage text; returns 2.
int Usage(const CommandText& c, const std::string& why);
// Prints "<fail_prefix>: why"; returns 1.
int Fail(const CommandText& c, const std::string& why);

// A flag's decimal integer >= 0, the whole string; false leaves *out alone.
bool ParseNonNegative(const std::string& s, int64_t* out);

}  // namespace ts::cli
