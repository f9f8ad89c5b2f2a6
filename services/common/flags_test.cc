// The flags library on a small command tree: values land in the bound variables, every bad
// value or unknown flag is a usage error (exit 2) naming the flag, --help / help print the
// command's own usage (exit 0), and the bash completion script, run in a real bash, completes
// commands, flags and their values.
#include "services/common/flags.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "services/common/flags_test_util.h"

namespace ts::flags {
namespace {

using testing::Capture;
using testing::Outcome;

// A small `tool` with the shapes the real commands use: a group with subcommands, positionals,
// repeatable and split lists, choices, ranges, a negative switch, exclusive flags, env.
struct Tool {
  std::unique_ptr<Program> program = std::make_unique<Program>("tool", "a test tool");
  std::string ran;
  std::string db, state_dir = ".state", format = "text", profile;
  std::vector<int64_t> sweeps;
  std::vector<std::string> modes, tasks;
  double days = -1;
  int64_t keep = -1, sample = 1000, sweep = 0;
  int workers = 0;
  bool dry = false, audit = true;

  Tool() {
    Command& db_group = program->Group("db", "the database");
    Command& prune = db_group.Add("prune", "drop finished sweeps", [this] {
      ran = "db prune";
      return 0;
    });
    prune.Option("--db", &db, "URL", "a database");
    prune.Option("--state-dir", &state_dir, "DIR", "a state folder").Dir().Excludes("--db");
    prune.Option("--sweep", &sweeps, "ID", "this sweep").Min(1);
    prune.Option("--older-than", &days, "DAYS", "finished before").Min(0).Default("");
    prune.Option("--keep", &keep, "N", "the newest N").Min(0);
    prune.Flag("--dry-run", &dry, "say what");
    db_group.Add("migrate", "apply migrations", [this] {
      ran = "db migrate";
      return 0;
    });
    Command& sweep_cmd = program->Add("sweep", "a sweep", [this] {
      ran = "sweep";
      return 7;
    });
    sweep_cmd.Option("--sample", &sample, "N|all", "models").Check([](std::string& v) {
      if (v == "all") v = "0";
      return std::string();
    });
    sweep_cmd.Option("--workers", &workers, "W", "processes").Range(0, 256);
    sweep_cmd.Option("--modes", &modes, "MODES", "modes")
        .Split(',')
        .Choices({"eager", "compile", "train"});
    sweep_cmd.Option("--format", &format, "json|text", "output").Choices({"json", "text"});
    sweep_cmd.Option("--profile", &profile, "FILE", "a profile").File().Env("FLAGS_TEST_PROFILE");
    sweep_cmd.Flag("--no-audit-ops", &audit, "no audit", false);
    Command& summary = program->Add("summary", "the table", [this] {
      ran = "summary";
      return 0;
    });
    summary.Positional("SWEEP", &sweep, "the sweep id").Required().Min(1);
    summary.Option("--task", &tasks, "T", "only this task");
  }

