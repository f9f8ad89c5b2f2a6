// Tokens by role: who may call what on the scheduler's gRPC services and HTTP pages.
//
// Roles (a caller holds exactly one, given by its bearer token):
//   worker  the Scheduler worker API: RegisterWorker, LeaseShard, Heartbeat, ReportResults,
//           FinishShard. A worker token never reads results.
//   reader  the Query service, GetSweep, ListResults, and the HTTP pages other than the open
//           ones (/healthz, /metrics: counts and latencies, no model ids, errors or records).
//   admin   everything: UpsertModels, CreateSweep, CancelSweep, and all a worker or a reader may.
//
// Tokens come from a file or the environment:
//   file         one `role token` a line (several tokens for one role are fine: rotation);
//                `#` comments and blank lines allowed. A file of exactly one bare token (the
//                single-token format of earlier releases) is that token as admin, so existing
//                token files keep working. The file must not be readable or writable by group
//                or others (stat), else the service refuses to start.
//   environment  TOUCHSTONE_WORKER_TOKEN, TOUCHSTONE_READER_TOKEN, TOUCHSTONE_ADMIN_TOKEN (one
//                token each; empty or unset: none for that role).
// No token configured at all: open, every caller may call everything (the tokenless mode of a
// loopback-only scheduler); the scheduler logs it at start.
//
// Comparison: the presented token's SHA-256 is compared with every configured token's digest,
// each over all 32 bytes with no early exit, so the time taken says nothing about how close a
// guess was or which token it matched. A TokenSet keeps only digests, never the tokens.
//
// Thread-safety: a TokenSet is immutable after loading; const methods may be called from any
// thread.
// Errors (as absl::Status; the gRPC codes are the same):
//   loading    NOT_FOUND the file cannot be read; FAILED_PRECONDITION its mode lets group or
//              others in (the message names the file and its mode); INVALID_ARGUMENT a bad line
//              ("FILE:LINE: ..."; a token is never echoed), a duplicate token, or no token.
//   checking   UNAUTHENTICATED no bearer token or an unknown one; PERMISSION_DENIED a known
//              token whose role may not call the method (the message names both).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class CallbackServerContext;
}

namespace ts::common {

enum class Role { kWorker, kReader, kAdmin };

std::string_view RoleName(Role role);  // "worker", "reader", "admin"
std::optional<Role> ParseRole(std::string_view name);
// Whether a caller holding `held` may call what needs `needed` (admin may call everything).
bool RoleMay(Role held, Role needed);

// Constant-time token equality: SHA-256 of both, compared over all 32 bytes without an early
// exit; the time depends neither on where they differ nor on their lengths' difference.
bool TokensEqual(std::string_view a, std::string_view b);

// The environment variables read by TokenSet::FromEnvironment and ClientTokenFromEnvironment.
std::string_view TokenEnvVar(Role role);  // "TOUCHSTONE_WORKER_TOKEN", ...

class TokenSet {
 public:
  TokenSet() = default;  // no tokens: open

  // Reads a tokens file (format above), refusing one that group or others may read or write.
  static absl::StatusOr<TokenSet> FromFile(const std::string& path);
  // Parses a tokens file's text; `origin` names it in errors. No mode check.
  static absl::StatusOr<TokenSet> Parse(std::string_view text, const std::string& origin);
  // TOUCHSTONE_{WORKER,READER,ADMIN}_TOKEN; none set: an open set.
  static absl::StatusOr<TokenSet> FromEnvironment();

  // Adds a token for a role. INVALID_ARGUMENT when it is empty, holds a space or a control
  // character, or is already in the set.
  absl::Status Add(Role role, std::string_view token);

  bool open() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  size_t count(Role role) const;

  // The role of a presented token, compared against every configured token; nullopt: unknown.
  std::optional<Role> RoleOf(std::string_view token) const;

  // Checks an "authorization" header value ("Bearer TOKEN"; nullopt: no header) for a call of
  // `what` (a method or path, named in the error) that needs `needed`. OK when the set is open.
  absl::Status Check(std::optional<std::string_view> authorization, Role needed,
                     std::string_view what) const;

  // The same over a gRPC call's "authorization" metadata.
  absl::Status Admit(const grpc::CallbackServerContext* ctx, Role needed,
                     std::string_view what) const;

 private:
  struct Entry {
    Role role;
    std::array<uint8_t, 32> digest;
  };
  std::vector<Entry> entries_;
};

// An admission check for a gRPC service whose every method needs `needed` (the Query service:
// reader). `what` names the service in refusals, e.g. "touchstone.v1.Query". Shares `tokens`.
using GrpcAdmitter = std::function<absl::Status(grpc::CallbackServerContext*)>;
GrpcAdmitter MakeAdmitter(std::shared_ptr<const TokenSet> tokens, Role needed, std::string what);

// Client side. The token to send from a tokens file: the first of `prefer` present in it (a
// bare single-token file counts as admin). No mode check (the server checks its own file).
// Errors: NOT_FOUND unreadable, INVALID_ARGUMENT malformed, NOT_FOUND none of `prefer` in it.
absl::StatusOr<std::string> ReadClientToken(const std::string& path,
                                            std::initializer_list<Role> prefer);
// The first of `prefer` set in the environment (TokenEnvVar); empty when none is.
std::string ClientTokenFromEnvironment(std::initializer_list<Role> prefer);

// A fresh random token: 32 bytes from OpenSSL's CSPRNG as 64 hex digits (random.h).
absl::StatusOr<std::string> RandomToken();

// One token per role in a tokens file made for a private cluster (LocalCluster, `touchstone
// serve`): an existing file with one token for each role is read and kept (so clients started
// by hand against the same folder keep working); otherwise fresh random tokens are written
// (mode 0600, atomically). Errors: INTERNAL when the file cannot be written, FAILED_PRECONDITION
// when an existing one has a loose mode.
absl::StatusOr<std::map<Role, std::string>> LoadOrMakeTokensFile(const std::string& path);

}  // namespace ts::common
