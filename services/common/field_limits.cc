#include "services/common/field_limits.h"

#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace ts::common {
namespace {

namespace gp = ::google::protobuf;

absl::Status CheckOne(const std::string& path, std::string_view name, const std::string& v) {
  if (v.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(path + ": contains a NUL byte (at " +
                                      std::to_string(v.find('\0')) + ")");
  }
  const size_t limit = StringLimit(name);
  if (v.size() > limit) {
    return absl::InvalidArgumentError(path + ": " + std::to_string(v.size()) +
                                      " bytes, at most " + std::to_string(limit));
  }
  return absl::OkStatus();
}

// The common case without building a path: no NUL and within the limit.
bool Fine(std::string_view name, const std::string& v) {
  return v.size() <= StringLimit(name) && v.find('\0') == std::string::npos;
}

// A map entry is named by its key: "timings_ms[\"total\"]".
std::string EntryPath(const std::string& field_path, const gp::Message& entry) {
  const gp::Descriptor* d = entry.GetDescriptor();
  const gp::FieldDescriptor* key = d->FindFieldByName("key");
  if (key == nullptr) return field_path;
  std::string k;
  if (key->cpp_type() == gp::FieldDescriptor::CPPTYPE_STRING) {
    k = entry.GetReflection()->GetString(entry, key);
    if (k.size() > 32 || k.find('\0') != std::string::npos) k = k.substr(0, 32) + "...";
    return field_path + "[\"" + k + "\"]";
  }
  return field_path;
}

absl::Status Walk(const gp::Message& m, const std::string& prefix, int depth) {
  if (depth > 32) return absl::InvalidArgumentError(prefix + ": nested too deeply");
  const gp::Reflection* r = m.GetReflection();
  std::vector<const gp::FieldDescriptor*> fields;
  r->ListFields(m, &fields);  // set fields only: unset strings are empty
  for (const gp::FieldDescriptor* f : fields) {
    const std::string path = prefix.empty() ? f->name() : prefix + "." + f->name();
    const bool is_map = f->is_map();
    if (f->cpp_type() == gp::FieldDescriptor::CPPTYPE_STRING) {
      std::string scratch;  // the References below return the field itself, not a copy
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i) {
          const std::string& v = r->GetRepeatedStringReference(m, f, i, &scratch);
          if (Fine(f->name(), v)) continue;
          return CheckOne(path + "[" + std::to_string(i) + "]", f->name(), v);
        }
      } else if (const std::string& v = r->GetStringReference(m, f, &scratch); !Fine(f->name(), v)) {
        return CheckOne(path, f->name(), v);
      }
    } else if (f->cpp_type() == gp::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i) {
          const gp::Message& sub = r->GetRepeatedMessage(m, f, i);
          // A map entry's key and value are checked under the map's own name: the value of
          // `confirmation["x"]` has the map's limit, not the entry's "value" limit.
          if (is_map) {
            const std::string at = EntryPath(path, sub);
            const gp::Reflection* er = sub.GetReflection();
            std::vector<const gp::FieldDescriptor*> kv;
            er->ListFields(sub, &kv);
            for (const gp::FieldDescriptor* e : kv) {
              if (e->cpp_type() == gp::FieldDescriptor::CPPTYPE_STRING) {
                absl::Status st = CheckOne(at + (e->name() == "key" ? " (key)" : ""), f->name(),
                                           er->GetString(sub, e));
                if (!st.ok()) return st;
              } else if (e->cpp_type() == gp::FieldDescriptor::CPPTYPE_MESSAGE) {
                if (absl::Status st = Walk(er->GetMessage(sub, e), at, depth + 1); !st.ok()) {
                  return st;
                }
              }
            }
            continue;
          }
          if (absl::Status st = Walk(sub, path + "[" + std::to_string(i) + "]", depth + 1);
              !st.ok()) {
            return st;
          }
        }
      } else if (absl::Status st = Walk(r->GetMessage(m, f), path, depth + 1); !st.ok()) {
        return st;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

size_t StringLimit(std::string_view name) {
  for (std::string_view json : {"config_json", "tiny_config_json", "body"}) {
    if (name == json) return kMaxJsonBytes;
  }
  for (std::string_view text : {"error", "detail", "reason", "break_reasons", "note", "ack_note",
                                "cause_text", "shapes", "description"}) {
    if (name == text) return kMaxTextBytes;
  }
  return kMaxIdBytes;
}

absl::Status CheckStrings(const google::protobuf::Message& m) { return Walk(m, "", 0); }

namespace {

bool IsJson(std::string_view name) { return StringLimit(name) == kMaxJsonBytes; }

// The clamped value, or nullopt when `v` passes as it is.
std::optional<std::string> Clamped(std::string_view name, const std::string& v) {
  const size_t limit = StringLimit(name);
  const bool nul = v.find('\0') != std::string::npos;
  if (!nul && v.size() <= limit) return std::nullopt;
  if (v.size() > limit && IsJson(name)) return std::string();
  std::string out = v;
  for (char& c : out) {
    if (c == '\0') c = ' ';
  }
  if (out.size() > limit) {
    static constexpr std::string_view kCut = "...[cut]";
    size_t keep = limit - kCut.size();
    // Back up over UTF-8 continuation bytes so that the cut string stays valid UTF-8.
    while (keep > 0 && (static_cast<unsigned char>(out[keep]) & 0xC0) == 0x80) --keep;
    out.resize(keep);
    out += kCut;
  }
  return out;
}

int Clamp(gp::Message* m, std::string_view map_name, int depth) {
  if (depth > 32) return 0;
  const gp::Reflection* r = m->GetReflection();
  std::vector<const gp::FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  int changed = 0;
  for (const gp::FieldDescriptor* f : fields) {
    // A map entry's key and value take the map's name (as in CheckStrings).
    const std::string_view name = map_name.empty() ? std::string_view(f->name()) : map_name;
    if (f->cpp_type() == gp::FieldDescriptor::CPPTYPE_STRING) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) {
          if (auto c = Clamped(name, r->GetRepeatedString(*m, f, i))) {
            r->SetRepeatedString(m, f, i, std::move(*c));
            ++changed;
          }
        }
      } else if (auto c = Clamped(name, r->GetString(*m, f))) {
        r->SetString(m, f, std::move(*c));
        ++changed;
      }
    } else if (f->cpp_type() == gp::FieldDescriptor::CPPTYPE_MESSAGE) {
      const std::string_view sub_map = f->is_map() ? std::string_view(f->name()) : "";
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) {
          changed += Clamp(r->MutableRepeatedMessage(m, f, i), sub_map, depth + 1);
        }
      } else {
        changed += Clamp(r->MutableMessage(m, f), "", depth + 1);
      }
    }
  }
  return changed;
}

}  // namespace

int ClampStrings(google::protobuf::Message* m) { return Clamp(m, "", 0); }

}  // namespace ts::common
