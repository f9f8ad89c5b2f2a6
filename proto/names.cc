#include "proto/names.h"

#include <cctype>
#include <map>

namespace ts::proto {
namespace {

namespace pb = ::touchstone::v1;

// value number -> lower-case name without the prefix, for every value but 0 (UNSPECIFIED).
struct Names {
  std::map<int, std::string> by_number;
  std::map<std::string, int, std::less<>> by_name;
};

Names Build(const google::protobuf::EnumDescriptor* d, std::string_view prefix) {
  Names n;
  for (int i = 0; i < d->value_count(); ++i) {
    const auto* v = d->value(i);
    if (v->number() == 0) continue;
    std::string name = v->name().substr(prefix.size());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    n.by_number[v->number()] = name;
    n.by_name[name] = v->number();
  }
  return n;
}

const Names& ModeNames() {
  static const Names n = Build(pb::Mode_descriptor(), "MODE_");
  return n;
}
const Names& VerdictNames() {
  static const Names n = Build(pb::Verdict_descriptor(), "VERDICT_");
  return n;
}

const std::string& Lookup(const Names& n, int number) {
  static const std::string kEmpty;
  auto it = n.by_number.find(number);
  return it == n.by_number.end() ? kEmpty : it->second;
}

std::optional<int> Find(const Names& n, std::string_view name) {
  auto it = n.by_name.find(name);
  if (it == n.by_name.end()) return std::nullopt;
  return it->second;
}

}  // namespace

const std::string& ModeName(pb::Mode mode) { return Lookup(ModeNames(), mode); }
const std::string& VerdictName(pb::Verdict verdict) { return Lookup(VerdictNames(), verdict); }

std::optional<pb::Mode> ModeFromName(std::string_view name) {
  auto n = Find(ModeNames(), name);
  if (!n) return std::nullopt;
  return static_cast<pb::Mode>(*n);
}

std::optional<pb::Verdict> VerdictFromName(std::string_view name) {
  auto n = Find(VerdictNames(), name);
  if (!n) return std::nullopt;
  return static_cast<pb::Verdict>(*n);
}

const std::vector<pb::Mode>& AllModes() {
  static const std::vector<pb::Mode> all = [] {
    std::vector<pb::Mode> v;
    for (const auto& [number, name] : ModeNames().by_number) v.push_back(static_cast<pb::Mode>(number));
    return v;
  }();
  return all;
}

const std::vector<pb::Verdict>& AllVerdicts() {
  static const std::vector<pb::Verdict> all = [] {
    std::vector<pb::Verdict> v;
    for (const auto& [number, name] : VerdictNames().by_number) {
      v.push_back(static_cast<pb::Verdict>(number));
    }
    return v;
  }();
  return all;
}

}  // namespace ts::proto
