// How a `touchstone` command reports on stderr once its flags parsed: bad usage (exit 2:
// "touchstone CMD: why", then the command's synopsis) and failures (exit 1: "touchstone CMD: why"),
// for the command that runs (main binds the program). Flag errors themselves are the parser's
// (services/common/flags.h), in the same form. Also the integer parser a few values share.
//
// Thread-safety: one command per process, on the main thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ts::flags {
class Program;
}

namespace ts::cli {

// The program whose running command Usage and Fail speak for (main, before Run).
void BindProgram(const flags::Program* program);

// Prints "<command>: why" and the command's synopsis; returns 2.
int Usage(const std::string& why);
// Prints "<command>: why"; returns 1.
int Fail(const std::string& why);
// Prints "<command>: why"; returns `exit_code`.
int Error(int exit_code, const std::string& why);

// The mode names (eager, compile, train) from the result record's enum, for --modes / --mode.
std::vector<std::string> ModeNames();
// A check for "N|all" values (--sample): a count >= 1, or "all", which becomes 0.
std::string CountOrAll(std::string& value);

// A decimal integer >= 0, the whole string; false leaves *out alone.
bool ParseNonNegative(const std::string& s, int64_t* out);

}  // namespace ts::cli
