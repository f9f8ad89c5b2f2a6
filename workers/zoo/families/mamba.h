// The Mamba lineage (families/mamba.cc): MambaModel / MambaForCausalLM and, with the weight-free
// RMS norms on the selective scan's dt, B and C, FalconMamba's. Private to the zoo.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workers/zoo/families_internal.h"

namespace ts::zoo::internal::mamba {

// `<prefix>ForCausalLM` and `<prefix>Model` of family `model_type` from `example` (a real-shaped
// config.json); `falcon`: FalconMambaMixer's rms_forward on time_step, B and C (mixer_rms_eps).
std::vector<ArchEntry> MambaArchs(const std::string& model_type, const std::string& prefix,
                                  bool falcon, const nlohmann::json& example);

}  // namespace ts::zoo::internal::mamba
