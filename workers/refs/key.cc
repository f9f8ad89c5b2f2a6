#include "workers/refs/key.h"

#include <openssl/evp.h>

#include <array>
#include <type_traits>

namespace ts::refs {
namespace {

// The model-run fields: RunDigest's input, and the first part of the canonical key.
nlohmann::json RunJson(const BundleKey& k) {
  return {{"model_id", k.model_id},
          {"config_hash", k.config_hash},
          {"arch", k.arch},
          {"task", k.task},
          {"weights_seed", k.weights_seed},
          {"batch_seed", k.batch_seed},
          {"batch_size", k.batch_size},
          {"train_steps", k.train_steps},
          {"learning_rate", k.learning_rate}};
}

template <typename T>
Status Field(const nlohmann::json& j, const char* name, T* out) {
  auto it = j.find(name);
  if (it == j.end()) return InvalidArgumentError(std::string("key.") + name + ": missing");
  bool ok = false;
  if constexpr (std::is_same_v<T, std::string>) {
    ok = it->is_string();
  } else if constexpr (std::is_same_v<T, double>) {
    ok = it->is_number();
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    ok = it->is_number_unsigned();
  } else {
    ok = it->is_number_integer();
  }
  if (!ok) return InvalidArgumentError(std::string("key.") + name + ": wrong type " + it->dump());
  *out = it->get<T>();
  return OkStatus();
}

}  // namespace

nlohmann::json KeyToJson(const BundleKey& k) {
  nlohmann::json j = RunJson(k);
  j["modes"] = k.modes;
  j["zoo_version"] = k.zoo_version;
  j["torch_version"] = k.torch_version;
  j["device"] = k.device;
  j["dtype"] = k.dtype;
  j["numerics"] = k.numerics;
  return j;
}

StatusOr<BundleKey> KeyFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgumentError("key: expected an object");
  BundleKey k;
  TS_RETURN_IF_ERROR(Field(j, "model_id", &k.model_id));
  TS_RETURN_IF_ERROR(Field(j, "config_hash", &k.config_hash));
  TS_RETURN_IF_ERROR(Field(j, "arch", &k.arch));
  TS_RETURN_IF_ERROR(Field(j, "task", &k.task));
  TS_RETURN_IF_ERROR(Field(j, "weights_seed", &k.weights_seed));
  TS_RETURN_IF_ERROR(Field(j, "batch_seed", &k.batch_seed));
  TS_RETURN_IF_ERROR(Field(j, "batch_size", &k.batch_size));
  TS_RETURN_IF_ERROR(Field(j, "train_steps", &k.train_steps));
  TS_RETURN_IF_ERROR(Field(j, "learning_rate", &k.learning_rate));
  TS_RETURN_IF_ERROR(Field(j, "zoo_version", &k.zoo_version));
  TS_RETURN_IF_ERROR(Field(j, "torch_version", &k.torch_version));
  TS_RETURN_IF_ERROR(Field(j, "device", &k.device));
  TS_RETURN_IF_ERROR(Field(j, "dtype", &k.dtype));
  TS_RETURN_IF_ERROR(Field(j, "numerics", &k.numerics));
  auto modes = j.find("modes");
  if (modes == j.end() || !modes->is_array()) {
    return InvalidArgumentError("key.modes: expected an array of strings");
  }
  for (const auto& m : *modes) {
    if (!m.is_string() || (m != kForwardPart && m != kTrainPart)) {
      return InvalidArgumentError("key.modes: unknown part " + m.dump() +
                                  " (expected \"forward\" or \"train\")");
    }
    k.modes.push_back(m.get<std::string>());
  }
  const nlohmann::json known = KeyToJson(k);
  for (const auto& [name, v] : j.items()) {
    if (!known.contains(name)) return InvalidArgumentError("key." + name + ": unknown field");
  }
  return k;
}

std::string KeyDigest(const BundleKey& key) { return Sha256Hex(KeyToJson(key).dump()); }

std::string RunDigest(const BundleKey& key) { return Sha256Hex(RunJson(key).dump()); }

std::string FirstDifference(const BundleKey& a, const BundleKey& b) {
  const nlohmann::json ja = KeyToJson(a), jb = KeyToJson(b);
  for (const auto& [name, v] : ja.items()) {
    if (v != jb[name]) return name;
  }
  return "";
}

std::string Sha256Hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> d{};
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), d.data(), &n, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(kHex[d[i] >> 4]);
    out.push_back(kHex[d[i] & 15]);
  }
  return out;
}

bool IsDigest(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace ts::refs
