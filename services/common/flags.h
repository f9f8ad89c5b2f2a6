// Command-line flags for every Touchstone program: `touchstone` and its subcommands, the
// services' mains, the benches. A command declares its flags and positionals bound to the
// caller's variables, one line each; CLI11 (Debian libcli11-dev) parses them. flags.cc is the only
// file that includes CLI11: its header costs ~10 s a translation unit.
//
//   ts::flags::Program p("touchstone-worker", "runs models for a scheduler");
//   p.Option("--scheduler", &o.scheduler, "HOST:PORT", "the scheduler").Required();
//   p.Option("--report-batch", &o.report_batch, "N", "results per report").Range(1, 1000);
//   p.Flag("--no-isolate", &isolate, "run in this process", /*value=*/false);
//   if (auto rc = p.Parse(argc, argv)) return *rc;
//
// A program with subcommands builds a tree (`Add` a command with its action, `Group` a command
// that only holds others) and calls `Run`, which parses, prints help or the error, and runs the
// named command's action. Every command answers `-h` / `--help` with its own usage on stdout
// (exit 0); a program with subcommands also has `help [--list [--all]] [COMMAND...]` and
// `completion bash` (the bash completion script, generated from the same tree). `--version`
// prints the version CMake configured (project version and `git describe`).
//
// Errors: a bad, unknown or missing flag or positional is a usage error: "PROGRAM CMD: why"
// naming the flag, then the command's synopsis, on stderr; exit 2. Numbers are checked whole
// ("12x" is refused) and against `Range`; `Choices` names the allowed values.
//
// Thread-safety: build and parse on one thread (main); the bound variables are written during
// Parse / Run only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace ts::flags {

// A command's work, run once its flags are parsed: returns the process exit code.
using Action = std::function<int()>;

// What shell completion offers for a value, and how the synopsis shows it.
enum class ValueKind { kText, kFile, kDir, kChoice };

// One declared flag or positional. Modifiers return *this, so a declaration is one chain.
class Arg {
 public:
  Arg& Required();
  // The environment variable stands in for an absent flag (checked like the flag).
  Arg& Env(const std::string& variable);
  // Numbers only: lo <= value <= hi.
  Arg& Range(double lo, double hi);
  // Numbers only: value >= lo; value > 0.
  Arg& Min(double lo);
  Arg& Positive();
  // The default --help shows ("" shows none); else the bound variable's value at declaration.
  Arg& Default(std::string shown);
  // The value (each element of a list) is one of `values`; completion offers them.
  Arg& Choices(std::vector<std::string> values);
  // Lists: "a,b" adds two elements (also repeatable: --modes a --modes b).
  Arg& Split(char separator);
  // Completion offers file (folder) names.
  Arg& File();
  Arg& Dir();
  // A check of the text before it is converted: returns "" or why it is bad (printed after
  // the flag's name); may rewrite the text (e.g. "all" -> "0").
  Arg& Check(std::function<std::string(std::string&)> check);
  // Giving both this and `other` (a flag of the same command) is a usage error.
  Arg& Excludes(const std::string& other);

  const std::string& name() const { return name_; }
  const std::string& value() const { return value_; }  // "FILE", "N", "" for a switch
  const std::string& help() const { return help_; }
  bool required() const { return required_; }
  bool positional() const { return positional_; }
  bool repeatable() const { return repeatable_; }
  ValueKind kind() const { return kind_; }
  const std::vector<std::string>& choices() const { return choices_; }

 private:
  friend class Command;
  Arg(CLI::Option* option, std::string name, std::string value, std::string help);
  CLI::Option* option_;
  std::string name_, value_, help_;
  bool required_ = false, positional_ = false, repeatable_ = false, numeric_ = false;
  bool integral_ = false;
  ValueKind kind_ = ValueKind::kText;
  std::vector<std::string> choices_;
  std::string default_;
  bool default_set_ = false;
};

class Command {
 public:
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;
  virtual ~Command();

