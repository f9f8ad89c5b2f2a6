#include "workers/refs/bundle.h"

#include <ATen/ATen.h>

#include <algorithm>
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

// ---- Residuals (bundle.h, AsStored): a golden or declared reference as its anchor plus a
// bf16 residual.

bool Condensable(const at::Tensor& value, const at::Tensor& anchor) {
  return value.defined() && anchor.defined() && value.sizes() == anchor.sizes() &&
         (value.scalar_type() == at::kDouble || value.scalar_type() == at::kFloat) &&
         anchor.scalar_type() == at::kFloat && value.numel() > 0 &&
         at::isfinite(value).all().item<bool>() && at::isfinite(anchor).all().item<bool>();
}

// bf16(value - anchor). Expanding it rounds anchor + residual to value's grid; that value's
// residual is then exactly representable in bf16 (the rounding only drops the residual's low
// bits), so AsStored is idempotent (BundleTest checks it).
at::Tensor Residual(const at::Tensor& value, const at::Tensor& anchor) {
  const at::Tensor a = anchor.detach().to(at::kCPU, at::kDouble);
  return (value.detach().to(at::kCPU, at::kDouble) - a)
      .to(at::kFloat)
      .to(at::kBFloat16)
      .contiguous();
}

// anchor + residual, rounded once to `dtype`.
at::Tensor Expand(const at::Tensor& anchor, const at::Tensor& residual, at::ScalarType dtype) {
  return (anchor.to(at::kCPU, at::kDouble) + residual.to(at::kDouble)).to(dtype).contiguous();
}

// Adds the defined tensors of `list` as forward.<name>.<i>, as residuals against `anchors`
// where they can be; returns their indices.
json AddList(zoo::TensorMap& out, const std::string& name, const TensorList& list,
             const TensorList* anchors = nullptr) {
  json idx = json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].defined()) continue;
    const bool residual = anchors && i < anchors->size() && Condensable(list[i], (*anchors)[i]);
    out["forward." + name + "." + std::to_string(i)] =
        residual ? Residual(list[i], (*anchors)[i]) : list[i];
    idx.push_back(i);
  }
  return idx;
}

// The integer type of a float type's width: its bits, to find rows that are +0.0 bit for bit.
at::ScalarType BitsType(at::ScalarType t) {
  switch (c10::elementSize(t)) {
    case 8: return at::kLong;
    case 4: return at::kInt;
    default: return at::kShort;
  }
}

// A gradient kept in full, as stored: when at least a quarter of its rows are all +0.0 bits
// (an embedding's rows for the tokens the batch lacks), only the other rows, with their
// indices under "<name>#rows" and the full shape in `elided` (the decoder puts the zero rows
// back: the same bits).
void AddGrad(zoo::TensorMap& out, const std::string& name, const at::Tensor& g, json& elided) {
  if (g.dim() < 2 || g.size(0) == 0 || !at::isFloatingType(g.scalar_type())) {
    out[name] = g;
    return;
  }
  const at::Tensor c = g.detach().to(at::kCPU).contiguous();
  const at::Tensor bits = c.view(BitsType(c.scalar_type())).reshape({c.size(0), -1});
  const at::Tensor kept = bits.ne(0).any(1).nonzero().reshape({-1});
  if (kept.numel() * 4 > c.size(0) * 3) {
    out[name] = g;
    return;
  }
  out[name] = c.index_select(0, kept);
  out[name + "#rows"] = kept.to(at::kLong);
  elided[name] = c.sizes().vec();
}

