#include "workers/refs/bundle.h"

#include <ATen/ATen.h>

#include <set>
#include <utility>

#include "workers/zoo/safetensors.h"

namespace ts::refs {
namespace {

using nlohmann::json;

const char* GoldenName(TrainReferences::Golden g) {
  switch (g) {
    case TrainReferences::Golden::kPresent:
      return "present";
    case TrainReferences::Golden::kFailed:
      return "failed";
    case TrainReferences::Golden::kAbsent:
      break;
  }
  return "absent";
}

json OutcomeJson(const PartOutcome& o) { return {{"status", o.status}, {"error", o.error}}; }

// Adds the defined tensors of `list` as forward.<name>.<i>; returns their indices.
json AddList(zoo::TensorMap& out, const std::string& name, const TensorList& list) {
  json idx = json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].defined()) continue;
    out["forward." + name + "." + std::to_string(i)] = list[i];
    idx.push_back(i);
  }
  return idx;
}

json AddGrads(zoo::TensorMap& out, const std::string& name, const GradMap& grads) {
  json names = json::array();
  for (const auto& [p, g] : grads) {
    if (!g.defined()) continue;
    out["train.grads." + name + "." + p] = g;
    names.push_back(p);
  }
  return names;
}

at::Tensor Curve(const std::vector<double>& v) {
  return at::tensor(v, at::TensorOptions().dtype(at::kDouble));
}

// ---- Decoding: every tensor the metadata promises is taken out of `tensors`; what is left
// at the end was not promised, and refuses the bundle.

class Reader {
 public:
  explicit Reader(zoo::TensorMap tensors) : tensors_(std::move(tensors)) {}

  StatusOr<at::Tensor> Take(const std::string& name, bool float_only) {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return InvalidArgumentError("bundle: tensor '" + name + "' missing");
    at::Tensor t = std::move(it->second);
    tensors_.erase(it);
    if (float_only && !at::isFloatingType(t.scalar_type())) {
      return InvalidArgumentError("bundle: tensor '" + name + "' is not floating point");
    }
    return t;
  }

  StatusOr<std::vector<double>> TakeCurve(const std::string& name) {
    TS_ASSIGN_OR_RETURN(at::Tensor t, Take(name, true));
    if (t.scalar_type() != at::kDouble || t.dim() != 1) {
      return InvalidArgumentError("bundle: tensor '" + name + "' is not an F64 vector");
    }
    const double* p = t.data_ptr<double>();
    return std::vector<double>(p, p + t.numel());
  }

  Status CheckAllTaken() const {
    if (tensors_.empty()) return OkStatus();
    return InvalidArgumentError("bundle: tensor '" + tensors_.begin()->first +
                                "' is not in its metadata");
  }

 private:
  zoo::TensorMap tensors_;
};

StatusOr<PartOutcome> OutcomeFrom(const json& part, const std::string& where) {
  PartOutcome o;
  if (!part.contains("status") || !part["status"].is_string() || !part.contains("error") ||
      !part["error"].is_string()) {
    return InvalidArgumentError("bundle: " + where + ": expected status and error strings");
  }
  o.status = part["status"].get<std::string>();
  o.error = part["error"].get<std::string>();
  return o;
}

StatusOr<TensorList> ListFrom(Reader& r, const json& lists, const std::string& name,
                              int64_t count) {
  TensorList out;
  auto it = lists.find(name);
  if (it == lists.end()) return out;
  if (!it->is_array())
    return InvalidArgumentError("bundle: forward.lists." + name + ": not an array");
  out.resize(static_cast<size_t>(count));
  for (const auto& i : *it) {
    if (!i.is_number_unsigned() || i.get<int64_t>() >= count) {
      return InvalidArgumentError("bundle: forward.lists." + name + ": index " + i.dump() +
                                  " out of [0, " + std::to_string(count) + ")");
    }
    TS_ASSIGN_OR_RETURN(out[i.get<size_t>()],
                        r.Take("forward." + name + "." + std::to_string(i.get<int64_t>()), false));
  }
  return out;
}

