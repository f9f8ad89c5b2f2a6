// Helpers shared by the zoo's tests.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ts::zoo::testing {

// ${TS_SOURCE_DIR}/../shared/data/hf-configs (the real configs, read in place).
inline std::filesystem::path HfConfigDir() {
  const char* env = std::getenv("TS_SOURCE_DIR");
  std::filesystem::path root = env != nullptr ? env : TS_ZOO_SOURCE_DIR;
  return root / ".." / "shared" / "data" / "hf-configs";
}

inline nlohmann::json LoadHfConfig(const std::string& file) {
  std::ifstream in(HfConfigDir() / file);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

inline std::vector<std::string> HfConfigFiles() {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(HfConfigDir(), ec)) {
    if (e.path().extension() == ".json") files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Modelled on google/vit-base-patch16-224.
inline nlohmann::json VitBaseConfig() {
  nlohmann::json id2label = nlohmann::json::object();
  for (int i = 0; i < 1000; ++i) id2label[std::to_string(i)] = "class_" + std::to_string(i);
  return {{"architectures", {"ViTForImageClassification"}},
          {"model_type", "vit"},
          {"hidden_size", 768},
          {"num_hidden_layers", 12},
          {"num_attention_heads", 12},
          {"intermediate_size", 3072},
          {"hidden_act", "gelu"},
          {"hidden_dropout_prob", 0.0},
          {"attention_probs_dropout_prob", 0.0},
          {"initializer_range", 0.02},
          {"layer_norm_eps", 1e-12},
          {"image_size", 224},
          {"patch_size", 16},
          {"num_channels", 3},
          {"qkv_bias", true},
          {"id2label", id2label}};
}

}  // namespace ts::zoo::testing
