// What every program with commands gets (flags.h): `help [--list [--all]] [COMMAND...]` and
// `completion bash`, the completion script generated from the command tree.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "services/common/flags.h"
#include "services/common/flags_internal.h"

namespace ts::flags {

using internal::Join;
using internal::ShellWord;

void Program::AddBuiltins() {
  if (builtins_) return;
  builtins_ = true;
  Command& help =
      Add("help", "a command's usage and flags; --list: the commands, one a line", [this] {
        if (help_list_) {
          for (const auto& line : List(help_all_)) std::printf("%s\n", line.c_str());
          return 0;
        }
        const Command* c = Find(help_words_);
        if (!c) return running_->UsageError("no command '" + Join(help_words_, " ") + "'");
        std::fputs(c->Help().c_str(), stdout);
        return 0;
      });
  help.Flag("--list", &help_list_, "the commands, one a line (for scripts)");
  help.Flag("--all", &help_all_, "with --list: every command path, subcommands included");
  help.Positional("COMMAND", &help_words_, "a command, and a subcommand of it");
  Command& completion =
      Add("completion", "the bash completion script, generated from the command table", [this] {
        const std::string script = BashCompletion();
        if (completion_out_.empty()) {
          std::fputs(script.c_str(), stdout);
          return 0;
        }
        std::error_code ec;
        const std::filesystem::path out(completion_out_);
        if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path(), ec);
        std::ofstream f(completion_out_);
        f << script;
        f.close();
        if (!f) return running_->Failure("cannot write " + completion_out_);
        return 0;
      });
  completion.Positional("SHELL", &completion_shell_, "the shell (bash)").Choices({"bash"});
  completion.Option("--out", &completion_out_, "FILE", "write the script there, not to stdout")
      .File();
  completion.Notes("Load it with: source <(" + name_ + " completion bash)");
}

const Command* Program::Find(const std::vector<std::string>& words) const {
  const Command* c = this;
  for (const auto& w : words) {
    const Command* next = nullptr;
    for (const auto& s : c->subcommands()) {
      if (s->name() == w) next = s.get();
    }
    if (!next) return nullptr;
    c = next;
  }
  return c;
}

std::vector<std::string> Program::List(bool all) const {
  std::vector<std::string> out;
  std::function<void(const Command&, const std::string&)> walk = [&](const Command& c,
                                                                     const std::string& prefix) {
    for (const auto& s : c.subcommands()) {
      const std::string p = prefix.empty() ? s->name() : prefix + " " + s->name();
      out.push_back(p);
      if (all) walk(*s, p);
    }
  };
  walk(*this, "");
  return out;
}

namespace {

// The completion script's four tables, by command path ("" is the program): subcommands, flags,
// the flags that take a value, and what a flag's value (or a positional, "@") completes to.
struct CompletionTables {
  std::string subs, flags, valued, values;
};

std::string CompletionKind(const Arg& a) {
  switch (a.kind()) {
    case ValueKind::kFile:
      return "file";
    case ValueKind::kDir:
      return "dir";
    case ValueKind::kChoice: {
      std::vector<std::string> words;
      for (const auto& v : a.choices()) words.push_back(ShellWord(v));
      return "choice:" + Join(words, " ");
    }
    case ValueKind::kText:
      break;
  }
  return "text";
}

void AddCompletionRows(const Command& c, const std::string& path, CompletionTables* t) {
  auto arm = [](const std::string& key, const std::string& words) {
    return "    \"" + key + "\") echo \"" + words + "\" ;;\n";
  };
  std::vector<std::string> names, all_flags, with_value;
  for (const auto& s : c.subcommands()) names.push_back(ShellWord(s->name()));
  for (const auto& a : c.args()) {
    if (a->positional()) {
      t->values += arm(path + " @", CompletionKind(*a));
      continue;
    }
    all_flags.push_back(a->name());
    if (a->value().empty()) continue;
    with_value.push_back(a->name());
    t->values += arm(path + " " + a->name(), CompletionKind(*a));
  }
  all_flags.push_back("--help");
  if (path.empty()) all_flags.push_back("--version");
  if (!names.empty()) t->subs += arm(path, Join(names, " "));
  t->flags += arm(path, Join(all_flags, " "));
  if (!with_value.empty()) t->valued += arm(path, Join(with_value, " "));
  for (const auto& s : c.subcommands()) {
    AddCompletionRows(*s, path.empty() ? ShellWord(s->name()) : path + " " + ShellWord(s->name()),
                      t);
  }
}

// `fn`: the command path typed so far (a flag's value is no command), then the words that fit
// the current one: a flag's value, a flag, a subcommand or a positional.
constexpr const char* kCompletionFunction = R"sh(FN() {
  local cur=${COMP_WORDS[COMP_CWORD]} path="" w i skip=0 kind
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    if ((skip)); then skip=0; continue; fi
    if [[ $w == -* ]]; then
      [[ " $(FN_valued "$path") " == *" $w "* ]] && skip=1
      continue
    fi
    [[ " $(FN_subs "$path") " == *" $w "* ]] && path=${path:+$path }$w
  done
  COMPREPLY=()
  if ((skip)); then
    kind=$(FN_values "$path" "${COMP_WORDS[COMP_CWORD-1]}")
  elif [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(FN_flags "$path")" -- "$cur"))
    return 0
  elif [[ -n $(FN_subs "$path") ]]; then
    COMPREPLY=($(compgen -W "$(FN_subs "$path")" -- "$cur"))
    return 0
  else
    kind=$(FN_values "$path" @)
  fi
  case $kind in
    choice:*) COMPREPLY=($(compgen -W "${kind#choice:}" -- "$cur")) ;;
    file) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
    dir) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")) ;;
  esac
  return 0
}
)sh";

}  // namespace

std::string Program::BashCompletion() const {
  std::string fn = "_" + name_;
  std::replace(fn.begin(), fn.end(), '-', '_');
  CompletionTables t;
  AddCompletionRows(*this, "", &t);
  auto table = [&fn](const std::string& what, const std::string& arms, const std::string& key) {
    return fn + "_" + what + "() {\n  case \"" + key + "\" in\n" + arms + "  esac\n}\n";
  };
  std::string body = kCompletionFunction;
  for (size_t at = body.find("FN"); at != std::string::npos; at = body.find("FN", at + fn.size())) {
    body.replace(at, 2, fn);
  }
  return "# bash completion for " + name_ + ", generated by `" + name_ +
         " completion bash` from its command table; do not edit.\n" + table("subs", t.subs, "$1") +
         table("flags", t.flags, "$1") + table("valued", t.valued, "$1") +
         table("values", t.values, "$1 $2") + body + "complete -F " + fn + " " + name_ + "\n";
}

}  // namespace ts::flags
