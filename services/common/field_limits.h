// Limits on every string of an RPC request, found by reflection so that a field added to a
// message later is covered without a new check: a NUL byte is refused wherever it appears, and
// each string has a length limit chosen by its field's name (ids, names, tokens, ops and
// signatures are short; errors and notes are text; configs and profile bodies are JSON).
// Nested messages, repeated fields and map entries are walked; the error names the path
// ("results[2].modes[0].error: 70000 bytes, at most 65536").
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace ts::common {

inline constexpr size_t kMaxIdBytes = 512;           // ids, names, tokens, ops, states, ...
inline constexpr size_t kMaxTextBytes = 64 << 10;    // error, detail, reason, note, shapes, ...
inline constexpr size_t kMaxJsonBytes = 1 << 20;     // config_json, tiny_config_json, body
// The largest request a service accepts (gRPC's max receive size): 5,000 real config.json files
// fit in 32 MiB with room to spare; a client splits anything larger.
inline constexpr int kMaxRequestBytes = 32 << 20;

// The limit for a string field of this name (not its path).
size_t StringLimit(std::string_view field_name);

// INVALID_ARGUMENT naming the first string (by path) that holds a NUL byte or exceeds its
// limit; OK otherwise.
absl::Status CheckStrings(const google::protobuf::Message& m);

// Makes a message the sender built pass CheckStrings instead of losing it whole: every NUL
// becomes a space, a string over its limit is cut at a UTF-8 boundary with "...[cut]" at the end,
// and a JSON field over its limit is emptied (half a JSON object would not parse). Returns the
// number of strings changed. A worker clamps each model's record before reporting it, so that
// one model's runaway error text costs that text, not the report.
int ClampStrings(google::protobuf::Message* m);

}  // namespace ts::common
