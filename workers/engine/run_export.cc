#include "workers/engine/run_export.h"

#include <filesystem>
#include <fstream>

#include "workers/engine/stages_internal.h"
#include "workers/refs/key.h"
#include "workers/zoo/safetensors.h"
#include "workers/zoo/state_dict.h"

namespace ts::engine {

Status ExportRun(const nlohmann::json& config, const RunOptions& opts, const std::string& out_dir) {
  namespace fs = std::filesystem;
  // The engine's own build stage: the model, weights and batch a sweep's run has.
  internal::StageContext ctx(config, opts);
  if (internal::Stages().front().run(ctx) != internal::StageEnd::kContinue) {
    for (const auto& [mode, m] : ctx.result.modes) {
      if (m.status == Verdict::kLoadFail) return InvalidArgumentError(m.error);
    }
    return InvalidArgumentError("the model cannot be built");
  }
  const zoo::Model& model = *ctx.model;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return InternalError(out_dir + ": " + ec.message());
  nlohmann::json tiny = model.spec().tiny_config;
  tiny["architectures"] = {model.spec().arch};
  if (!tiny.contains("model_type")) tiny["model_type"] = model.spec().family;
  nlohmann::json run = {{"key", refs::KeyToJson(internal::ReferenceKey(ctx))},
                        {"outputs", model.OutputNames()},
                        {"train_steps", opts.train_steps},
                        {"learning_rate", opts.learning_rate},
                        {"arch", model.spec().arch},
                        {"task", model.spec().task}};
  for (const auto& [name, text] : {std::pair{"config.json", tiny.dump(2)},
                                   std::pair{"run.json", run.dump(2)}}) {
    std::ofstream out(fs::path(out_dir) / name);
    out << text << "\n";
    if (!out) return InternalError(out_dir + "/" + name + ": write failed");
  }
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  TS_RETURN_IF_ERROR(zoo::WriteSafetensors((fs::path(out_dir) / "model.safetensors").string(),
                                           zoo::StateDict(model, ctx.weights, opts.seed), meta));
  TS_RETURN_IF_ERROR(zoo::WriteSafetensors((fs::path(out_dir) / "inputs.safetensors").string(),
                                           ctx.batch.inputs, meta));
  return zoo::WriteSafetensors((fs::path(out_dir) / "labels.safetensors").string(),
                               ctx.batch.labels, meta);
}

}  // namespace ts::engine
