// The embedded default's secrets and durability (issue 14): a generated password in a 0600
// libpq password file that the URL names, scram-sha-256 for every connection, fsync on unless
// fast_unsafe, and a cluster made before passwords (trust) converted on its next start.
#include "services/store/embedded_postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

namespace ts::store {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class EmbeddedPostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ts-embedded-pg-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    opts_.data_dir = (dir_ / "pg" / "data").string();
  }
  void TearDown() override {
    pg_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Setting(const std::string& name) {
    pqxx::connection c(pg_->url());
    pqxx::nontransaction n(c);
    return n.exec("SHOW " + name)[0][0].c_str();
  }
  fs::path dir_;
  EmbeddedPostgresOptions opts_;
  std::unique_ptr<EmbeddedPostgres> pg_;
};

TEST_F(EmbeddedPostgresTest, PasswordFileIsPrivateTheUrlHoldsNoSecretAndFsyncIsOn) {
  auto pg = EmbeddedPostgres::Start(opts_);
  ASSERT_TRUE(pg.ok()) << pg.status();
  pg_ = std::move(*pg);
  const fs::path passfile = pg_->password_file();
  struct stat st {};
  ASSERT_EQ(::stat(passfile.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string line = ReadAll(passfile);
  std::smatch m;
  ASSERT_TRUE(std::regex_match(line, m, std::regex(R"(\*:\*:\*:touchstone:([0-9a-f]{32})\n)")))
      << line;
  const std::string password = m[1];
  EXPECT_EQ(pg_->url().find(password), std::string::npos);
  EXPECT_NE(pg_->url().find("passfile="), std::string::npos);
  // Through the URL (the password file) it connects; the default is durable.
  EXPECT_EQ(Setting("fsync"), "on");
  EXPECT_EQ(Setting("full_page_writes"), "on");
  EXPECT_EQ(Setting("password_encryption"), "scram-sha-256");
  const std::string port = std::to_string(pg_->port());
  // Without the password file the server asks for a password and refuses a wrong one.
  EXPECT_THROW(pqxx::connection("postgresql://touchstone@127.0.0.1:" + port +
                                "/touchstone?passfile=/dev/null"),
               pqxx::broken_connection);
  EXPECT_THROW(pqxx::connection("postgresql://touchstone:wrong@127.0.0.1:" + port +
                                "/touchstone?passfile=/dev/null"),
               pqxx::broken_connection);
  EXPECT_NO_THROW(pqxx::connection("postgresql://touchstone:" + password + "@127.0.0.1:" + port +
                                   "/touchstone?passfile=/dev/null"));
  // Every pg_hba line asks for scram-sha-256; none trusts.
  const std::string hba = ReadAll(fs::path(opts_.data_dir) / "pg_hba.conf");
  EXPECT_EQ(std::regex_search(hba, std::regex(R"(\ntrust|\strust\s*\n)")), false) << hba;
}

TEST_F(EmbeddedPostgresTest, FastUnsafeTurnsFsyncOffAndOnAgainOnTheNextStart) {
  opts_.fast_unsafe = true;
  auto pg = EmbeddedPostgres::Start(opts_);
  ASSERT_TRUE(pg.ok()) << pg.status();
  pg_ = std::move(*pg);
  EXPECT_EQ(Setting("fsync"), "off");
  EXPECT_EQ(Setting("full_page_writes"), "off");
  pg_.reset();
  opts_.fast_unsafe = false;
  pg = EmbeddedPostgres::Start(opts_);
  ASSERT_TRUE(pg.ok()) << pg.status();
  pg_ = std::move(*pg);
  EXPECT_EQ(Setting("fsync"), "on");
}

TEST_F(EmbeddedPostgresTest, ClusterMadeWithTrustGetsAPasswordOnItsNextStartAndKeepsItsData) {
  auto pg = EmbeddedPostgres::Start(opts_);
  ASSERT_TRUE(pg.ok()) << pg.status();
  pg_ = std::move(*pg);
  {
    pqxx::connection c(pg_->url());
    pqxx::nontransaction n(c);
    n.exec("CREATE TABLE kept (v int)");
    n.exec("INSERT INTO kept VALUES (42)");
  }
  pg_.reset();  // stopped
  // What an older touchstone left: trust for everyone and no password file.
  const fs::path hba = fs::path(opts_.data_dir) / "pg_hba.conf";
  std::string text = ReadAll(hba);
  text = std::regex_replace(text, std::regex("scram-sha-256"), "trust");
  std::ofstream(hba, std::ios::trunc) << text;
  const std::string passfile = (dir_ / "pg" / "pgpass").string();
  fs::remove(passfile);
  pg = EmbeddedPostgres::Start(opts_);
  ASSERT_TRUE(pg.ok()) << pg.status();
  pg_ = std::move(*pg);
  ASSERT_TRUE(fs::exists(passfile));
  EXPECT_EQ(ReadAll(hba).find(" trust\n"), std::string::npos);
  pqxx::connection c(pg_->url());
  pqxx::nontransaction n(c);
  EXPECT_EQ(n.exec("SELECT v FROM kept")[0][0].as<int>(), 42);
  EXPECT_THROW(pqxx::connection("postgresql://touchstone@127.0.0.1:" +
                                std::to_string(pg_->port()) + "/touchstone?passfile=/dev/null"),
               pqxx::broken_connection);
}

}  // namespace
}  // namespace ts::store
