// The stages of RunModel (engine.h), private to the engine. A stage is one function over the
// StageContext of one model; RunModel runs the list of Stages() in order. To add a stage, write
// its function in stages.cc and put it in the list.
//
// Thread-safety: a StageContext belongs to one RunModel call; stages use the process-global
// device (one RunModel at a time per process).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workers/engine/compare.h"
#include "workers/engine/engine.h"
#include "workers/engine/references.h"
#include "workers/engine/verdict.h"
#include "workers/simdevice/device_clock.h"
#include "workers/simdevice/profile.h"
#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"

namespace ts::engine::internal {

using TensorList = std::vector<at::Tensor>;

// Everything the stages of one model share. Each stage reads what earlier stages set and fills
// its own part of `result`.
struct StageContext {
  // Records the config hash, marks every mode skipped and reads the active profile.
  StageContext(const nlohmann::json& config, const RunOptions& opts);

  const nlohmann::json& config;
  const RunOptions& opts;

  // The active profile's public part (never its defects), and what the engine derives from it.
  simdevice::ProfileInfo profile;
  bool bf16_numerics = false;       // matmul numerics are not fp32
  zoo::Bf16MatmulOps emulated_ops;  // the matmul classes the device runs natively
  Tolerance tol;
  c10::Device device;

  // Set by "build".
  std::unique_ptr<zoo::Model> model;
  zoo::WeightMap weights;
  zoo::Batch batch;

  // Set by "reference": CPU fp32 outputs, fp64 golden outputs, CPU at the declared numerics.
  TensorList ref, golden, declared;
  // Their bundle: the stored one in use, or what this run computes (references.h).
  ReferenceState references;

  // Device op use of the stages that count towards coverage (eager and train).
  std::map<std::string, OpUse> native, fallback;

  // The record being filled; RunModel returns it.
  ModelResult result;
};

enum class StageEnd {
  kContinue,   // run the next stage
  kStopModel,  // the model is decided for every mode (load_fail, ref_fail, ...)
};

struct Stage {
  const char* name;  // reported through RunOptions::on_stage as the stage starts
  // The mode this stage decides: the stage runs only when the mode is requested. nullptr: a
  // stage every mode needs, which always runs.
  const char* mode;
  StageEnd (*run)(StageContext& ctx);
};

// build, reference, eager, compile, train (engine.h documents each).
const std::vector<Stage>& Stages();

// Fills result.native_ops, fallback_ops and op_coverage from ctx.native and ctx.fallback.
void SummarizeCoverage(StageContext& ctx);

// ---- mode_perf.cc

// A mode's performance record from what the device clock measured and the mode's peak device
// memory: top_ops are the kTopOps largest (ties by name).
ModePerf PerfOf(const simdevice::PerfCounters& counters, int64_t peak_device_bytes);
// Compile's speedup and compression over eager, when compile passed and both have perf.
void SetCompileRatios(ModelResult& result);

}  // namespace ts::engine::internal
