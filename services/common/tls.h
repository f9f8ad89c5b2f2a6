// Optional TLS for the scheduler's gRPC port and its clients (workers, the CLI, SweepDriver).
// Without files everything stays plaintext, as a loopback-only deployment runs today.
//
//   server  --tls-cert FILE --tls-key FILE  -> grpc::SslServerCredentials (PEM chain and key)
//   client  --tls-ca FILE                   -> grpc::SslCredentials (PEM root certificates)
//
// A client checks the server's certificate against the target's host: a certificate for
// 127.0.0.1 needs subjectAltName IP:127.0.0.1, one for a name needs DNS:name.
//
// Thread-safety: free functions, safe from any thread.
// Errors: INVALID_ARGUMENT when only one of cert and key is given (naming the missing one) or a
// file holds no PEM block; NOT_FOUND when a file cannot be read. Every message names the file.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace ts::common {

// Both empty: insecure. Both set: TLS with that certificate chain and key.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const std::string& cert_file, const std::string& key_file);

// Empty: insecure. Else TLS trusting the CA certificates in the file.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const std::string& ca_file);

// A channel to `target` (host:port), over TLS when ca_file is set.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& target, const std::string& ca_file,
    const grpc::ChannelArguments& args = grpc::ChannelArguments());

}  // namespace ts::common
