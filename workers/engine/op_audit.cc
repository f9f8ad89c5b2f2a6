#include "workers/engine/op_audit.h"

#include <algorithm>
#include <exception>
#include <sstream>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/stack.h>

#include "workers/simdevice/op_numerics.h"

namespace ts::engine::internal {
namespace {

// Ops whose results are not a function of their inputs: random draws, uninitialised memory.
bool NotReproducible(const std::string& op) {
  static const char* const kWords[] = {"rand",   "normal",      "bernoulli", "dropout",
                                       "uniform", "multinomial", "exponential", "geometric",
                                       "cauchy", "poisson",     "empty"};
  for (const char* w : kWords) {
    if (op.find(w) != std::string::npos) return true;
  }
  return false;
}

// Tolerance floor of a bit-for-bit op (one fp32 ulp), and of a result rounded to bf16 (one ulp
// of bf16: an honest device whose accumulation order differs may round the other way).
constexpr double kExactFloor = 1.0 / (1 << 23);
constexpr double kBf16Ulp = 1.0 / (1 << 8);

// An exception's first line, cut to 200 characters (c10 errors carry a backtrace after it).
std::string FirstLine(const char* what) {
  std::string s(what == nullptr ? "" : what);
  s = s.substr(0, s.find('\n'));
  return s.size() > 200 ? s.substr(0, 197) + "..." : s;
}

at::Tensor RoundBf16(const at::Tensor& t) {
  if (!t.defined() || t.scalar_type() != at::kFloat) return t;
  return t.to(at::kBFloat16).to(at::kFloat);
}

std::string DtypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kBool: return "bool";
    default: return c10::toString(t);
  }
}

std::string ShapeText(const at::Tensor& t) {
  std::ostringstream o;
  o << "[";
  for (int64_t d = 0; d < t.dim(); ++d) o << (d ? "," : "") << t.size(d);
  o << "]";
  return o.str();
}

// "[2,8,64] [64]"; tensor lists as "([2,8],[3,8])". Sets `dtype` from the first tensor.
std::string OperandShapes(const std::vector<c10::IValue>& inputs, std::string* dtype) {
  std::string out;
  auto note = [&](const at::Tensor& t) {
    if (dtype->empty()) *dtype = DtypeName(t.scalar_type());
  };
  for (const c10::IValue& v : inputs) {
    std::string item;
    if (v.isTensor() && v.toTensor().defined()) {
      note(v.toTensor());
      item = ShapeText(v.toTensor());
    } else if (v.isTensorList()) {
      item = "(";
      bool first = true;
      for (const at::Tensor& t : v.toTensorList()) {
        if (!t.defined()) continue;
        note(t);
        item += (first ? "" : ",") + ShapeText(t);
        first = false;
      }
      item += ")";
    }
    if (!item.empty()) out += (out.empty() ? "" : " ") + item;
  }
  return out;
}

// The op on the CPU at the declared numerics, from the call's argument copies (consumed).
std::vector<at::Tensor> Reference(simdevice::DeviceOpCall& call,
                                  const simdevice::DeclaredOp& declared) {
  const auto& schema = call.op->schema();
  torch::jit::Stack stack;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    c10::IValue v = std::move(call.inputs[i]);
    const c10::Argument& arg = schema.arguments()[i];
    if (v.isTensor() && arg.is_out()) {
      v = at::empty({0}, v.toTensor().options());  // the kernel sizes its out= result
    } else if (v.isTensor() && std::count(declared.rounded_args.begin(),
                                          declared.rounded_args.end(), arg.name()) > 0) {
      v = RoundBf16(v.toTensor());
    }
    stack.push_back(std::move(v));
  }
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    call.op->callBoxed(&stack);
  }
  std::vector<at::Tensor> out;
  for (const c10::IValue& v : stack) {
    if (v.isTensor()) {
      out.push_back(declared.round_result ? RoundBf16(v.toTensor()) : v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) {
        out.push_back(declared.round_result ? RoundBf16(t) : t);
      }
    } else {
      out.emplace_back();
    }
  }
  return out;
}

}  // namespace

