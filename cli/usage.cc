#include "cli/usage.h"

#include <cstdio>
#include <cstdlib>

namespace ts::cli {

int Usage(const CommandText& c, const std::string& why) {
  std::fprintf(stderr, "%s: %s\n%s", c.usage_prefix, why.c_str(), c.usage);
  return 2;
}

int Fail(const CommandText& c, const std::string& why) {
  std::fprintf(stderr, "%s: %s\n", c.fail_prefix, why.c_str());
  return 1;
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
