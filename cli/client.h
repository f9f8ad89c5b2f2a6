// How a `touchstone` command reaches a running scheduler: the flags every client command shares
// (--scheduler HOST:PORT, --token-file FILE, --tls-ca FILE, --format json|text), the token it
// picks from the tokens file, the channel, and what a failed call exits with.
//
// A tokens file holds `role token` lines (`touchstone serve` and `touchstone sweep --serve` print
// its path); the query commands send its reader token, else its admin one.
// Environment: TOUCHSTONE_SCHEDULER, TOUCHSTONE_TOKEN_FILE and TOUCHSTONE_TLS_CA stand in for
// absent flags.
//
// Thread-safety: pure functions, except Connect (creates a channel) and RpcFailed (stderr).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class Channel;
class ClientContext;
class Status;
}  // namespace grpc

namespace ts::flags {
class Command;
}

namespace ts::cli {

struct ClientFlags {
  std::string scheduler = "127.0.0.1:7300";
  std::string token_file;
  std::string tls_ca;
  std::string format = "text";
  bool admin = false;  // set by the command: it changes state (alerts ack, detect, submit,
                       // schedule), so Connect sends the admin token only
  bool json() const { return format == "json"; }
};

// Declares --scheduler, --token-file, --tls-ca and (with `format`) --format on `c`, bound to *f.
void AddClientFlags(flags::Command& c, ClientFlags* f, bool format = true);

struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::string token;
  // A context with the bearer token and a deadline of `timeout_s`.
  std::unique_ptr<grpc::ClientContext> Context(double timeout_s = 60) const;
};
// The channel (TLS when --tls-ca) and the token: from --token-file, the reader token, else the
// admin one (`admin`: the admin one only) (services/common/auth.h ReadClientToken); without a
// file, TOUCHSTONE_READER_TOKEN or TOUCHSTONE_ADMIN_TOKEN. Errors name the file or flag.
absl::StatusOr<Connection> Connect(const ClientFlags& flags);

// The exit code of a call the scheduler answered with `code`: 2 refused as bad (INVALID_ARGUMENT,
// NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION, PERMISSION_DENIED, UNAUTHENTICATED: the
// message names the field), 3 no answer (UNAVAILABLE, DEADLINE_EXCEEDED and every other code).
int RpcExitCode(absl::StatusCode code);
// Prints "touchstone CMD: METHOD: CODE: message" and returns RpcExitCode.
int RpcFailed(const std::string& method, const absl::Status& status);
int RpcFailed(const std::string& method, const grpc::Status& status);

}  // namespace ts::cli