StatusOr<ForwardReferences> ForwardFrom(Reader& r, const json& f) {
  ForwardReferences out;
  TS_ASSIGN_OR_RETURN(out.outcome, OutcomeFrom(f, "forward"));
  if (!f.contains("outputs") || !f["outputs"].is_number_unsigned() || !f.contains("lists") ||
      !f["lists"].is_object()) {
    return InvalidArgumentError("bundle: forward: expected outputs (a count) and lists");
  }
  const int64_t n = f["outputs"].get<int64_t>();
  TS_ASSIGN_OR_RETURN(out.outputs, ListFrom(r, f["lists"], "outputs", n));
  TS_ASSIGN_OR_RETURN(out.golden, ListFrom(r, f["lists"], "golden", n));
  TS_ASSIGN_OR_RETURN(out.declared, ListFrom(r, f["lists"], "declared", n));
  return out;
}

StatusOr<GradMap> GradsFrom(Reader& r, const json& lists, const std::string& name) {
  GradMap out;
  auto it = lists.find(name);
  if (it == lists.end()) return out;
  if (!it->is_array())
    return InvalidArgumentError("bundle: train.lists." + name + ": not an array");
  for (const auto& p : *it) {
    if (!p.is_string()) return InvalidArgumentError("bundle: train.lists." + name + ": not names");
    TS_ASSIGN_OR_RETURN(out[p.get<std::string>()],
                        r.Take("train.grads." + name + "." + p.get<std::string>(), true));
  }
  return out;
}

StatusOr<TrainReferences> TrainFrom(Reader& r, const json& t) {
  TrainReferences out;
  TS_ASSIGN_OR_RETURN(out.outcome, OutcomeFrom(t, "train"));
  if (!t.contains("declared_digests") || !t["declared_digests"].is_object()) {
    return InvalidArgumentError("bundle: train.declared_digests: expected an object");
  }
  for (const auto& [p, d] : t["declared_digests"].items()) {
    if (!d.is_string() || !IsDigest(d.get<std::string>())) {
      return InvalidArgumentError("bundle: train.declared_digests." + p + ": not a SHA-256");
    }
    out.declared_digests[p] = d.get<std::string>();
  }
  if (!t.contains("lists") || !t["lists"].is_object() || !t.contains("curves") ||
      !t["curves"].is_array() || !t.contains("golden") || !t["golden"].is_string() ||
      !t.contains("declared_is_reference") || !t["declared_is_reference"].is_boolean()) {
    return InvalidArgumentError(
        "bundle: train: expected lists, curves, golden and declared_is_reference");
  }
  for (const auto& c : t["curves"]) {
    const std::string name = c.is_string() ? c.get<std::string>() : "";
    std::vector<double>* into = name == "reference"  ? &out.loss_reference
                                : name == "declared" ? &out.loss_declared
                                : name == "band"     ? &out.loss_band
                                                     : nullptr;
    if (into == nullptr) return InvalidArgumentError("bundle: train.curves: unknown " + c.dump());
    TS_ASSIGN_OR_RETURN(*into, r.TakeCurve("train.loss." + name));
  }
  const std::string golden = t["golden"].get<std::string>();
  if (golden == "present") {
    out.golden_state = TrainReferences::Golden::kPresent;
  } else if (golden == "failed") {
    out.golden_state = TrainReferences::Golden::kFailed;
  } else if (golden != "absent") {
    return InvalidArgumentError("bundle: train.golden: unknown state '" + golden + "'");
  }
  out.declared_is_reference = t["declared_is_reference"].get<bool>();
  TS_ASSIGN_OR_RETURN(out.grads, GradsFrom(r, t["lists"], "reference"));
  TS_ASSIGN_OR_RETURN(out.grads_declared, GradsFrom(r, t["lists"], "declared"));
  TS_ASSIGN_OR_RETURN(out.grads_golden, GradsFrom(r, t["lists"], "golden"));
  for (const GradMap* m : {&out.grads, &out.grads_declared, &out.grads_golden}) {
    for (const auto& [p, g] : *m) {
      if (!out.declared_digests.count(p)) {
        return InvalidArgumentError("bundle: train: gradient of '" + p + "' without its digest");
      }
    }
  }
  return out;
}

}  // namespace

