#include "services/common/auth.h"
#include "services/common/random.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include <grpcpp/grpcpp.h>

namespace ts::common {
namespace {

using Digest = std::array<uint8_t, 32>;

constexpr Role kRoles[] = {Role::kWorker, Role::kReader, Role::kAdmin};

Digest Sha256(std::string_view s) {
  Digest d{};
  unsigned int n = 0;
  EVP_Digest(s.data(), s.size(), d.data(), &n, EVP_sha256(), nullptr);
  return d;
}

// 1 when equal, 0 otherwise; every byte is looked at.
uint32_t DigestsEqual(const Digest& a, const Digest& b) {
  uint32_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint32_t>(a[i] ^ b[i]);
  return ((diff - 1) >> 8) & 1;  // diff is 0..255: only 0 wraps to all ones
}

struct TokenLine {
  Role role;
  std::string token;
  int line;
};

std::vector<std::string> Fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

// The lines of a tokens file. A file whose only line is one bare token is that token as admin.
// Errors never echo a field: it may be a token.
absl::StatusOr<std::vector<TokenLine>> ParseLines(std::string_view text, const std::string& origin) {
  std::vector<TokenLine> out;
  std::vector<int> bare;  // line numbers of one-field lines
  std::istringstream in{std::string(text)};
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const std::vector<std::string> f = Fields(line);
    if (f.empty() || f[0][0] == '#') continue;
    const std::string where = origin + ":" + std::to_string(n) + ": ";
    if (f.size() == 1) {
      bare.push_back(n);
      out.push_back({Role::kAdmin, f[0], n});
      continue;
    }
    if (f.size() != 2) {
      return absl::InvalidArgumentError(where + "expected 'role token' (two fields), found " +
                                        std::to_string(f.size()) + " fields");
    }
    std::optional<Role> role = ParseRole(f[0]);
    if (!role) {
      return absl::InvalidArgumentError(
          where + "unknown role in 'role token'; the role must be worker, reader or admin");
    }
    out.push_back({*role, f[1], n});
  }
  if (!bare.empty() && out.size() > 1) {
    return absl::InvalidArgumentError(origin + ":" + std::to_string(bare[0]) +
                                      ": expected 'role token' (a bare token is allowed only as "
                                      "the file's single line, meaning admin)");
  }
  if (out.empty()) return absl::InvalidArgumentError(origin + ": holds no token");
  return out;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path + ": cannot read: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ModeString(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kWorker:
      return "worker";
    case Role::kReader:
      return "reader";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

std::optional<Role> ParseRole(std::string_view name) {
  for (Role r : kRoles) {
    if (RoleName(r) == name) return r;
  }
  return std::nullopt;
}

bool RoleMay(Role held, Role needed) { return held == Role::kAdmin || held == needed; }

bool TokensEqual(std::string_view a, std::string_view b) {
  return DigestsEqual(Sha256(a), Sha256(b)) == 1;
}

std::string_view TokenEnvVar(Role role) {
  switch (role) {
    case Role::kWorker:
      return "TOUCHSTONE_WORKER_TOKEN";
    case Role::kReader:
      return "TOUCHSTONE_READER_TOKEN";
    case Role::kAdmin:
      return "TOUCHSTONE_ADMIN_TOKEN";
  }
  return "";
}

absl::Status TokenSet::Add(Role role, std::string_view token) {
  if (token.empty()) return absl::InvalidArgumentError("token: empty");
  for (char c : token) {
    if (c <= ' ' || c == 0x7f) {
      return absl::InvalidArgumentError("token: holds a space or a control character");
    }
  }
  if (RoleOf(token).has_value()) {
    return absl::InvalidArgumentError("token: already in the set (one token, one role)");
  }
  entries_.push_back({role, Sha256(token)});
  return absl::OkStatus();
}

size_t TokenSet::count(Role role) const {
  size_t n = 0;
  for (const Entry& e : entries_) n += e.role == role ? 1 : 0;
  return n;
}

std::optional<Role> TokenSet::RoleOf(std::string_view token) const {
  const Digest d = Sha256(token);
  uint32_t found = 0;
  uint32_t role = 0;
  // Every entry is compared; the match is selected with masks rather than a branch.
  for (const Entry& e : entries_) {
    const uint32_t eq = DigestsEqual(d, e.digest);
    const uint32_t mask = 0u - eq;
    role = (role & ~mask) | (static_cast<uint32_t>(e.role) & mask);
    found |= eq;
  }
  if (found == 0) return std::nullopt;
  return static_cast<Role>(role);
}

absl::StatusOr<TokenSet> TokenSet::Parse(std::string_view text, const std::string& origin) {
  auto lines = ParseLines(text, origin);
  if (!lines.ok()) return lines.status();
  TokenSet set;
  for (const TokenLine& l : *lines) {
    absl::Status st = set.Add(l.role, l.token);
    if (!st.ok()) {
      return absl::InvalidArgumentError(origin + ":" + std::to_string(l.line) + ": " +
                                        std::string(st.message()));
    }
  }
  return set;
}

absl::StatusOr<TokenSet> TokenSet::FromFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(path + ": cannot read: " + std::strerror(errno));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::FailedPreconditionError(
        path + ": mode " + ModeString(st.st_mode) +
        " lets group or others read or write the tokens; chmod 600 " + path);
  }
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

absl::StatusOr<TokenSet> TokenSet::FromEnvironment() {
  TokenSet set;
  for (Role r : kRoles) {
    const std::string var(TokenEnvVar(r));
    const char* v = std::getenv(var.c_str());
    if (v == nullptr || *v == '\0') continue;
    absl::Status st = set.Add(r, v);
    if (!st.ok()) return absl::InvalidArgumentError(var + ": " + std::string(st.message()));
  }
  return set;
}

absl::Status TokenSet::Check(std::optional<std::string_view> authorization, Role needed,
                             std::string_view what) const {
  if (open()) return absl::OkStatus();
  const std::string prefix = std::string(what) + ": ";
  constexpr std::string_view kBearer = "bearer ";
  std::string_view v = authorization.value_or("");
  bool bearer = v.size() > kBearer.size();
  for (size_t i = 0; bearer && i < kBearer.size(); ++i) {
    bearer = std::tolower(static_cast<unsigned char>(v[i])) == kBearer[i];
  }
  if (!bearer) {
    return absl::UnauthenticatedError(prefix + "no bearer token (authorization: Bearer TOKEN)");
  }
  std::optional<Role> held = RoleOf(v.substr(kBearer.size()));
  if (!held) return absl::UnauthenticatedError(prefix + "unknown bearer token");
  if (RoleMay(*held, needed)) return absl::OkStatus();
  const std::string needs = needed == Role::kAdmin
                                ? std::string("admin")
                                : std::string(RoleName(needed)) + " or admin";
  return absl::PermissionDeniedError(prefix + "the " + std::string(RoleName(*held)) +
                                     " role may not call it (it needs " + needs + ")");
}

absl::Status TokenSet::Admit(const grpc::CallbackServerContext* ctx, Role needed,
                             std::string_view what) const {
  if (open()) return absl::OkStatus();
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return Check(std::nullopt, needed, what);
  return Check(std::string_view(it->second.data(), it->second.size()), needed, what);
}

GrpcAdmitter MakeAdmitter(std::shared_ptr<const TokenSet> tokens, Role needed, std::string what) {
  return [tokens = std::move(tokens), needed, what = std::move(what)](
             grpc::CallbackServerContext* ctx) {
    return tokens ? tokens->Admit(ctx, needed, what) : absl::OkStatus();
  };
}

absl::StatusOr<std::string> ReadClientToken(const std::string& path,
                                            std::initializer_list<Role> prefer) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto lines = ParseLines(*text, path);
  if (!lines.ok()) return lines.status();
  for (Role r : prefer) {
    for (const TokenLine& l : *lines) {
      if (l.role == r) return l.token;
    }
  }
  std::string roles;
  for (Role r : prefer) roles += (roles.empty() ? "" : " or ") + std::string(RoleName(r));
  return absl::NotFoundError(path + ": holds no " + roles + " token");
}

