#include "cli/client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "cli/usage.h"
#include "services/common/auth.h"
#include "services/common/flags.h"
#include "services/common/grpc_status.h"
#include "services/common/tls.h"

namespace ts::cli {

void AddClientFlags(flags::Command& c, ClientFlags* f, bool format) {
  c.Option("--scheduler", &f->scheduler, "HOST:PORT", "the scheduler's gRPC address")
      .Env("TOUCHSTONE_SCHEDULER")
      .Check([](std::string& v) -> std::string {
        return v.find(':') == std::string::npos ? "expected HOST:PORT, got '" + v + "'" : "";
      });
  c.Option("--token-file", &f->token_file, "FILE",
           "`role token` lines (the tokens= file of `touchstone serve`)")
      .Env("TOUCHSTONE_TOKEN_FILE")
      .File();
  c.Option("--tls-ca", &f->tls_ca, "FILE", "TLS to the scheduler, trusting these CA certificates")
      .Env("TOUCHSTONE_TLS_CA")
      .File();
  if (format) {
    c.Option("--format", &f->format, "json|text", "the answer as text tables or protobuf JSON")
        .Choices({"json", "text"});
  }
}

std::unique_ptr<grpc::ClientContext> Connection::Context(double timeout_s) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  return ctx;
}

absl::StatusOr<Connection> Connect(const ClientFlags& flags) {
  Connection c;
  const std::initializer_list<common::Role> reads = {common::Role::kReader, common::Role::kAdmin};
  const std::initializer_list<common::Role> writes = {common::Role::kAdmin};
  const std::initializer_list<common::Role>& prefer = flags.admin ? writes : reads;
  if (!flags.token_file.empty()) {
    auto token = common::ReadClientToken(flags.token_file, prefer);
    if (!token.ok()) return token.status();
    c.token = *token;
  } else {
    c.token = common::ClientTokenFromEnvironment(prefer);
  }
  auto channel = common::MakeChannel(flags.scheduler, flags.tls_ca);
  if (!channel.ok()) return channel.status();
  c.channel = *channel;
  return c;
}

int RpcExitCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return 2;
    default:
      return 3;
  }
}

int RpcFailed(const std::string& method, const absl::Status& status) {
  return Error(RpcExitCode(status.code()), method + ": " + absl::StatusCodeToString(status.code()) +
                                               ": " + std::string(status.message()));
}

int RpcFailed(const std::string& method, const grpc::Status& status) {
  return RpcFailed(method, common::FromGrpcStatus(status));
}

}  // namespace ts::cli
