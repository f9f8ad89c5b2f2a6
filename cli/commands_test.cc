// The whole `touchstone` command table in process (commands.cc): every command and subcommand
// answers --help, -h and `help CMD` with its own usage, and refuses an unknown flag or a bad
// value naming it, before its action runs. tests/cli_test.cc runs the built binary for the
// top-level commands and the completion script.
#include "cli/commands.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/usage.h"
#include "services/common/flags.h"
#include "services/common/flags_test_util.h"

namespace ts::cli {
namespace {

using flags::testing::Capture;
using flags::testing::Outcome;

std::unique_ptr<flags::Program> NewTouchstone() {
  auto p = std::make_unique<flags::Program>("touchstone", "test");
  AddTouchstoneCommands(*p);
  return p;
}

// `touchstone ARGS` in this process. A fresh table each time: a parse fills its variables.
Outcome Touchstone(const std::vector<std::string>& args) {
  std::unique_ptr<flags::Program> p = NewTouchstone();
  BindProgram(p.get());
  Outcome o = Capture([&] { return p->Run(args); });
  BindProgram(nullptr);
  return o;
}

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> w;
  std::istringstream in(line);
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

std::vector<std::string> AllPaths() {
  std::unique_ptr<flags::Program> p = NewTouchstone();
  Outcome o = Capture([&] { return p->Run({"help", "--list", "--all"}); });
  EXPECT_EQ(o.rc, 0) << o.err;
  std::vector<std::string> paths;
  std::istringstream in(o.out);
  for (std::string line; std::getline(in, line);) paths.push_back(line);
  return paths;
}

TEST(CommandsTest, TheTableHoldsEveryCommandOfTheReadme) {
  const std::vector<std::string> paths = AllPaths();
  for (const char* c : {"run-model",
                        "summarize",
                        "zoo",
                        "zoo list",
                        "zoo supports",
                        "zoo export",
                        "catalog",
                        "catalog generate",
                        "catalog import",
                        "run-catalog",
                        "sweep",
                        "serve",
                        "submit",
                        "schedule",
                        "schedule add",
                        "schedule list",
                        "schedule rm",
                        "schedule enable",
                        "schedule disable",
                        "db",
                        "db migrate",
                        "db prune",
                        "db workers",
                        "sweeps",
                        "summary",
                        "model",
                        "ops",
                        "breaks",
                        "suspects",
                        "compare",
                        "gate",
                        "alerts",
                        "alerts ack",
                        "alerts watch",
                        "alerts quarantine",
                        "detect",
                        "help",
                        "completion"}) {
    EXPECT_NE(std::find(paths.begin(), paths.end(), c), paths.end()) << c;
  }
}

TEST(CommandsTest, EveryCommandAnswersHelpWithItsOwnUsage) {
  for (const std::string& path : AllPaths()) {
    std::vector<std::vector<std::string>> asks;
    for (const char* flag : {"--help", "-h"}) {
      asks.push_back(Words(path));
      asks.back().push_back(flag);
    }
    asks.push_back(Words("help " + path));
    for (const auto& args : asks) {
      Outcome o = Touchstone(args);
      EXPECT_EQ(o.rc, 0) << args.back() << " of " << path << "\n" << o.err;
      EXPECT_EQ(o.out.rfind("usage: touchstone " + path, 0), 0u)
          << args.back() << " of " << path << " printed:\n"
          << o.out.substr(0, 300);
      EXPECT_EQ(o.err, "") << path;
    }
  }
}

TEST(CommandsTest, AnUnknownFlagOfEveryCommandExitsTwoNamingIt) {
  for (const std::string& path : AllPaths()) {
    std::vector<std::string> args = Words(path);
    args.push_back("--no-such-flag");
    Outcome o = Touchstone(args);
    EXPECT_EQ(o.rc, 2) << path << "\n" << o.err;
    EXPECT_NE(o.err.find("touchstone " + path + ": unknown argument '--no-such-flag'"),
              std::string::npos)
        << path << "\n"
        << o.err;
    EXPECT_NE(o.err.find("usage: touchstone " + path), std::string::npos) << o.err;
    EXPECT_EQ(o.out, "") << path;
  }
}

TEST(CommandsTest, BadValuesExitTwoNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run-model", "--config", "c.json", "--profile", "p.json", "--seed", "x"},
       "--seed: expected an integer >= 0, got 'x'"},
      {{"run-model", "--config", "c.json", "--profile", "p.json", "--timeout-s", "0"},
       "--timeout-s: expected a number > 0, got '0'"},
      {{"run-model", "--config", "c.json", "--profile", "p.json", "--modes", "eager,fast"},
       "--modes: 'fast' is not eager, compile or train"},
      {{"run-model", "--config", "c.json"}, "--profile is required"},
      {{"run-catalog", "--catalog", "c", "--profile", "p", "--sample", "0"},
       "--sample: expected >= 1, got '0'"},
      {{"sweep", "--workers", "300"}, "--workers: expected 0..256, got '300'"},
      {{"sweep", "--sample", "some"}, "--sample: expected a count >= 1 or 'all', got 'some'"},
      {{"db", "prune", "--older-than", "soon"}, "--older-than: expected a number, got 'soon'"},
      {{"db", "prune", "--db", "postgresql://x", "--state-dir", "y"}, "excludes"},
      {{"db", "migrate"}, "--db is required"},
      {{"serve", "--lease-ttl", "-3"}, "--lease-ttl: expected a number > 0, got '-3'"},
      {{"submit", "--profile", "p", "--baseline", "yesterday"},
       "--baseline: expected 'latest' or a sweep id, got 'yesterday'"},
      {{"submit", "--profile", "p", "--shard-models", "0"}, "--shard-models: expected 1..10000"},
      {{"schedule", "add", "nightly", "--cron", "0 2 * * *", "--profile", "p", "--priority", "-1"},
       "--priority: expected 0..1000000, got '-1'"},
      {{"schedule", "add", "--cron", "0 2 * * *", "--profile", "p"}, "NAME is required"},
      {{"schedule", "rm"}, "NAME is required"},
      {{"zoo", "list", "--format", "xml"}, "--format: 'xml' is not json or text"},
      {{"zoo", "export", "--arch", "X"}, "--out is required"},
      {{"catalog", "generate", "--count", "0", "--out", "x"}, "--count: expected >= 1, got '0'"},
      {{"catalog", "import", "in.jsonl"}, "--out is required"},
      {{"summary", "abc"}, "SWEEP: expected an integer, got 'abc'"},
      {{"db"}, "expected a command: migrate, prune or workers"},
      {{"schedule", "pause"}, "unknown argument 'pause'"},
  };
  for (const auto& [args, names] : cases) {
    Outcome o = Touchstone(args);
    EXPECT_EQ(o.rc, 2) << names << "\n" << o.err;
    EXPECT_NE(o.err.find(names), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("usage: touchstone " + args[0]), std::string::npos) << o.err;
    EXPECT_EQ(o.out, "") << names;
  }
}

TEST(CommandsTest, AnUnknownFlagIsNamedBeforeAMissingRequiredOne) {
  Outcome o = Touchstone({"run-model", "--confg", "c.json"});
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("unknown argument '--confg'"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace ts::cli
