#include "cli/client.h"

#include <chrono>
#include <cstdlib>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "services/common/auth.h"
#include "services/common/tls.h"

namespace ts::cli {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

absl::StatusOr<ClientFlags> TakeClientFlags(std::vector<std::string>* args) {
  ClientFlags f;
  if (std::string v = Env("TOUCHSTONE_SCHEDULER"); !v.empty()) f.scheduler = v;
  f.token_file = Env("TOUCHSTONE_TOKEN_FILE");
  f.tls_ca = Env("TOUCHSTONE_TLS_CA");
  std::vector<std::string> rest;
  for (size_t i = 0; i < args->size(); ++i) {
    const std::string& a = (*args)[i];
    const bool has = i + 1 < args->size();
    if ((a == "--scheduler" || a == "--token-file" || a == "--tls-ca" || a == "--format") &&
        !has) {
      return absl::InvalidArgumentError(a + ": needs a value");
    }
    if (a == "--scheduler") {
      f.scheduler = (*args)[++i];
      if (f.scheduler.find(':') == std::string::npos) {
        return absl::InvalidArgumentError("--scheduler: expected HOST:PORT, got '" +
                                          f.scheduler + "'");
      }
    } else if (a == "--token-file") {
      f.token_file = (*args)[++i];
    } else if (a == "--tls-ca") {
      f.tls_ca = (*args)[++i];
    } else if (a == "--format") {
      const std::string v = (*args)[++i];
      if (v != "json" && v != "text") {
        return absl::InvalidArgumentError("--format: expected json or text, got '" + v + "'");
      }
      f.json = v == "json";
    } else {
      rest.push_back(a);
    }
  }
  *args = rest;
  return f;
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

}  // namespace ts::cli