double ErrorRatio(const at::Tensor& got, const at::Tensor& want, double tol) {
  if (!got.defined() || !want.defined()) return 0;
  if (got.sizes() != want.sizes()) return kNonFiniteRatio;
  if (want.numel() == 0) return 0;
  if (got.scalar_type() == want.scalar_type() && at::equal(got, want)) return 0;  // the usual case
  const at::Tensor g = got.to(at::kCPU, at::kDouble), w = want.to(at::kCPU, at::kDouble);
  const at::Tensor w_finite = at::isfinite(w);
  const at::Tensor same = (g == w) | (at::isnan(g) & at::isnan(w));
  // A mismatch that involves NaN or Inf on either side.
  if ((~same & ~(w_finite & at::isfinite(g))).any().item<bool>()) return kNonFiniteRatio;
  const at::Tensor zero = at::zeros({}, w.options());
  const double err = at::where(same, zero, (g - w).abs()).max().item<double>();
  if (err == 0) return 0;
  double scale = at::where(w_finite, w.abs(), zero).max().item<double>();
  if (scale == 0) scale = 1;
  return std::min(err / (tol * scale), kNonFiniteRatio);
}

void OpAudit::Check(simdevice::DeviceOpCall& call) {
  if (NotReproducible(call.name)) return;
  const simdevice::DeclaredOp declared =
      simdevice::DeclaredNumericsOf(numerics_, call.name, call.mode);
  double tol = std::max(declared.tolerance, kExactFloor);
  if (declared.round_result) tol = std::max(tol, kBf16Ulp);
  Suspect seen;
  seen.op = call.name;
  seen.shapes = OperandShapes(call.inputs, &seen.dtype);
  std::vector<at::Tensor> want;
  try {
    want = Reference(call, declared);
  } catch (const std::exception& e) {
    // The CPU cannot run it as called: not checked, and counted as such.
    std::lock_guard<std::mutex> lock(mu_);
    UncheckedOp& u = unchecked_[call.name];
    if (u.calls++ == 0) {
      u.op = call.name;
      u.error = FirstLine(e.what());
    }
    return;
  }
  double ratio = 0;
  for (size_t i = 0; i < call.results.size() && i < want.size(); ++i) {
    const at::Tensor& got = call.results[i];
    ratio = std::max(ratio, ErrorRatio(got, want[i], tol));
    // Feed what follows the reference result.
    if (got.defined() && want[i].defined() && got.sizes() == want[i].sizes()) {
      got.copy_(want[i]);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t index = calls_++;
  OpRecord& rec = ops_[call.name];
  ++rec.worst.total_calls;
  if (ratio <= 1) return;
  ++rec.worst.calls;
  if (rec.first_over < 0) rec.first_over = index;
  if (ratio > rec.worst.ratio) {
    rec.worst.ratio = ratio;
    rec.worst.op = seen.op;
    rec.worst.shapes = seen.shapes;
    rec.worst.dtype = seen.dtype;
  }
}

std::vector<Suspect> OpAudit::Suspects(size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const OpRecord*> over;
  for (const auto& [name, rec] : ops_) {
    if (rec.worst.calls > 0) over.push_back(&rec);
  }
  if (over.empty()) return {};
  auto first = std::min_element(over.begin(), over.end(), [](const OpRecord* a, const OpRecord* b) {
    return a->first_over < b->first_over;
  });
  std::iter_swap(over.begin(), first);
  std::stable_sort(over.begin() + 1, over.end(), [](const OpRecord* a, const OpRecord* b) {
    return a->worst.ratio > b->worst.ratio;
  });
  std::vector<Suspect> out;
  for (size_t i = 0; i < over.size() && i < max; ++i) out.push_back(over[i]->worst);
  return out;
}

std::vector<UncheckedOp> OpAudit::Unchecked() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<UncheckedOp> out;
  for (const auto& [name, u] : unchecked_) out.push_back(u);
  return out;
}

ReplayFindings ReplayOpByOp(const simdevice::Numerics& numerics,
                            const std::function<void()>& replay) {
  OpAudit audit(numerics);
  {
    simdevice::ScopedOpChecker checker([&audit](simdevice::DeviceOpCall& c) { audit.Check(c); });
    try {
      replay();
    } catch (const std::exception&) {
      // A device fault: the replay ends here; the ops checked so far stand.
    }
  }
  return {audit.Suspects(), audit.Unchecked()};
}

}  // namespace ts::engine::internal
