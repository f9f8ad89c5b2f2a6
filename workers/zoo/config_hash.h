// The identity of a config.json, as the catalog, the results and the database key it.
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ts::zoo {

// 64-bit FNV-1a of the config's canonical JSON dump (nlohmann's dump(): sorted keys, no
// whitespace), as 16 lowercase hex digits. Configs that differ in any field hash differently
// (up to FNV collisions); a fine-tune that keeps its base config shares its hash.
std::string ConfigHash(const nlohmann::json& config);

}  // namespace ts::zoo
