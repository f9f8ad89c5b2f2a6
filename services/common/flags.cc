#include "services/common/flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <type_traits>

#include "services/common/flags_internal.h"

#ifndef TS_VERSION
#define TS_VERSION "unknown"
#endif

namespace ts::flags {
namespace {

using internal::Join;

constexpr size_t kWidth = 100;  // help and synopsis columns

// "a, b or c".
std::string OneOf(const std::vector<std::string>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
  }
  return out;
}

// Words of `text` in lines of at most `width` columns, the first after `first`, the others
// indented by `indent` spaces.
std::string Wrap(const std::string& first, const std::string& text, size_t indent,
                 size_t width = kWidth) {
  std::string out = first;
  size_t col = first.size();
  std::istringstream words(text);
  bool line_empty = true;
  for (std::string w; words >> w;) {
    if (!line_empty && col + 1 + w.size() > width) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++col;
    }
    out += w;
    col += w.size();
    line_empty = false;
  }
  return out;
}

// Integers print without a fraction.
std::string Number(double v, bool integral) {
  char buf[64];
  if (integral) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

// The whole text is a decimal integer in [lo, hi].
bool ParseInteger(const std::string& s, long double lo, long double hi, long double* out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  if (lo >= 0 && s[0] == '-') return false;
  errno = 0;
  char* end = nullptr;
  const long double v = s[0] == '-' ? static_cast<long double>(std::strtoll(s.c_str(), &end, 10))
                                    : static_cast<long double>(std::strtoull(s.c_str(), &end, 10));
  if (errno == ERANGE || end == s.c_str() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool ParseReal(const std::string& s, double* out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end != s.c_str() && *end == '\0' && std::isfinite(*out);
}

// The check every number gets: the whole text is one of its type.
template <typename T>
CLI::Validator NumberCheck() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if constexpr (std::is_floating_point_v<T>) {
          double v = 0;
          return ParseReal(s, &v) ? "" : "expected a number, got '" + s + "'";
        } else {
          long double v = 0;
          const long double lo = static_cast<long double>(std::numeric_limits<T>::min());
          const long double hi = static_cast<long double>(std::numeric_limits<T>::max());
          if (ParseInteger(s, lo, hi, &v)) return "";
          return std::string(lo < 0 ? "expected an integer" : "expected an integer >= 0") +
                 ", got '" + s + "'";
        }
      },
      "", "");
}

}  // namespace

namespace internal {

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string ShellWord(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) ||
        std::string("-_.,:/@+=").find(c) != std::string::npos) {
      out += c;
    }
  }
  return out;
}

}  // namespace internal

const char* Version() { return TS_VERSION; }

// ---- Arg

Arg::Arg(CLI::Option* option, std::string name, std::string value, std::string help)
    : option_(option), name_(std::move(name)), value_(std::move(value)), help_(std::move(help)) {}

Arg& Arg::Required() {
  required_ = true;
  option_->required();
  return *this;
}

Arg& Arg::Env(const std::string& variable) {
  option_->envname(variable);
  help_ += (help_.empty() ? "" : " ") + std::string("(env ") + variable + ")";
  return *this;
}

Arg& Arg::Range(double lo, double hi) {
  const bool integral = integral_;
  option_->check(CLI::Validator(
      [lo, hi, integral](std::string& s) -> std::string {
        double v = 0;
        if (!ParseReal(s, &v) || v < lo || v > hi) {
          std::string range = Number(lo, integral) + ".." + Number(hi, integral);
          if (hi == std::numeric_limits<double>::infinity()) range = ">= " + Number(lo, integral);
          return "expected " + range + ", got '" + s + "'";
        }
        return "";
      },
      "", ""));
  return *this;
}

Arg& Arg::Min(double lo) { return Range(lo, std::numeric_limits<double>::infinity()); }

Arg& Arg::Positive() {
  option_->check(CLI::Validator(
      [](std::string& s) -> std::string {
        double v = 0;
        return ParseReal(s, &v) && v > 0 ? "" : "expected a number > 0, got '" + s + "'";
      },
      "", ""));
  return *this;
}

Arg& Arg::Default(std::string shown) {
  default_ = std::move(shown);
  default_set_ = true;
  return *this;
}

