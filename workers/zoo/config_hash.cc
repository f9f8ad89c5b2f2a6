#include "workers/zoo/config_hash.h"

#include <cstdint>
#include <cstdio>

namespace ts::zoo {

std::string ConfigHash(const nlohmann::json& config) {
  const std::string s = config.dump();
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace ts::zoo