  // --name: sets *out = value when given.
  Arg& Flag(const std::string& name, bool* out, const std::string& help, bool value = true);
  // --name VALUE. `value` is the placeholder the usage shows ("FILE", "N", "json|text").
  Arg& Option(const std::string& name, std::string* out, const std::string& value,
              const std::string& help);
  Arg& Option(const std::string& name, int64_t* out, const std::string& value,
              const std::string& help);
  Arg& Option(const std::string& name, uint64_t* out, const std::string& value,
              const std::string& help);
  Arg& Option(const std::string& name, int* out, const std::string& value, const std::string& help);
  Arg& Option(const std::string& name, double* out, const std::string& value,
              const std::string& help);
  // Repeatable: each --name VALUE adds one element.
  Arg& Option(const std::string& name, std::vector<std::string>* out, const std::string& value,
              const std::string& help);
  Arg& Option(const std::string& name, std::vector<int64_t>* out, const std::string& value,
              const std::string& help);
  // Positionals, in declaration order; a vector takes the rest.
  Arg& Positional(const std::string& name, std::string* out, const std::string& help);
  Arg& Positional(const std::string& name, int64_t* out, const std::string& help);
  Arg& Positional(const std::string& name, std::vector<std::string>* out, const std::string& help);

  // A subcommand that runs `action` (it may have subcommands of its own too).
  Command& Add(const std::string& name, const std::string& summary, Action action);
  // A subcommand that only holds others: one of them must follow.
  Command& Group(const std::string& name, const std::string& summary);
  // Text printed after the flags in --help: defaults, exit codes, examples.
  Command& Notes(const std::string& text);

  const std::string& name() const { return name_; }
  const std::string& summary() const { return summary_; }
  // The command as typed: "touchstone db prune".
  std::string path() const;
  const std::vector<std::unique_ptr<Arg>>& args() const { return args_; }
  const std::vector<std::unique_ptr<Command>>& subcommands() const { return subs_; }
  bool has_action() const { return static_cast<bool>(action_); }
  // "usage: touchstone db prune [--db URL] ...", wrapped at 100 columns.
  std::string Synopsis() const;
  // Synopsis, summary, the flags and positionals with their help, subcommands, notes.
  std::string Help() const;
  // Prints "PATH: why", the synopsis and where the full help is, on stderr; returns 2.
  int UsageError(const std::string& why) const;
  // Prints "PATH: why" on stderr; returns 1.
  int Failure(const std::string& why) const;

 protected:
  Command(CLI::App* app, Command* parent, std::string name, std::string summary);
  Arg& Keep(CLI::Option* option, const std::string& name, const std::string& value,
            const std::string& help);

  CLI::App* app_;
  Command* parent_;
  std::string name_, summary_, notes_;
  Action action_;
  bool group_ = false;
  std::vector<std::unique_ptr<Arg>> args_;
  std::vector<std::unique_ptr<Command>> subs_;

  friend class Program;
};

// The root command: owns the parser.
class Program : public Command {
 public:
  Program(const std::string& name, const std::string& summary);
  ~Program() override;

  // For a program without subcommands: parses argv. nullopt: go on, the variables are set;
  // else the exit code, the help, version or error already printed (0 for --help / --version,
  // 2 for a usage error).
  std::optional<int> Parse(int argc, const char* const* argv);
  std::optional<int> Parse(const std::vector<std::string>& args);  // without argv[0]

  // For a program with subcommands: parses argv and runs the named command's action; adds
  // `help` and `completion` first. No command at all: the help on stderr, exit 2.
  int Run(int argc, const char* const* argv);
  int Run(const std::vector<std::string>& args);  // without argv[0]

  // The command that runs (or ran) after Run parsed; null before.
  const Command* running() const { return running_; }
  // Top-level command names, one each; with `all`, every command path below the program
  // ("db prune"), groups included.
  std::vector<std::string> List(bool all) const;
  // A bash script defining `_<name>` and `complete -F _<name> <name>`: subcommands at each
  // level, each command's flags, and a flag's values (choices, files, folders).
  std::string BashCompletion() const;
  // "NAME VERSION": the CMake project version and `git describe` at configure time.
  std::string VersionLine() const;

 private:
  std::optional<int> ParseTree(std::vector<std::string> args);
  void AddBuiltins();
  const Command* Find(const std::vector<std::string>& words) const;

  std::unique_ptr<CLI::App> root_;
  const Command* running_ = nullptr;
  bool builtins_ = false;
  // `help` and `completion`'s own flags.
  bool help_list_ = false, help_all_ = false;
  std::vector<std::string> help_words_;
  std::string completion_shell_ = "bash", completion_out_;
};

// The version string CMake configured: "0.1.0 (9d2d62f-dirty)".
const char* Version();

}  // namespace ts::flags