Arg& Arg::Choices(std::vector<std::string> values) {
  choices_ = values;
  kind_ = ValueKind::kChoice;
  option_->check(CLI::Validator(
      [values](std::string& s) -> std::string {
        if (std::find(values.begin(), values.end(), s) != values.end()) return "";
        return "'" + s + "' is not " + OneOf(values);
      },
      "", ""));
  return *this;
}

Arg& Arg::Split(char separator) {
  option_->delimiter(separator);
  return *this;
}

Arg& Arg::File() {
  kind_ = ValueKind::kFile;
  return *this;
}

Arg& Arg::Dir() {
  kind_ = ValueKind::kDir;
  return *this;
}

Arg& Arg::Check(std::function<std::string(std::string&)> check) {
  // A transform runs before the type's own check, so it may rewrite the text ("all" -> "0").
  option_->transform(CLI::Validator(std::move(check), "", ""));
  return *this;
}

Arg& Arg::Excludes(const std::string& other) {
  option_->excludes(other);
  return *this;
}

// ---- Command

Command::Command(CLI::App* app, Command* parent, std::string name, std::string summary)
    : app_(app), parent_(parent), name_(std::move(name)), summary_(std::move(summary)) {}

Command::~Command() = default;

Arg& Command::Keep(CLI::Option* option, const std::string& name, const std::string& value,
                   const std::string& help) {
  args_.push_back(std::unique_ptr<Arg>(new Arg(option, name, value, help)));
  Arg& a = *args_.back();
  a.positional_ = name.rfind('-', 0) != 0;
  // The last of a flag given twice wins (as the hand-written loops had it).
  if (!a.positional_) option->take_last();
  return a;
}

Arg& Command::Flag(const std::string& name, bool* out, const std::string& help, bool value) {
  CLI::Option* o = app_->add_flag_callback(
      name, [out, value] { *out = value; }, help);
  return Keep(o, name, "", help);
}

Arg& Command::Option(const std::string& name, std::string* out, const std::string& value,
                     const std::string& help) {
  CLI::Option* o = app_->add_option(name, *out, help)->capture_default_str();
  return Keep(o, name, value, help);
}

#define TS_FLAGS_NUMBER_OPTION(T)                                                           \
  Arg& Command::Option(const std::string& name, T* out, const std::string& value,           \
                       const std::string& help) {                                           \
    CLI::Option* o =                                                                        \
        app_->add_option(name, *out, help)->capture_default_str()->check(NumberCheck<T>()); \
    Arg& a = Keep(o, name, value, help);                                                    \
    a.numeric_ = true;                                                                      \
    a.integral_ = std::is_integral_v<T>;                                                    \
    return a;                                                                               \
  }
TS_FLAGS_NUMBER_OPTION(int64_t)
TS_FLAGS_NUMBER_OPTION(uint64_t)
TS_FLAGS_NUMBER_OPTION(int)
TS_FLAGS_NUMBER_OPTION(double)
#undef TS_FLAGS_NUMBER_OPTION

Arg& Command::Option(const std::string& name, std::vector<std::string>* out,
                     const std::string& value, const std::string& help) {
  // One value per occurrence: `--task a 7` leaves 7 to the positionals.
  CLI::Option* o = app_->add_option(name, *out, help)->allow_extra_args(false);
  Arg& a = Keep(o, name, value, help);
  o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  a.repeatable_ = true;
  return a;
}

Arg& Command::Option(const std::string& name, std::vector<int64_t>* out, const std::string& value,
                     const std::string& help) {
  CLI::Option* o =
      app_->add_option(name, *out, help)->allow_extra_args(false)->check(NumberCheck<int64_t>());
  Arg& a = Keep(o, name, value, help);
  o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  a.repeatable_ = a.numeric_ = a.integral_ = true;
  return a;
}

Arg& Command::Positional(const std::string& name, std::string* out, const std::string& help) {
  return Keep(app_->add_option(name, *out, help), name, name, help);
}

Arg& Command::Positional(const std::string& name, int64_t* out, const std::string& help) {
  CLI::Option* o = app_->add_option(name, *out, help)->check(NumberCheck<int64_t>());
  Arg& a = Keep(o, name, name, help);
  a.numeric_ = a.integral_ = true;
  return a;
}