json AddGrads(zoo::TensorMap& out, const std::string& name, const GradMap& grads, json& elided,
              const GradMap* anchors = nullptr) {
  json names = json::array();
  for (const auto& [p, g] : grads) {
    if (!g.defined()) continue;
    auto a = anchors ? anchors->find(p) : GradMap::const_iterator();
    const bool residual = anchors && a != anchors->end() && Condensable(g, a->second);
    AddGrad(out, "train.grads." + name + "." + p, residual ? Residual(g, a->second) : g, elided);
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

// A BF16 tensor in a golden or declared list is a residual against the same index or parameter
// of the anchor list: the reference is anchor + residual in fp64 (golden) or fp32 (declared).
StatusOr<at::Tensor> FromResidual(const at::Tensor& t, const at::Tensor* anchor,
                                  const std::string& name, bool golden) {
  if (t.scalar_type() != at::kBFloat16) return t;
  if (anchor == nullptr || !anchor->defined() || anchor->sizes() != t.sizes() ||
      anchor->scalar_type() != at::kFloat) {
    return InvalidArgumentError("bundle: tensor '" + name +
                                "': a residual without an F32 anchor of its shape");
  }
  return Expand(*anchor, t, golden ? at::kDouble : at::kFloat);
}

// `anchors`: the list a golden or declared list's residuals are against (null for the anchor
// list itself).
StatusOr<TensorList> ListFrom(Reader& r, const json& lists, const std::string& name,
                              int64_t count, const TensorList* anchors = nullptr) {
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
    const size_t k = i.get<size_t>();
    const std::string tensor = "forward." + name + "." + std::to_string(k);
    TS_ASSIGN_OR_RETURN(at::Tensor t, r.Take(tensor, false));
    if (anchors == nullptr) {  // the anchor list itself (at any dtype)
      out[k] = std::move(t);
      continue;
    }
    const at::Tensor* anchor = k < anchors->size() ? &(*anchors)[k] : nullptr;
    TS_ASSIGN_OR_RETURN(out[k], FromResidual(t, anchor, tensor, name == "golden"));
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
  TS_ASSIGN_OR_RETURN(out.golden, ListFrom(r, f["lists"], "golden", n, &out.outputs));
  TS_ASSIGN_OR_RETURN(out.declared, ListFrom(r, f["lists"], "declared", n, &out.outputs));
  return out;
}

// A gradient as AddGrad stored it, whole again.
StatusOr<at::Tensor> TakeGrad(Reader& r, const std::string& name, const json& elided) {
  TS_ASSIGN_OR_RETURN(at::Tensor t, r.Take(name, true));
  auto shape = elided.find(name);
  if (shape == elided.end()) return t;
  TS_ASSIGN_OR_RETURN(at::Tensor rows, r.Take(name + "#rows", false));
  std::vector<int64_t> full;
  if (shape->is_array()) {
    for (const auto& d : *shape) full.push_back(d.is_number_integer() ? d.get<int64_t>() : -1);
  }
  const bool fits =
      full.size() >= 2 && full.size() == static_cast<size_t>(t.dim()) &&
      std::all_of(full.begin(), full.end(), [](int64_t d) { return d >= 0; }) &&
      rows.scalar_type() == at::kLong && rows.dim() == 1 && rows.size(0) == t.size(0) &&
      std::equal(full.begin() + 1, full.end(), t.sizes().begin() + 1) &&
      (rows.numel() == 0 || (rows.min().item<int64_t>() >= 0 && rows.max().item<int64_t>() < full[0]));
  if (!fits) return InvalidArgumentError("bundle: tensor '" + name + "': its rows do not fit its shape");
  at::Tensor whole = at::zeros(full, t.options());
  whole.index_copy_(0, rows, t);
  return whole;
}

StatusOr<GradMap> GradsFrom(Reader& r, const json& lists, const std::string& name,
                            const json& elided, const GradMap* anchors = nullptr) {
  GradMap out;
  auto it = lists.find(name);
  if (it == lists.end()) return out;
  if (!it->is_array())
    return InvalidArgumentError("bundle: train.lists." + name + ": not an array");
  for (const auto& p : *it) {
    if (!p.is_string()) return InvalidArgumentError("bundle: train.lists." + name + ": not names");
    const std::string tensor = "train.grads." + name + "." + p.get<std::string>();
    TS_ASSIGN_OR_RETURN(at::Tensor t, TakeGrad(r, tensor, elided));
    if (anchors == nullptr) {  // the anchor list itself
      out[p.get<std::string>()] = std::move(t);
      continue;
    }
    auto a = anchors->find(p.get<std::string>());
    const at::Tensor* anchor = a != anchors->end() ? &a->second : nullptr;
    TS_ASSIGN_OR_RETURN(out[p.get<std::string>()],
                        FromResidual(t, anchor, tensor, name == "golden"));
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
  const json elided = t.value("elided_rows", json::object());
  if (!elided.is_object()) return InvalidArgumentError("bundle: train.elided_rows: not an object");
  TS_ASSIGN_OR_RETURN(out.grads, GradsFrom(r, t["lists"], "reference", elided));
  TS_ASSIGN_OR_RETURN(out.grads_declared,
                      GradsFrom(r, t["lists"], "declared", elided, &out.grads));
  TS_ASSIGN_OR_RETURN(out.grads_golden, GradsFrom(r, t["lists"], "golden", elided, &out.grads));
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

at::Tensor AsStored(const at::Tensor& value, const at::Tensor& anchor) {
  if (!Condensable(value, anchor)) return value;
  return Expand(anchor, Residual(value, anchor), value.scalar_type());
}

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
    if (!f.golden.empty()) lists["golden"] = AddList(tensors, "golden", f.golden, &f.outputs);
    if (!f.declared.empty())
      lists["declared"] = AddList(tensors, "declared", f.declared, &f.outputs);
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
    json lists = json::object(), elided = json::object();
    if (!t.grads.empty()) lists["reference"] = AddGrads(tensors, "reference", t.grads, elided);
    if (!t.grads_declared.empty())
      lists["declared"] = AddGrads(tensors, "declared", t.grads_declared, elided, &t.grads);
    if (!t.grads_golden.empty())
      lists["golden"] = AddGrads(tensors, "golden", t.grads_golden, elided, &t.grads);
    meta["train"] = OutcomeJson(t.outcome);
    if (!elided.empty()) meta["train"]["elided_rows"] = elided;
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
