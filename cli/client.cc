#include "cli/client.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace ts::cli {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

absl::StatusOr<std::string> ReadAll(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(flag + ": cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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

absl::StatusOr<std::string> PickToken(const std::string& token_file,
                                      const std::vector<std::string>& roles) {
  if (token_file.empty()) return std::string();
  auto text = ReadAll(token_file, "--token-file");
  if (!text.ok()) return text.status();
  std::vector<std::pair<std::string, std::string>> entries;  // role, token
  std::istringstream in(*text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) continue;
    if (w.size() == 1) {
      entries.push_back({"", w[0]});
    } else if (w.size() == 2) {
      entries.push_back({w[0], w[1]});
    } else {
      return absl::InvalidArgumentError("--token-file: " + token_file + ":" + std::to_string(n) +
                                        ": expected 'role token'");
    }
  }
  if (entries.empty()) {
    return absl::InvalidArgumentError("--token-file: " + token_file + " holds no token");
  }
  for (const auto& role : roles) {
    for (const auto& [r, token] : entries) {
      if (r == role) return token;
    }
  }
  return entries.front().second;
}

std::unique_ptr<grpc::ClientContext> Connection::Context(double timeout_s) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  return ctx;
}

absl::StatusOr<Connection> Connect(const ClientFlags& flags,
                                   const std::vector<std::string>& roles) {
  Connection c;
  auto token = PickToken(flags.token_file, roles);
  if (!token.ok()) return token.status();
  c.token = *token;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!flags.tls_ca.empty()) {
    auto ca = ReadAll(flags.tls_ca, "--tls-ca");
    if (!ca.ok()) return ca.status();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = *ca;
    creds = grpc::SslCredentials(ssl);
  }
  c.channel = grpc::CreateChannel(flags.scheduler, creds);
  return c;
}

}  // namespace ts::cli
