// A model run as files another implementation reproduces its references from (issue 31's GPU
// references: clients/python/make_references.py builds the class with transformers, on CUDA or
// the CPU, and writes a reference bundle `touchstone refs import` loads). One folder per run:
//
//   config.json         the config as the engine builds it (tiny; architectures, model_type)
//   model.safetensors   the run's weights (ModelWeights: the sweep seed's weights plus the
//                       row's fine-tune delta) as transformers' state_dict (zoo/state_dict.h)
//   inputs.safetensors  the run's batch inputs (Model::MakeBatch(seed, batch_size))
//   labels.safetensors  the batch's labels (train's loss)
//   run.json            {"key": the run's bundle key on this engine (workers/refs/key.h; the
//                        run fields are what a bundle of another implementation keeps),
//                        "outputs": Forward's output names in order, "train_steps",
//                        "learning_rate", "task", "arch"}
//
// Thread-safety: as RunModel (the active profile's numerics name the key).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "workers/base/status.h"
#include "workers/engine/engine.h"

namespace ts::engine {

// Writes the folder `out_dir` (created). Errors: the model's load_fail message (a config that
// does not build), or the file that could not be written.
Status ExportRun(const nlohmann::json& config, const RunOptions& opts, const std::string& out_dir);

}  // namespace ts::engine