std::string TensorDigest(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kCPU).contiguous();
  std::string bytes = std::string(c10::toString(c.scalar_type())) + " [";
  for (int64_t d : c.sizes()) bytes += std::to_string(d) + ",";
  bytes += "]\n";
  bytes.append(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  return Sha256Hex(bytes);
}

StatusOr<std::string> EncodeBundle(const Bundle& b) {
  zoo::TensorMap tensors;
  json meta = {{"format", kFormatVersion}, {"key", KeyToJson(b.key)}, {"provenance", b.provenance}};
  if (b.forward) {
    const ForwardReferences& f = *b.forward;
    json lists = json::object();
    if (!f.outputs.empty()) lists["outputs"] = AddList(tensors, "outputs", f.outputs);
    if (!f.golden.empty()) lists["golden"] = AddList(tensors, "golden", f.golden);
    if (!f.declared.empty()) lists["declared"] = AddList(tensors, "declared", f.declared);
    meta["forward"] = OutcomeJson(f.outcome);
    meta["forward"]["outputs"] = f.outputs.size();
    meta["forward"]["lists"] = lists;
  }
  if (b.train) {
    const TrainReferences& t = *b.train;
    json curves = json::array();
    for (const auto& [name, v] :
         {std::pair{"reference", &t.loss_reference}, std::pair{"declared", &t.loss_declared},
          std::pair{"band", &t.loss_band}}) {
      if (v->empty()) continue;
      tensors[std::string("train.loss.") + name] = Curve(*v);
      curves.push_back(name);
    }
    json lists = json::object();
    if (!t.grads.empty()) lists["reference"] = AddGrads(tensors, "reference", t.grads);
    if (!t.grads_declared.empty())
      lists["declared"] = AddGrads(tensors, "declared", t.grads_declared);
    if (!t.grads_golden.empty()) lists["golden"] = AddGrads(tensors, "golden", t.grads_golden);
    meta["train"] = OutcomeJson(t.outcome);
    meta["train"]["curves"] = curves;
    meta["train"]["lists"] = lists;
    meta["train"]["golden"] = GoldenName(t.golden_state);
    meta["train"]["declared_digests"] = t.declared_digests;
    meta["train"]["declared_is_reference"] = t.declared_is_reference;
  }
  return zoo::EncodeSafetensors(tensors, {{kMetadataEntry, meta.dump()}});
}

StatusOr<Bundle> DecodeBundle(std::string_view bytes) {
  TS_ASSIGN_OR_RETURN(BundleHeader header, ParseBundleHeader(bytes));
  TS_ASSIGN_OR_RETURN(zoo::TensorMap tensors, zoo::DecodeSafetensors(bytes, "bundle"));
  Reader r(std::move(tensors));
  Bundle b;
  b.key = std::move(header.key);
  const json& meta = header.metadata;
  if (meta.contains("provenance")) b.provenance = meta["provenance"];
  if (meta.contains("forward")) {
    if (!meta["forward"].is_object()) return InvalidArgumentError("bundle: forward: not an object");
    TS_ASSIGN_OR_RETURN(b.forward, ForwardFrom(r, meta["forward"]));
  }
  if (meta.contains("train")) {
    if (!meta["train"].is_object()) return InvalidArgumentError("bundle: train: not an object");
    TS_ASSIGN_OR_RETURN(b.train, TrainFrom(r, meta["train"]));
  }
  TS_RETURN_IF_ERROR(r.CheckAllTaken());
  return b;
}

}  // namespace ts::refs
