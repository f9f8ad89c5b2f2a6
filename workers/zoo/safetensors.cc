// safetensors reader and writer (safetensors.h).
#include "workers/zoo/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace ts::zoo {
namespace {

struct DtypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},   {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort},  {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},
};

std::string NameOf(at::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  return "";
}

bool TypeOf(const std::string& name, at::ScalarType& out) {
  for (const auto& d : kDtypes) {
    if (name == d.name) {
      out = d.type;
      return true;
    }
  }
  return false;
}

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// A read-only mapping of a whole file, unmapped on destruction.
class Mapping {
 public:
  ~Mapping() {
    if (data_ != nullptr && data_ != MAP_FAILED) munmap(data_, size_);
  }
  Status Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NotFoundError(path + ": cannot open (" + std::strerror(errno) + ")");
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      ::close(fd);
      return InternalError(path + ": cannot stat");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) data_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (data_ == MAP_FAILED) return InternalError(path + ": cannot mmap");
    return OkStatus();
  }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

Status Bad(const std::string& path, const std::string& what) {
  return InvalidArgumentError(path + ": " + what);
}

}  // namespace

StatusOr<std::string> EncodeSafetensors(const TensorMap& tensors,
                                        const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<at::Tensor> bufs;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted names, as safetensors writes
    const std::string dt = NameOf(t.scalar_type());
    if (dt.empty()) {
      return InvalidArgumentError("tensor '" + name + "': dtype " +
                                  std::string(c10::toString(t.scalar_type())) +
                                  " has no safetensors name here");
    }
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    const uint64_t n = static_cast<uint64_t>(c.numel()) * c.element_size();
    header[name] = {{"dtype", dt}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    bufs.push_back(std::move(c));
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // buffers start 8-byte aligned
  std::string out;
  out.reserve(8 + text.size() + offset);
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += text;
  for (const at::Tensor& c : bufs) {
    out.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  }
  return out;
}

Status WriteSafetensors(const std::string& path, const TensorMap& tensors,
                        const std::map<std::string, std::string>& metadata) {
  auto bytes = EncodeSafetensors(tensors, metadata);
  if (!bytes.ok()) return InvalidArgumentError(path + ": " + bytes.status().message());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InternalError(path + ": cannot write");
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  out.close();
  if (!out) return InternalError(path + ": write failed");
  return OkStatus();
}

StatusOr<TensorMap> ReadSafetensors(const std::string& path) {
  Mapping map;
  TS_RETURN_IF_ERROR(map.Open(path));
  return DecodeSafetensors(
      std::string_view(reinterpret_cast<const char*>(map.bytes()), map.size()), path);
}

StatusOr<TensorMap> DecodeSafetensors(std::string_view bytes, const std::string& path,
                                      std::map<std::string, std::string>* metadata) {
  const auto* raw = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8) return Bad(path, "truncated: shorter than the 8-byte header length");
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | raw[i];
  if (len > bytes.size() - 8) {
    return Bad(path, "truncated: header of " + std::to_string(len) + " bytes, file of " +
                         std::to_string(bytes.size()));
  }
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, len), nullptr,
                                                /*allow_exceptions=*/false);
  if (!header.is_object()) return Bad(path, "header: not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - len;
  const uint8_t* data = raw + 8 + len;
  TensorMap out;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (metadata == nullptr) continue;
      if (!e.is_object()) return Bad(path, "__metadata__: expected an object of strings");
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string()) return Bad(path, "__metadata__." + k + ": expected a string");
        (*metadata)[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "': ";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets")) {
      return Bad(path, where + "expected {dtype, shape, data_offsets}");
    }
    at::ScalarType type;
    if (!e["dtype"].is_string() || !TypeOf(e["dtype"].get<std::string>(), type)) {
      return Bad(path, where + "unsupported dtype " + e["dtype"].dump());
    }
    std::vector<int64_t> shape;
    int64_t numel = 1;
    if (!e["shape"].is_array()) return Bad(path, where + "shape: expected array");
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        return Bad(path, where + "shape: expected non-negative integers");
      }
      shape.push_back(d.get<int64_t>());
      numel *= shape.back();
    }
    const auto& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned() || off[1].get<uint64_t>() < off[0].get<uint64_t>()) {
      return Bad(path, where + "data_offsets: expected [begin, end] with begin <= end");
    }
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    const uint64_t want = static_cast<uint64_t>(numel) * c10::elementSize(type);
    if (end - begin != want) {
      return Bad(path, where + e["dtype"].get<std::string>() + " " + ShapeText(shape) + " needs " +
                           std::to_string(want) + " bytes, data_offsets give " +
                           std::to_string(end - begin) + " (mislabelled dtype or shape)");
    }
    if (end > data_size) {
      return Bad(path, where + "truncated: its data ends at byte " + std::to_string(end) +
                           " of a " + std::to_string(data_size) + "-byte buffer");
    }
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
    if (want > 0) std::memcpy(t.data_ptr(), data + begin, want);
    out[name] = std::move(t);
  }
  return out;
}

StatusOr<TensorMap> ReadCheckpoint(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(single)) return ReadSafetensors(single.string());
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (!fs::exists(index)) {
    return NotFoundError(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  std::ifstream in(index);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    return InvalidArgumentError(index.string() + ": weight_map: expected object");
  }
  std::map<std::string, std::set<std::string>> shards;  // file -> names it should hold
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) {
      return InvalidArgumentError(index.string() + ": weight_map." + name + ": expected string");
    }
    shards[file.get<std::string>()].insert(name);
  }
  TensorMap out;
  for (const auto& [file, names] : shards) {
    TS_ASSIGN_OR_RETURN(TensorMap part, ReadSafetensors((fs::path(dir) / file).string()));
    for (const std::string& n : names) {
      auto it = part.find(n);
      if (it == part.end()) {
        return InvalidArgumentError(index.string() + ": tensor '" + n + "': not in shard " + file);
      }
      out[n] = std::move(it->second);
    }
  }
  return out;
}

StatusOr<WeightMap> WeightsFromCheckpoint(const Model& model, const TensorMap& checkpoint,
                                          at::ScalarType dtype) {
  WeightMap w;
  for (const auto& [name, shape] : model.WeightShapes()) {
    auto it = checkpoint.find(name);
    if (it == checkpoint.end()) {
      return InvalidArgumentError("checkpoint: tensor '" + name + "': missing (" +
                                  model.spec().arch + " needs " + ShapeText(shape) + ")");
    }
    if (it->second.sizes().vec() != shape) {
      return InvalidArgumentError("checkpoint: tensor '" + name + "': shape " +
                                  ShapeText(it->second.sizes().vec()) + ", " + model.spec().arch +
                                  " needs " + ShapeText(shape));
    }
    w[name] = it->second.to(dtype);
  }
  return w;
}

std::string CheckpointDirFor(const std::string& weights_dir, const std::string& model_id) {
  namespace fs = std::filesystem;
  if (weights_dir.empty() || model_id.empty()) return "";
  const fs::path d = fs::path(weights_dir) / model_id;
  if (fs::exists(d / "model.safetensors") || fs::exists(d / "model.safetensors.index.json")) {
    return d.string();
  }
  return "";
}

}  // namespace ts::zoo
