#include "services/common/tls.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ts::common {
namespace {

// The file's text, which must hold a PEM block. `flag` names it in errors (e.g. "tls_cert").
absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(flag + ": cannot read " + path + ": " + std::strerror(errno));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(flag + ": " + path + " holds no PEM block");
  }
  return ss.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty() && key_file.empty()) return grpc::InsecureServerCredentials();
  if (cert_file.empty()) return absl::InvalidArgumentError("tls_cert: needed with tls_key");
  if (key_file.empty()) return absl::InvalidArgumentError("tls_key: needed with tls_cert");
  auto cert = ReadPem("tls_cert", cert_file);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("tls_key", key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions o;
  o.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(o);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const std::string& ca_file) {
  if (ca_file.empty()) return grpc::InsecureChannelCredentials();
  auto ca = ReadPem("tls_ca", ca_file);
  if (!ca.ok()) return ca.status();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = *ca;
  return grpc::SslCredentials(o);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& target,
                                                           const std::string& ca_file,
                                                           const grpc::ChannelArguments& args) {
  auto creds = MakeChannelCredentials(ca_file);
  if (!creds.ok()) return creds.status();
  return grpc::CreateCustomChannel(target, *creds, args);
}

}  // namespace ts::common
