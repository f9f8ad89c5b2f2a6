// Export of a class's tiny model and its replay (export.h).
#include "workers/zoo/export.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/safetensors.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

namespace fs = std::filesystem;

StatusOr<std::unique_ptr<Model>> BuildAtOwnSize(const nlohmann::json& config) {
  BuildOptions o;
  o.tiny = false;
  return BuildModel(config, o);
}

// transformers' decoder *ForSequenceClassification pools the last token that is not
// pad_token_id, and refuses a batch of two without a pad id; the zoo pools the last attended
// token (from attention_mask). For a config without a pad id the export names one: the smallest
// id no attended token of the batch holds, which the padded positions then carry, so that both
// pool the same token and the attended positions compute what they did without it.
StatusOr<bool> NamePadForLastTokenPooling(const Model& m, uint64_t seed, nlohmann::json& tiny) {
  const internal::ArchEntry* entry = internal::FindArch(m.spec().arch);
  if (entry == nullptr || !entry->pools_last_non_pad) return false;
  auto pad = tiny.find("pad_token_id");
  if (pad != tiny.end() && !pad->is_null()) return false;
  const Batch batch = m.MakeBatch(seed, 0);
  auto ids = batch.inputs.find("input_ids");
  auto mask = batch.inputs.find("attention_mask");
  if (ids == batch.inputs.end() || mask == batch.inputs.end()) return false;
  const at::Tensor attended = ids->second.masked_select(mask->second.ne(0)).contiguous();
  std::set<int64_t> used;
  for (int64_t i = 0; i < attended.numel(); ++i) used.insert(attended[i].item<int64_t>());
  int64_t id = 0;
  while (used.count(id)) ++id;
  tiny["pad_token_id"] = id;
  return true;
}

}  // namespace

Status ExportModel(const nlohmann::json& config, const ExportOptions& opts,
                   const std::string& out_dir) {
  BuildOptions bo;
  bo.arch = opts.arch;
  TS_ASSIGN_OR_RETURN(std::unique_ptr<Model> scaled, BuildModel(config, bo));
  nlohmann::json tiny = scaled->spec().tiny_config;
  tiny["architectures"] = {scaled->spec().arch};
  if (!tiny.contains("model_type")) tiny["model_type"] = scaled->spec().family;
  // What is exported is what config.json builds at its own size (the replay's model).
  TS_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, BuildAtOwnSize(tiny));
  TS_ASSIGN_OR_RETURN(bool named_pad, NamePadForLastTokenPooling(*m, opts.seed, tiny));
  if (named_pad) {
    TS_ASSIGN_OR_RETURN(m, BuildAtOwnSize(tiny));
  }
  if (m->WeightShapes() != scaled->WeightShapes()) {
    return InternalError(scaled->spec().arch + ": the tiny config does not rebuild the tiny model");
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return InternalError(out_dir + ": " + ec.message());
  {
    std::ofstream out(fs::path(out_dir) / "config.json");
    out << tiny.dump(2) << "\n";
    if (!out) return InternalError(out_dir + "/config.json: write failed");
  }
  WeightMap w = m->InitWeights(opts.seed);
  if (opts.compact) {
    for (auto& [name, t] : w) {
      if (!at::isFloatingType(t.scalar_type()) || t.numel() == 0) continue;
      const double top = t.abs().max().item<double>();
      if (top == 0.0) continue;
      const double step = std::exp2(std::ceil(std::log2(top / 15.0)));
      t = at::clamp(at::round(t / step), -15, 15) * step;
    }
  }
  const Batch batch = m->MakeBatch(opts.seed, 0);
  std::vector<at::Tensor> outs;
  {
    at::NoGradGuard ng;
    outs = m->Forward(w, batch.inputs);
  }
  const std::vector<std::string> names = m->OutputNames();
  TensorMap out_map;
  std::string order;
  for (size_t i = 0; i < outs.size() && i < names.size(); ++i) {
    out_map[names[i]] = outs[i];
    order += (i ? "," : "") + names[i];
  }
  const std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"arch", m->spec().arch}, {"seed", std::to_string(opts.seed)}};
  // What transformers' state_dict holds: the weights, tied copies, buffers (state_dict.h).
  TensorMap stored = StateDict(*m, w, opts.seed);
  if (opts.compact) {
    for (auto& [name, t] : stored)
      if (at::isFloatingType(t.scalar_type())) t = t.to(at::kHalf);  // exact: k * 2^e
  }
  TS_RETURN_IF_ERROR(
      WriteSafetensors((fs::path(out_dir) / "model.safetensors").string(), stored, meta));
  TS_RETURN_IF_ERROR(
      WriteSafetensors((fs::path(out_dir) / "inputs.safetensors").string(), batch.inputs, meta));
  auto out_meta = meta;
  out_meta["outputs"] = order;
  return WriteSafetensors((fs::path(out_dir) / "outputs.safetensors").string(), out_map, out_meta);
}

StatusOr<double> ReplayExport(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "config.json");
  if (!in) return NotFoundError(dir + "/config.json: cannot open");
  nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return InvalidArgumentError(dir + "/config.json: not JSON");
  TS_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, BuildAtOwnSize(config));
  TS_ASSIGN_OR_RETURN(TensorMap ckpt, ReadCheckpoint(dir));
  TS_ASSIGN_OR_RETURN(WeightMap w, WeightsFromCheckpoint(*m, ckpt));
  TS_ASSIGN_OR_RETURN(TensorMap inputs,
                      ReadSafetensors((fs::path(dir) / "inputs.safetensors").string()));
  TS_ASSIGN_OR_RETURN(TensorMap want,
                      ReadSafetensors((fs::path(dir) / "outputs.safetensors").string()));
  std::vector<at::Tensor> got;
  {
    at::NoGradGuard ng;
    got = m->Forward(w, inputs);
  }
  const std::vector<std::string> names = m->OutputNames();
  double worst = 0.0;
  for (size_t i = 0; i < got.size() && i < names.size(); ++i) {
    auto it = want.find(names[i]);
    if (it == want.end()) return InvalidArgumentError(dir + ": output '" + names[i] + "': missing");
    if (it->second.sizes() != got[i].sizes()) {
      return InvalidArgumentError(dir + ": output '" + names[i] + "': shape differs");
    }
    worst = std::max(worst, (got[i].to(at::kDouble) - it->second.to(at::kDouble))
                                .abs()
                                .max()
                                .item<double>());
  }
  return worst;
}

}  // namespace ts::zoo
