// How a `touchstone` command reaches a running scheduler: the flags every query command shares
// (--scheduler HOST:PORT, --token-file FILE, --tls-ca FILE, --format json|text), the token it
// picks from the tokens file, and the channel.
//
// A tokens file holds `role token` lines (`touchstone serve` and `touchstone sweep --serve` print
// its path); the query commands send its reader token, else its admin one.
// Environment: TOUCHSTONE_SCHEDULER, TOUCHSTONE_TOKEN_FILE and TOUCHSTONE_TLS_CA stand in for
// absent flags.
//
// Thread-safety: pure functions, except Connect (creates a channel).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace ts::cli {

struct ClientFlags {
  std::string scheduler = "127.0.0.1:7300";
  std::string token_file;
  std::string tls_ca;
  bool json = false;  // --format json
  bool admin = false;  // set by the command: it changes state (alerts ack, detect), so Connect
                       // sends the admin token only
};

// Takes the shared flags out of args (leaving the command's own). A usage problem is
// INVALID_ARGUMENT naming the flag.
absl::StatusOr<ClientFlags> TakeClientFlags(std::vector<std::string>* args);

struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::string token;
  // A context with the bearer token and a deadline of `timeout_s`.
  std::unique_ptr<grpc::ClientContext> Context(double timeout_s = 60) const;
};
// The channel (TLS when --tls-ca) and the token: from --token-file, the reader token, else the
// admin one (`admin`: the admin one only) (services/common/auth.h ReadClientToken); without a file, TOUCHSTONE_READER_TOKEN or
// TOUCHSTONE_ADMIN_TOKEN. Errors name the file or flag.
absl::StatusOr<Connection> Connect(const ClientFlags& flags);

}  // namespace ts::cli
