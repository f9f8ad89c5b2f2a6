// Unpredictable identifiers: lease tokens, request ids, generated passwords and bearer tokens,
// from OpenSSL's CSPRNG (RAND_bytes).
//
// Thread-safety: thread-safe.
#pragma once

#include <cstddef>
#include <string>

namespace ts::common {

// `bytes` random bytes as 2 * bytes lower-case hex digits. Aborts the process if the CSPRNG
// cannot be seeded: an identifier that could be guessed is worse than no service.
std::string RandomHex(size_t bytes);

}  // namespace ts::common
