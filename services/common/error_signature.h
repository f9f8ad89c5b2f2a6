// Error signatures: errors that differ only in numbers, shapes, addresses or quoted names group
// together (for alerts and "top failure causes"), e.g.
//   "[simdevice:oom] allocating 1048576 bytes at 0x7f3a..." -> "[simdevice:oom] allocating N bytes at X"
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace ts::common {

// The normalised text (digits -> N, hex literals -> X, runs of whitespace -> one space, at most
// 160 characters).
std::string NormalizeError(const std::string& error);
// 16 hex digits (FNV-1a of the normalised text); "" for an empty error.
std::string ErrorSignature(const std::string& error);

}  // namespace ts::common
