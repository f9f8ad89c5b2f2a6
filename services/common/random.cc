#include "services/common/random.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <openssl/rand.h>

namespace ts::common {

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> b(bytes);
  if (bytes > 0 && RAND_bytes(b.data(), static_cast<int>(bytes)) != 1) {
    std::fprintf(stderr, "touchstone: RAND_bytes failed: no secure random numbers\n");
    std::abort();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char c : b) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace ts::common
