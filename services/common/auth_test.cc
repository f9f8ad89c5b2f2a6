#include "services/common/auth.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

namespace ts::common {
namespace {

namespace fs = std::filesystem;

// A file with exactly this mode (umask does not apply: chmod after writing).
std::string WriteFile(const std::string& name, const std::string& text, mode_t mode) {
  const std::string path = ::testing::TempDir() + "auth_test_" + std::to_string(::getpid()) +
                           "_" + name;
  std::ofstream(path, std::ios::trunc) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(TokensEqualTest, EqualDifferentLengthAndDifferentContent) {
  EXPECT_TRUE(TokensEqual("abc123", "abc123"));
  EXPECT_TRUE(TokensEqual("", ""));
  EXPECT_FALSE(TokensEqual("abc123", "abc1234"));  // a prefix
  EXPECT_FALSE(TokensEqual("abc123", "abc12"));
  EXPECT_FALSE(TokensEqual("abc123", ""));
  EXPECT_FALSE(TokensEqual("abc123", "abc124"));  // last byte
  EXPECT_FALSE(TokensEqual("abc123", "bbc123"));  // first byte
}

TEST(TokenSetTest, ParsesRolesCommentsBlankLinesAndCrlf) {
  auto set = TokenSet::Parse(
      "# tokens\n\nworker w-1\r\n  reader   r-1  \nadmin a-1\nreader r-2 # no: three fields?\n",
      "t");
  // The last line has four fields: an error naming its line.
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(set.status().message(), "t:6: expected 'role token' (two fields), found 6 fields");

  set = TokenSet::Parse("# tokens\n\nworker w-1\r\n  reader   r-1  \nadmin a-1\nreader r-2\n", "t");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->size(), 4u);
  EXPECT_EQ(set->count(Role::kReader), 2u);
  EXPECT_EQ(set->RoleOf("w-1"), Role::kWorker);
  EXPECT_EQ(set->RoleOf("r-1"), Role::kReader);
  EXPECT_EQ(set->RoleOf("r-2"), Role::kReader);
  EXPECT_EQ(set->RoleOf("a-1"), Role::kAdmin);
  EXPECT_EQ(set->RoleOf("a-"), std::nullopt);
  EXPECT_EQ(set->RoleOf("w-1\r"), std::nullopt);
  EXPECT_EQ(set->RoleOf(""), std::nullopt);
}

TEST(TokenSetTest, ABareSingleTokenIsAdmin) {
  auto set = TokenSet::Parse("# old format\nlegacy-token\n", "t");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->size(), 1u);
  EXPECT_EQ(set->RoleOf("legacy-token"), Role::kAdmin);
}

TEST(TokenSetTest, MalformedLinesAreErrorsNamingTheLineWithoutEchoingTokens) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"worker w-1\nsecret-token\n",
       "f:2: expected 'role token' (a bare token is allowed only as the file's single line, "
       "meaning admin)"},
      {"worker w-1\nwriter secret-token\n",
       "f:2: unknown role in 'role token'; the role must be worker, reader or admin"},
      {"\n\nadmin a b\n", "f:3: expected 'role token' (two fields), found 3 fields"},
      {"worker same\nreader same\n", "f:2: token: already in the set (one token, one role)"},
      {"# nothing\n\n", "f: holds no token"},
      {"", "f: holds no token"},
  };
  for (const Case& c : cases) {
    auto set = TokenSet::Parse(c.text, "f");
    ASSERT_FALSE(set.ok()) << c.text;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(set.status().message(), c.message) << c.text;
    EXPECT_EQ(std::string(set.status().message()).find("secret"), std::string::npos);
  }
}

TEST(TokenSetTest, AddRefusesEmptySpacedAndControlCharacterTokens) {
  TokenSet set;
  EXPECT_EQ(set.Add(Role::kReader, "").message(), "token: empty");
  EXPECT_FALSE(set.Add(Role::kReader, "a b").ok());
  EXPECT_FALSE(set.Add(Role::kReader, std::string("a\x01", 2)).ok());
  EXPECT_TRUE(set.open());
  EXPECT_TRUE(set.Add(Role::kReader, "r").ok());
  EXPECT_FALSE(set.open());
}

TEST(TokenSetTest, FileReadableOrWritableByGroupOrOthersIsRefusedNamingFileAndMode) {
  const std::string text = "reader r-1\n";
  for (mode_t mode : {0644, 0640, 0620, 0604, 0602, 0666}) {
    const std::string path = WriteFile("loose", text, mode);
    auto set = TokenSet::FromFile(path);
    ASSERT_FALSE(set.ok()) << std::oct << mode;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kFailedPrecondition);
    char want[8];
    std::snprintf(want, sizeof(want), "%04o", static_cast<unsigned>(mode));
    EXPECT_EQ(set.status().message(),
              path + ": mode " + want +
                  " lets group or others read or write the tokens; chmod 600 " + path);
  }
  for (mode_t mode : {0600, 0400}) {
    auto set = TokenSet::FromFile(WriteFile("tight", text, mode));
    ASSERT_TRUE(set.ok()) << set.status();
    EXPECT_EQ(set->RoleOf("r-1"), Role::kReader);
  }
  auto missing = TokenSet::FromFile("/nonexistent/tokens");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message().substr(0, 30), "/nonexistent/tokens: cannot re");
}

