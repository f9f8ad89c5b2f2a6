// The query commands' table (query.cc) without a scheduler: each answers --help with its own
// usage, refuses bad flags before it calls anything, and a scheduler that does not answer is
// exit 3 naming the method.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/usage.h"
#include "services/common/flags.h"
#include "services/common/flags_test_util.h"

namespace ts::cli {
namespace {

using flags::testing::Capture;
using flags::testing::Outcome;

Outcome Touchstone(const std::vector<std::string>& args) {
  flags::Program program("touchstone", "test");
  AddQueryCommands(program);
  BindProgram(&program);
  Outcome o = Capture([&] { return program.Run(args); });
  BindProgram(nullptr);
  return o;
}

TEST(QueryCommandsTest, EveryCommandPrintsItsOwnUsageForHelp) {
  Outcome list = Touchstone({"help", "--list", "--all"});
  ASSERT_EQ(list.rc, 0) << list.err;
  for (const char* expected :
       {"sweeps", "summary", "model", "ops", "breaks", "suspects", "compare", "gate", "alerts",
        "alerts ack", "alerts watch", "alerts quarantine", "detect"}) {
    EXPECT_NE(list.out.find(std::string(expected) + "\n"), std::string::npos) << expected;
  }
  std::istringstream lines(list.out);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> args;
    std::istringstream ws(line);
    for (std::string w; ws >> w;) args.push_back(w);
    args.push_back("--help");
    Outcome o = Touchstone(args);
    EXPECT_EQ(o.rc, 0) << line << "\n" << o.err;
    EXPECT_EQ(o.out.rfind("usage: touchstone " + line, 0), 0u) << o.out;
  }
}

TEST(QueryCommandsTest, TheClientFlagsAreOnEveryCommandThatCallsTheScheduler) {
  for (const char* cmd : {"sweeps", "summary", "gate", "alerts", "detect"}) {
    Outcome o = Touchstone({cmd, "--help"});
    for (const char* flag :
         {"--scheduler HOST:PORT", "--token-file FILE", "--tls-ca FILE", "--format json|text"}) {
      EXPECT_NE(o.out.find(flag), std::string::npos) << cmd << " lacks " << flag << "\n" << o.out;
    }
  }
  Outcome ack = Touchstone({"alerts", "ack", "--help"});
  EXPECT_NE(ack.out.find("--note TEXT"), std::string::npos) << ack.out;
  EXPECT_NE(ack.out.find("--scheduler HOST:PORT"), std::string::npos) << ack.out;
}

struct Bad {
  std::vector<std::string> args;
  std::string names;
};

TEST(QueryCommandsTest, BadFlagsExitTwoNamingThemBeforeAnyCall) {
  // 127.0.0.1:1 answers nothing: a command that got as far as calling would exit 3, not 2.
  const std::vector<Bad> cases = {
      {{"summary", "5", "--bogus"}, "unknown argument '--bogus'"},
      {{"summary", "five"}, "SWEEP: expected an integer, got 'five'"},
      {{"summary", "5", "--by", "colour"}, "--by: 'colour' is not task, family, arch or class"},
      {{"summary"}, "SWEEP is required"},
      {{"model", "gpt2", "--last", "101"}, "--last: expected 1..100, got '101'"},
      {{"ops", "5", "--mode", "train"}, "--mode: 'train' is not eager or compile"},
      {{"suspects", "5", "--mode", "fast"}, "--mode: 'fast' is not eager, compile or train"},
      {{"compare", "5"}, "HEAD is required"},
      {{"sweeps", "--limit", "0"}, "--limit: expected 1..100000, got '0'"},
      {{"gate", "5"}, "--rules is required"},
      {{"alerts", "--note", "x"}, "unknown argument '--note'"},
      {{"alerts", "ack", "5"}, "--note is required"},
      {{"alerts", "--state", "closed"}, "--state: 'closed' is not open, acknowledged or resolved"},
      {{"alerts", "watch", "--updates", "0"}, "--updates: expected 1..1000000000, got '0'"},
      {{"detect", "5", "--baseline", "x"}, "--baseline: expected an integer, got 'x'"},
      {{"sweeps", "--scheduler", "localhost"}, "--scheduler: expected HOST:PORT, got 'localhost'"},
      {{"sweeps", "--format", "yaml"}, "--format: 'yaml' is not json or text"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--scheduler", "127.0.0.1:1"});
    if (c.names.find("--scheduler") != std::string::npos) args.resize(c.args.size());
    Outcome o = Touchstone(args);
    EXPECT_EQ(o.rc, 2) << c.names << "\n" << o.err;
    EXPECT_NE(o.err.find(c.names), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("usage: touchstone " + c.args[0]), std::string::npos) << o.err;
  }
}

TEST(QueryCommandsTest, NoAnswerIsExitThreeNamingTheMethod) {
  Outcome o = Touchstone({"summary", "5", "--scheduler", "127.0.0.1:1"});
  EXPECT_EQ(o.rc, 3) << o.err;
  EXPECT_NE(o.err.find("touchstone summary: GetSummary: UNAVAILABLE"), std::string::npos) << o.err;
  o = Touchstone({"alerts", "ack", "4", "--note", "seen", "--scheduler", "127.0.0.1:1"});
  EXPECT_EQ(o.rc, 3) << o.err;
  EXPECT_NE(o.err.find("AckAlert: UNAVAILABLE"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace ts::cli
