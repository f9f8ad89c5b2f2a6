// The ConvNeXt lineage (convnext.cc; convnextv2.cc derives from it): config parsing into the
// trunk's recipe, tiny scaling and the example config. Private to the zoo.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/trunks/vision.h"

namespace ts::zoo::internal {

// `v2`: ConvNextV2Config, which has no layer_scale_init_value (no layer scale) and adds GRN.
StatusOr<nlohmann::json> ScaleConvNext(const nlohmann::json& config, bool v2);
StatusOr<PooledVisionTrunk> ConvNextTrunkFor(const nlohmann::json& config,
                                             const std::string& prefix, bool v2);
nlohmann::json ConvNextExample();  // facebook/convnext-tiny-224
// `<name>Backbone` (ConvNextBackbone, ConvNextV2Backbone; BackboneMixin): the model's embeddings
// and encoder without the final `layernorm`, feature_maps = hidden_states_norms.<stage> (a
// channels-first ConvNextLayerNorm, eps 1e-6) of the stage in out_features, by default the last
// and the only one the zoo serves. `example`: the family's example config.
ArchEntry ConvNextBackboneEntry(const std::string& name, const std::string& model_type,
                                nlohmann::json example, bool v2);

}  // namespace ts::zoo::internal