std::string ClientTokenFromEnvironment(std::initializer_list<Role> prefer) {
  for (Role r : prefer) {
    const char* v = std::getenv(std::string(TokenEnvVar(r)).c_str());
    if (v != nullptr && *v != '\0') return v;
  }
  return "";
}

absl::StatusOr<std::string> RandomToken() { return RandomHex(32); }

absl::StatusOr<std::map<Role, std::string>> LoadOrMakeTokensFile(const std::string& path) {
  std::map<Role, std::string> tokens;
  if (::access(path.c_str(), F_OK) == 0) {
    if (auto set = TokenSet::FromFile(path); !set.ok()) return set.status();
    for (Role r : kRoles) {
      auto t = ReadClientToken(path, {r});
      if (t.ok()) tokens[r] = *t;
    }
    // A file of an earlier release (one bare token) lacks the worker and reader lines: remade.
    if (tokens.size() == std::size(kRoles)) return tokens;
    tokens.clear();
  }
  std::string text = "# role token (made by touchstone; mode 0600)\n";
  for (Role r : kRoles) {
    auto t = RandomToken();
    if (!t.ok()) return t.status();
    tokens[r] = *t;
    text += std::string(RoleName(r)) + " " + *t + "\n";
  }
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(tmp + ": cannot create: " + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = ::close(fd) == 0;
  if (!written || !closed || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return absl::InternalError(path + ": cannot write: " + std::strerror(errno));
  }
  return tokens;
}

}  // namespace ts::common
