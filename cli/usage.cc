#include "cli/usage.h"

#include <cstdio>
#include <cstdlib>

#include "proto/names.h"
#include "services/common/flags.h"

namespace ts::cli {
namespace {

const flags::Program* bound = nullptr;

}  // namespace

void BindProgram(const flags::Program* program) { bound = program; }

int Usage(const std::string& why) {
  if (bound && bound->running()) return bound->running()->UsageError(why);
  std::fprintf(stderr, "touchstone: %s\n", why.c_str());
  return 2;
}

int Fail(const std::string& why) { return Error(1, why); }

int Error(int exit_code, const std::string& why) {
  if (bound && bound->running()) {
    bound->running()->Failure(why);
  } else {
    std::fprintf(stderr, "touchstone: %s\n", why.c_str());
  }
  return exit_code;
}

std::vector<std::string> ModeNames() {
  std::vector<std::string> names;
  for (auto m : proto::AllModes()) names.push_back(proto::ModeName(m));
  return names;
}

std::string CountOrAll(std::string& value) {
  int64_t n = 0;
  if (value == "all") {
    value = "0";
    return "";
  }
  if (ParseNonNegative(value, &n) && n > 0) return "";
  return "expected a count >= 1 or 'all', got '" + value + "'";
}

bool ParseNonNegative(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || v < 0) return false;
  *out = v;
  return true;
}

}  // namespace ts::cli
