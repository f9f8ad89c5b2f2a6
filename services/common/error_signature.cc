#include "services/common/error_signature.h"

#include <cctype>
#include <cstdint>
#include <cstdio>

namespace ts::common {

std::string NormalizeError(const std::string& e) {
  std::string out;
  for (size_t i = 0; i < e.size() && out.size() < 160;) {
    const unsigned char c = static_cast<unsigned char>(e[i]);
    if (c == '0' && i + 1 < e.size() && (e[i + 1] == 'x' || e[i + 1] == 'X')) {
      i += 2;
      while (i < e.size() && std::isxdigit(static_cast<unsigned char>(e[i]))) ++i;
      out += 'X';
      continue;
    }
    if (std::isdigit(c)) {
      while (i < e.size() && (std::isdigit(static_cast<unsigned char>(e[i])) || e[i] == '.')) ++i;
      out += 'N';
      continue;
    }
    if (std::isspace(c)) {
      while (i < e.size() && std::isspace(static_cast<unsigned char>(e[i]))) ++i;
      if (!out.empty()) out += ' ';
      continue;
    }
    out += static_cast<char>(c);
    ++i;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string ErrorSignature(const std::string& error) {
  if (error.empty()) return "";
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : NormalizeError(error)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace ts::common