Arg& Command::Positional(const std::string& name, std::vector<std::string>* out,
                         const std::string& help) {
  Arg& a = Keep(app_->add_option(name, *out, help), name, name, help);
  a.repeatable_ = true;
  return a;
}

Command& Command::Add(const std::string& name, const std::string& summary, Action action) {
  CLI::App* sub = app_->add_subcommand(name, summary);
  // At most one subcommand at each level: a positional that happens to be another command's
  // name ("schedule add list") stays a positional.
  sub->require_subcommand(0, 1);
  subs_.push_back(std::unique_ptr<Command>(new Command(sub, this, name, summary)));
  subs_.back()->action_ = std::move(action);
  return *subs_.back();
}

Command& Command::Group(const std::string& name, const std::string& summary) {
  Command& c = Add(name, summary, nullptr);
  c.group_ = true;
  return c;
}

Command& Command::Notes(const std::string& text) {
  notes_ = text;
  return *this;
}

std::string Command::path() const { return parent_ ? parent_->path() + " " + name_ : name_; }

std::string Command::Synopsis() const {
  std::vector<std::string> parts;
  for (const auto& a : args_) {
    if (a->positional()) continue;
    std::string p = a->name() + (a->value().empty() ? "" : " " + a->value());
    if (!a->required()) p = "[" + p + "]";
    if (a->repeatable()) p += "...";
    parts.push_back(p);
  }
  for (const auto& a : args_) {
    if (!a->positional()) continue;
    std::string p = a->name() + (a->repeatable() ? "..." : "");
    parts.push_back(a->required() ? p : "[" + p + "]");
  }
  if (!subs_.empty()) parts.push_back(group_ || !action_ ? "COMMAND" : "[COMMAND]");
  const std::string head = "usage: " + path();
  std::string out;
  // Wrap by part, not by word: "[--db URL]" never breaks.
  std::string line = head;
  for (const auto& p : parts) {
    if (line.size() + 1 + p.size() > kWidth && line.size() > head.size()) {
      out += line + "\n";
      line = std::string(head.size(), ' ');
    }
    line += " " + p;
  }
  return out + line + "\n";
}

std::string Command::Help() const {
  std::string out = Synopsis() + "\n" + Wrap("", summary_, 0) + "\n";
  std::vector<std::pair<std::string, std::string>> rows;  // left column, help
  for (const auto& a : args_) {
    if (!a->positional()) continue;
    rows.emplace_back(a->name(), a->help());
  }
  if (!rows.empty()) out += "\narguments:\n";
  auto print_rows = [&out](const std::vector<std::pair<std::string, std::string>>& r) {
    size_t w = 0;
    for (const auto& [left, help] : r) w = std::max(w, left.size());
    w = std::min<size_t>(w, 28);
    for (const auto& [left, help] : r) {
      std::string first = "  " + left;
      if (first.size() > w + 2) {
        out += first + "\n";
        first.clear();
      }
      first.resize(w + 4, ' ');
      out += Wrap(first, help, w + 4) + "\n";
    }
  };
  print_rows(rows);
  rows.clear();
  for (const auto& a : args_) {
    if (a->positional()) continue;
    std::string help = a->help();
    const std::string def = a->default_set_ ? a->default_ : a->option_->get_default_str();
    if (!a->value().empty() && !a->repeatable() && !def.empty() && !a->required()) {
      help += " (default " + def + ")";
    }
    if (a->required()) help += " (required)";
    rows.emplace_back(a->name() + (a->value().empty() ? "" : " " + a->value()), help);
  }
  rows.emplace_back("-h, --help", "this help");
  if (!parent_) rows.emplace_back("--version", "the version");
  out += "\nflags:\n";
  print_rows(rows);
  if (!subs_.empty()) {
    rows.clear();
    for (const auto& s : subs_) rows.emplace_back(s->name(), s->summary());
    out += "\ncommands:\n";
    print_rows(rows);
    out += "\n'" + path() + " COMMAND --help' prints a command's flags.\n";
  }
  if (!notes_.empty()) out += "\n" + notes_ + (notes_.back() == '\n' ? "" : "\n");
  return out;
}

int Command::UsageError(const std::string& why) const {
  std::fprintf(stderr, "%s: %s\n%s('%s --help' for more)\n", path().c_str(), why.c_str(),
               Synopsis().c_str(), path().c_str());
  return 2;
}