  Outcome Run(const std::vector<std::string>& args) {
    return Capture([&] { return program->Run(args); });
  }
};

TEST(FlagsTest, ValuesLandInTheBoundVariables) {
  Tool t;
  Outcome o = t.Run({"db", "prune", "--db", "postgres://x", "--sweep", "3", "--sweep", "5",
                     "--older-than", "1.5", "--keep", "2", "--dry-run"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(t.ran, "db prune");
  EXPECT_EQ(t.db, "postgres://x");
  EXPECT_EQ(t.sweeps, (std::vector<int64_t>{3, 5}));
  EXPECT_DOUBLE_EQ(t.days, 1.5);
  EXPECT_EQ(t.keep, 2);
  EXPECT_TRUE(t.dry);
  EXPECT_EQ(t.state_dir, ".state");  // untouched default
}

TEST(FlagsTest, TheActionsExitCodeIsRunsExitCode) {
  Tool t;
  Outcome o = t.Run({"sweep", "--sample", "all", "--modes", "eager,train", "--no-audit-ops",
                     "--format=json", "--workers", "0"});
  EXPECT_EQ(o.rc, 7) << o.err;
  EXPECT_EQ(t.sample, 0);
  EXPECT_EQ(t.modes, (std::vector<std::string>{"eager", "train"}));
  EXPECT_FALSE(t.audit);
  EXPECT_EQ(t.format, "json");
}

TEST(FlagsTest, FlagsAndPositionalsMixAndRepeatedFlagsTakeOneValueEach) {
  Tool t;
  Outcome o = t.Run({"summary", "--task", "a", "12", "--task", "b"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(t.sweep, 12);
  EXPECT_EQ(t.tasks, (std::vector<std::string>{"a", "b"}));
}

TEST(FlagsTest, AFlagGivenTwiceKeepsTheLast) {
  Tool t;
  Outcome o = t.Run({"sweep", "--format", "json", "--format", "text"});
  EXPECT_EQ(o.rc, 7) << o.err;
  EXPECT_EQ(t.format, "text");
}

TEST(FlagsTest, NegativeNumbersAreValues) {
  Tool t;
  Outcome o = t.Run({"db", "prune", "--keep", "-1"});
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("--keep: expected >= 0, got '-1'"), std::string::npos) << o.err;
}

TEST(FlagsTest, EnvironmentStandsInForAnAbsentFlag) {
  ::setenv("FLAGS_TEST_PROFILE", "/from/env.json", 1);
  Tool t;
  Outcome o = t.Run({"sweep"});
  ::unsetenv("FLAGS_TEST_PROFILE");
  EXPECT_EQ(o.rc, 7) << o.err;
  EXPECT_EQ(t.profile, "/from/env.json");
  Tool given;
  ::setenv("FLAGS_TEST_PROFILE", "/from/env.json", 1);
  o = given.Run({"sweep", "--profile", "/given.json"});
  ::unsetenv("FLAGS_TEST_PROFILE");
  EXPECT_EQ(given.profile, "/given.json");
}

struct BadCase {
  std::vector<std::string> args;
  std::string names;  // the error names this
};

TEST(FlagsTest, BadInputExitsTwoNamingTheFlagWithTheCommandsSynopsis) {
  const std::vector<BadCase> cases = {
      {{"db", "prune", "--bogus"}, "tool db prune: unknown argument '--bogus'"},
      {{"db", "prune", "--older-than", "soon"}, "--older-than: expected a number, got 'soon'"},
      {{"db", "prune", "--sweep", "0"}, "--sweep: expected >= 1, got '0'"},
      {{"db", "prune", "--sweep", "12x"}, "--sweep: expected an integer, got '12x'"},
      {{"db", "prune", "--keep"}, "--keep: needs a value"},
      {{"db", "prune", "--db", "x", "--state-dir", "y"}, "excludes"},
      {{"sweep", "--modes", "eager,bogus"}, "--modes: 'bogus' is not eager, compile or train"},
      {{"sweep", "--format", "xml"}, "--format: 'xml' is not json or text"},
      {{"sweep", "--workers", "257"}, "--workers: expected 0..256, got '257'"},
      {{"sweep", "--sample", "lots"}, "--sample: expected an integer, got 'lots'"},
      {{"summary"}, "SWEEP is required"},
      {{"summary", "0"}, "SWEEP: expected >= 1, got '0'"},
      {{"summary", "3", "4"}, "unknown argument '4'"},
      {{"summary", "3", "--version"}, "unknown argument '--version'"},
      {{"db"}, "tool db: expected a command: prune or migrate"},
      {{"db", "purge"}, "unknown argument 'purge'"},
  };
  for (const auto& c : cases) {
    Tool t;
    Outcome o = t.Run(c.args);
    EXPECT_EQ(o.rc, 2) << c.args.back() << "\n" << o.err;
    EXPECT_NE(o.err.find(c.names), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("usage: tool " + c.args[0]), std::string::npos) << o.err;
    EXPECT_EQ(o.out, "") << c.args.back();
    EXPECT_EQ(t.ran, "") << "the action ran despite " << c.names;
  }
}

TEST(FlagsTest, NoCommandOrAnUnknownOnePrintsTheCommandListAndExitsTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{{}, {"frobnicate"}}) {
    Tool t;
    Outcome o = t.Run(args);
    EXPECT_EQ(o.rc, 2);
    EXPECT_NE(o.err.find("usage: tool COMMAND"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("summary"), std::string::npos) << o.err;
    if (!args.empty()) {
      EXPECT_NE(o.err.find("unknown command 'frobnicate'"), std::string::npos) << o.err;
    }
    EXPECT_EQ(o.out, "");
  }
}

TEST(FlagsTest, EveryCommandAnswersHelpWithItsOwnUsageAndExitsZero) {
  Tool lister;
  Outcome list = lister.Run({"help", "--list", "--all"});
  ASSERT_EQ(list.rc, 0) << list.err;
  EXPECT_EQ(list.out, "db\ndb prune\ndb migrate\nsweep\nsummary\nhelp\ncompletion\n");
  std::istringstream lines(list.out);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> words;
    std::istringstream ws(line);
    for (std::string w; ws >> w;) words.push_back(w);
    for (const char* flag : {"--help", "-h"}) {
      Tool t;
      std::vector<std::string> args = words;
      args.push_back(flag);
      Outcome o = t.Run(args);
      EXPECT_EQ(o.rc, 0) << line << " " << flag << "\n" << o.err;
      EXPECT_EQ(o.out.rfind("usage: tool " + line, 0), 0u) << line << "\n" << o.out;
      EXPECT_EQ(o.err, "");
      EXPECT_EQ(t.ran, "") << line;
    }
    Tool t;
    std::vector<std::string> args = {"help"};
    args.insert(args.end(), words.begin(), words.end());
    Outcome o = t.Run(args);
    EXPECT_EQ(o.rc, 0) << o.err;
    EXPECT_EQ(o.out.rfind("usage: tool " + line, 0), 0u) << o.out;
  }
}

TEST(FlagsTest, HelpListsFlagsWithValuesDefaultsAndRequirements) {
  Tool t;
  Outcome o = t.Run({"db", "prune", "--help"});
  ASSERT_EQ(o.rc, 0);
  EXPECT_NE(o.out.find("[--state-dir DIR]"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[--sweep ID]..."), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("(default .state)"), std::string::npos) << o.out;
  // --keep shows its default; --older-than hides its "not given" -1.
  ASSERT_NE(o.out.find("(default -1)"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("(default -1)"), o.out.rfind("(default -1)")) << o.out;
  Tool s;
  o = s.Run({"summary", "-h"});
  EXPECT_NE(o.out.find("usage: tool summary [--task T]... SWEEP"), std::string::npos) << o.out;
  Tool top;
  o = top.Run({"--help"});
  EXPECT_EQ(o.rc, 0);
  EXPECT_NE(o.out.find("  summary "), std::string::npos) << o.out;
  Tool unknown;
  o = unknown.Run({"help", "nope"});
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("no command 'nope'"), std::string::npos) << o.err;
}

TEST(FlagsTest, VersionPrintsTheConfiguredVersion) {
  Tool t;
  Outcome o = t.Run({"--version"});
  EXPECT_EQ(o.rc, 0);
  EXPECT_EQ(o.out, std::string("tool ") + Version() + "\n");
  EXPECT_STRNE(Version(), "unknown");
}

TEST(FlagsTest, ASingleCommandProgramParsesAndReportsLikeASubcommand) {
  Program p("prog", "one command");
  int n = 3;
  std::string name;
  p.Option("--n", &n, "N", "a count").Range(1, 10);
  p.Option("--name", &name, "NAME", "a name").Required();
  const std::vector<std::string> good = {"--name", "x", "--n", "4"};
  std::optional<int> rc;
  Outcome o = Capture([&] {
    rc = p.Parse(good);
    return 0;
  });
  EXPECT_FALSE(rc.has_value()) << o.err;
  EXPECT_EQ(n, 4);
  EXPECT_EQ(name, "x");
  Program q("prog", "one command");
  q.Option("--n", &n, "N", "a count").Range(1, 10);
  o = Capture([&] { return q.Parse(std::vector<std::string>{"--n", "11"}).value_or(-1); });
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("prog: --n: expected 1..10, got '11'"), std::string::npos) << o.err;
  Program h("prog", "one command");
  o = Capture([&] { return h.Parse(std::vector<std::string>{"--help"}).value_or(-1); });
  EXPECT_EQ(o.rc, 0);
  EXPECT_EQ(o.out.rfind("usage: prog", 0), 0u) << o.out;
}

// The generated script in a real bash: COMP_WORDS as bash would set them, then _tool.
std::string Complete(const std::string& script_path, const std::string& line) {
  const std::string cmd = "bash --norc -c 'source " + script_path +
                          "; read -ra COMP_WORDS <<< \"$1\"; [[ \"$1\" == *\" \" ]] && "
                          "COMP_WORDS+=(\"\"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _tool; "
                          "echo \"${COMPREPLY[*]}\"' _ '" +
                          line + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[256];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  if (p) ::pclose(p);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(FlagsTest, BashCompletionCompletesCommandsFlagsAndValues) {
  const std::string path = ::testing::TempDir() + "/tool-completion.bash";
  Tool t;
  Outcome o = t.Run({"completion", "bash", "--out", path});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(Complete(path, "tool d"), "db");
  EXPECT_EQ(Complete(path, "tool db "), "prune migrate");
  EXPECT_EQ(Complete(path, "tool db pr"), "prune");
  EXPECT_EQ(Complete(path, "tool db prune --st"), "--state-dir");
  EXPECT_EQ(Complete(path, "tool sweep --format "), "json text");
  EXPECT_EQ(Complete(path, "tool sweep --modes c"), "compile");
  // A flag's value is not taken for a command: "db" here is --format's (bad) value.
  EXPECT_EQ(Complete(path, "tool sweep --format db --no"), "--no-audit-ops");
  EXPECT_EQ(Complete(path, "tool su"), "summary");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ts::flags