TEST(TokenSetTest, FromEnvironment) {
  ::unsetenv("TOUCHSTONE_WORKER_TOKEN");
  ::unsetenv("TOUCHSTONE_READER_TOKEN");
  ::unsetenv("TOUCHSTONE_ADMIN_TOKEN");
  auto none = TokenSet::FromEnvironment();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->open());
  ::setenv("TOUCHSTONE_WORKER_TOKEN", "env-w", 1);
  ::setenv("TOUCHSTONE_READER_TOKEN", "", 1);  // empty: none for that role
  ::setenv("TOUCHSTONE_ADMIN_TOKEN", "env-a", 1);
  auto set = TokenSet::FromEnvironment();
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->size(), 2u);
  EXPECT_EQ(set->RoleOf("env-w"), Role::kWorker);
  EXPECT_EQ(set->RoleOf("env-a"), Role::kAdmin);
  EXPECT_EQ(ClientTokenFromEnvironment({Role::kReader, Role::kAdmin}), "env-a");
  ::setenv("TOUCHSTONE_ADMIN_TOKEN", "env-w", 1);
  auto dup = TokenSet::FromEnvironment();
  EXPECT_EQ(dup.status().message(),
            "TOUCHSTONE_ADMIN_TOKEN: token: already in the set (one token, one role)");
  ::unsetenv("TOUCHSTONE_WORKER_TOKEN");
  ::unsetenv("TOUCHSTONE_READER_TOKEN");
  ::unsetenv("TOUCHSTONE_ADMIN_TOKEN");
}

TEST(TokenSetTest, CheckAnswersUnauthenticatedOrPermissionDeniedNamingMethodAndRole) {
  TokenSet set;
  EXPECT_TRUE(set.Check(std::nullopt, Role::kAdmin, "CreateSweep").ok());  // open
  ASSERT_TRUE(set.Add(Role::kWorker, "w").ok());
  ASSERT_TRUE(set.Add(Role::kReader, "r").ok());
  ASSERT_TRUE(set.Add(Role::kAdmin, "a").ok());
  auto none = set.Check(std::nullopt, Role::kReader, "GetSweep");
  EXPECT_EQ(none.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(none.message(), "GetSweep: no bearer token (authorization: Bearer TOKEN)");
  EXPECT_EQ(set.Check("Basic r", Role::kReader, "GetSweep").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(set.Check("Bearer ", Role::kReader, "GetSweep").code(),
            absl::StatusCode::kUnauthenticated);
  auto wrong = set.Check("Bearer x", Role::kReader, "GetSweep");
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(wrong.message(), "GetSweep: unknown bearer token");
  auto denied = set.Check("Bearer w", Role::kReader, "GetSweep");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(), "GetSweep: the worker role may not call it (it needs reader or admin)");
  EXPECT_EQ(set.Check("Bearer r", Role::kAdmin, "CreateSweep").message(),
            "CreateSweep: the reader role may not call it (it needs admin)");
  EXPECT_TRUE(set.Check("Bearer r", Role::kReader, "GetSweep").ok());
  EXPECT_TRUE(set.Check("bearer r", Role::kReader, "GetSweep").ok());
  EXPECT_TRUE(set.Check("Bearer w", Role::kWorker, "LeaseShard").ok());
  for (Role needed : {Role::kWorker, Role::kReader, Role::kAdmin}) {
    EXPECT_TRUE(set.Check("Bearer a", needed, "m").ok());
  }
}

TEST(ClientTokenTest, PicksTheFirstPreferredRole) {
  const std::string path = WriteFile("client", "worker w\nreader r\nadmin a\n", 0600);
  EXPECT_EQ(*ReadClientToken(path, {Role::kWorker, Role::kAdmin}), "w");
  EXPECT_EQ(*ReadClientToken(path, {Role::kReader, Role::kAdmin}), "r");
  const std::string only_admin = WriteFile("client_admin", "admin a\n", 0600);
  EXPECT_EQ(*ReadClientToken(only_admin, {Role::kReader, Role::kAdmin}), "a");
  auto missing = ReadClientToken(only_admin, {Role::kWorker});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), only_admin + ": holds no worker token");
  const std::string bare = WriteFile("client_bare", "legacy\n", 0644);
  EXPECT_EQ(*ReadClientToken(bare, {Role::kWorker, Role::kAdmin}), "legacy");
}

TEST(TokensFileTest, MadeOnceWithModeSixHundredAndOneRandomTokenPerRole) {
  const std::string path = ::testing::TempDir() + "auth_test_made_" + std::to_string(::getpid());
  fs::remove(path);
  auto made = LoadOrMakeTokensFile(path);
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->size(), 3u);
  std::set<std::string> distinct;
  for (const auto& [role, token] : *made) {
    EXPECT_EQ(token.size(), 64u);
    EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos);
    distinct.insert(token);
  }
  EXPECT_EQ(distinct.size(), 3u);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  auto set = TokenSet::FromFile(path);
  ASSERT_TRUE(set.ok()) << set.status();
  for (const auto& [role, token] : *made) EXPECT_EQ(set->RoleOf(token), role);
  auto again = LoadOrMakeTokensFile(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *made);  // kept across runs

  ::chmod(path.c_str(), 0644);
  EXPECT_EQ(LoadOrMakeTokensFile(path).status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string legacy = WriteFile("made_legacy", "bare\n", 0600);
  auto remade = LoadOrMakeTokensFile(legacy);  // a single-token file is replaced by three
  ASSERT_TRUE(remade.ok()) << remade.status();
  EXPECT_EQ(remade->size(), 3u);
  EXPECT_EQ(TokenSet::FromFile(legacy)->size(), 3u);
}

}  // namespace
}  // namespace ts::common