int Command::Failure(const std::string& why) const {
  std::fprintf(stderr, "%s: %s\n", path().c_str(), why.c_str());
  return 1;
}

// ---- Program

Program::Program(const std::string& name, const std::string& summary)
    : Command(nullptr, nullptr, name, summary), root_(std::make_unique<CLI::App>(summary, name)) {
  app_ = root_.get();
  root_->require_subcommand(0, 1);
  root_->set_version_flag("--version", VersionLine());
}

Program::~Program() = default;

std::string Program::VersionLine() const { return name_ + " " + Version(); }

namespace {

// "unknown argument(s) ..." for words no flag or positional took; an unknown flag's value is no
// news, so the flags alone are named when there are any.
std::string Unknown(const std::vector<std::string>& extras) {
  std::vector<std::string> words, flags;
  for (const auto& w : extras) (w.rfind('-', 0) == 0 ? flags : words).push_back("'" + w + "'");
  if (!flags.empty()) words = flags;
  return (words.size() > 1 ? "unknown arguments " : "unknown argument ") + Join(words, " ");
}

// A CLI11 message in our words, naming the flag. `extras`: the words the command left over
// (CLI11 checks required flags before extras; an unknown flag is the likelier mistake).
std::string Why(const CLI::ParseError& e, const std::vector<std::string>& extras) {
  std::string msg = e.what();
  if (!extras.empty()) return Unknown(extras);
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    // "The following argument(s) was/were not expected: a b", last first
    const size_t colon = msg.find(": ");
    std::istringstream rest(colon == std::string::npos ? msg : msg.substr(colon + 2));
    std::vector<std::string> words;
    for (std::string w; rest >> w;) words.push_back(w);
    std::reverse(words.begin(), words.end());
    return Unknown(words);
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
    const size_t colon = msg.find(": ");
    if (colon != std::string::npos) return msg.substr(0, colon) + ": needs a value";
  }
  return msg;
}

}  // namespace

std::optional<int> Program::ParseTree(std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes the words last first
  // The deepest command the parser reached, for its help or its usage error.
  auto reached = [this] {
    const Command* c = this;
    for (const CLI::App* app = root_.get();;) {
      auto subs = app->get_subcommands();
      if (subs.empty()) break;
      app = subs.front();
      const Command* next = nullptr;
      for (const auto& s : c->subcommands()) {
        if (s->app_ == app) next = s.get();
      }
      if (!next) break;
      c = next;
    }
    return c;
  };
  try {
    root_->parse(std::move(args));
  } catch (const CLI::CallForHelp&) {
    std::fputs(reached()->Help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(reached()->Help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::printf("%s\n", VersionLine().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    running_ = reached();
    const std::string why_text = Why(e, running_->app_->remaining());
    if (running_ == this && !subs_.empty()) {
      // No command, or one that does not exist: the why, then the list of commands.
      std::string why = why_text;
      if (dynamic_cast<const CLI::ExtrasError*>(&e) && why.find("'-") == std::string::npos) {
        why.replace(0, why.find(' '), "unknown");
        why.replace(why.find("argument"), 8, "command");
      }
      std::fprintf(stderr, "%s: %s\n%s", name_.c_str(), why.c_str(), Help().c_str());
      return 2;
    }
    return running_->UsageError(why_text);
  }
  running_ = reached();
  return std::nullopt;
}

std::optional<int> Program::Parse(int argc, const char* const* argv) {
  return Parse(std::vector<std::string>(argv + 1, argv + argc));
}

std::optional<int> Program::Parse(const std::vector<std::string>& args) { return ParseTree(args); }

int Program::Run(int argc, const char* const* argv) {
  return Run(std::vector<std::string>(argv + 1, argv + argc));
}

int Program::Run(const std::vector<std::string>& args) {
  AddBuiltins();
  if (auto rc = ParseTree(args)) return *rc;
  if (running_ == this) {
    std::fputs(Help().c_str(), stderr);
    return 2;
  }
  if (!running_->has_action()) {
    std::vector<std::string> names;
    for (const auto& s : running_->subcommands()) names.push_back(s->name());
    return running_->UsageError("expected a command: " + OneOf(names));
  }
  return running_->action_();
}

}  // namespace ts::flags
