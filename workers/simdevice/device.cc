// The simulated accelerator's backend: allocator, device guard, runtime ops, device kernels and
// the counted CPU fallback, all on the PrivateUse1 dispatch key.
//
// How a device kernel computes: device memory is host memory owned by SimAllocator, so a kernel
// views its device operands as CPU tensors without copying (AsCpuAlias), applies the profile's
// declared numerics (bf16 rounding of matmul inputs, optional bf16 results), runs the ATen CPU
// kernel of the same operator, writes results into fresh device allocations (counted against
// memory_bytes), and finally applies any seeded defect that matches. An op that is not native on
// the active profile is sent to at::native::cpu_fallback, which copies operands to real CPU
// tensors and back, and is counted (calls, wall time) per operator.

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <nlohmann/json.hpp>
#include <torch/library.h>

#include "workers/simdevice/internal/defects.h"
#include "workers/simdevice/runtime.h"

namespace ts::simdevice {
namespace {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;
constexpr const char* kTagOom = "[simdevice:oom] ";
constexpr const char* kTagDtype = "[simdevice:unsupported_dtype] ";
constexpr const char* kTagError = "[simdevice:device_error] ";

using internal::Defect;
using internal::DefectMode;
using internal::EffectKind;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------
// Global device state.

// Ops with a device kernel in this backend. A profile's native_ops must name only these (with or
// without overload); the rest of ATen reaches the device through the fallback.
enum class OpClass { kMatmul, kReduction, kElementwise };
struct KernelDef {
  const char* name;  // schema name without "aten::", with overload
  OpClass cls;
  std::vector<std::string> rounded_args;  // matmul operands rounded under bf16 numerics
};
const std::vector<KernelDef>& KernelSet() {
  static const std::vector<KernelDef> kSet = {
      {"mm", OpClass::kMatmul, {"self", "mat2"}},
      {"bmm", OpClass::kMatmul, {"self", "mat2"}},
      {"addmm", OpClass::kMatmul, {"mat1", "mat2"}},
      {"baddbmm", OpClass::kMatmul, {"batch1", "batch2"}},
      {"convolution", OpClass::kMatmul, {"input", "weight"}},
      {"convolution_backward", OpClass::kMatmul, {"grad_output", "input", "weight"}},
      {"add.Tensor", OpClass::kElementwise, {}},
      {"add_.Tensor", OpClass::kElementwise, {}},
      {"sub.Tensor", OpClass::kElementwise, {}},
      {"sub_.Tensor", OpClass::kElementwise, {}},
      {"mul.Tensor", OpClass::kElementwise, {}},
      {"mul_.Tensor", OpClass::kElementwise, {}},
      {"div.Tensor", OpClass::kElementwise, {}},
      {"div_.Tensor", OpClass::kElementwise, {}},
      {"neg", OpClass::kElementwise, {}},
      {"exp", OpClass::kElementwise, {}},
      {"log", OpClass::kElementwise, {}},
      {"sqrt", OpClass::kElementwise, {}},
      {"rsqrt", OpClass::kElementwise, {}},
      {"pow.Tensor_Scalar", OpClass::kElementwise, {}},
      {"sin", OpClass::kElementwise, {}},
      {"cos", OpClass::kElementwise, {}},
      {"erf", OpClass::kElementwise, {}},
      {"tanh", OpClass::kElementwise, {}},
      {"tanh_backward", OpClass::kElementwise, {}},
      {"sigmoid", OpClass::kElementwise, {}},
      {"sigmoid_backward", OpClass::kElementwise, {}},
      {"gelu", OpClass::kElementwise, {}},
      {"gelu_backward", OpClass::kElementwise, {}},
      {"silu", OpClass::kElementwise, {}},
      {"silu_backward", OpClass::kElementwise, {}},
      {"relu", OpClass::kElementwise, {}},
      {"threshold_backward", OpClass::kElementwise, {}},
      {"where.self", OpClass::kElementwise, {}},
      {"masked_fill.Scalar", OpClass::kElementwise, {}},
      {"masked_fill_.Scalar", OpClass::kElementwise, {}},
      {"clamp", OpClass::kElementwise, {}},
      {"maximum", OpClass::kElementwise, {}},
      {"minimum", OpClass::kElementwise, {}},
      {"eq.Scalar", OpClass::kElementwise, {}},
      {"ne.Scalar", OpClass::kElementwise, {}},
      {"embedding", OpClass::kElementwise, {}},
      {"embedding_dense_backward", OpClass::kReduction, {}},
      {"index_select", OpClass::kElementwise, {}},
      {"gather", OpClass::kElementwise, {}},
      {"cat", OpClass::kElementwise, {}},
      {"sum.dim_IntList", OpClass::kReduction, {}},
      {"sum", OpClass::kReduction, {}},
      {"mean.dim", OpClass::kReduction, {}},
      {"amax", OpClass::kReduction, {}},
      {"cumsum", OpClass::kReduction, {}},
      {"_softmax", OpClass::kReduction, {}},
      {"_softmax_backward_data", OpClass::kReduction, {}},
      {"_log_softmax", OpClass::kReduction, {}},
      {"_log_softmax_backward_data", OpClass::kReduction, {}},
      {"native_layer_norm", OpClass::kReduction, {}},
      {"native_layer_norm_backward", OpClass::kReduction, {}},
      {"nll_loss_forward", OpClass::kReduction, {}},
      {"nll_loss_backward", OpClass::kReduction, {}},
  };
  return kSet;
}

const KernelDef* FindKernel(const std::string& qualified) {
  static const std::unordered_map<std::string, const KernelDef*> kIndex = [] {
    std::unordered_map<std::string, const KernelDef*> m;
    for (const auto& k : KernelSet()) m[std::string("aten::") + k.name] = &k;
    return m;
  }();
  auto it = kIndex.find(qualified);
  return it == kIndex.end() ? nullptr : it->second;
}

ProfileInfo DefaultProfile() {
  ProfileInfo p;
  p.name = "sim-default";
  p.sdk_version = "0.0.0";
  p.memory_bytes = int64_t{1} << 32;
  p.compiler.supported_ops = {};
  return p;
}

struct DeviceState {
  std::mutex mu;  // guards everything below except the atomics
  ProfileInfo profile = DefaultProfile();
  std::vector<Defect> defects;
  std::mt19937_64 rng{0};
  Counters counters;
  std::atomic<int64_t> generation{1};
  std::atomic<int64_t> capacity{int64_t{1} << 32};
  std::atomic<int64_t> current_bytes{0};
  std::atomic<int64_t> peak_bytes{0};
  std::atomic<int> exec_mode{static_cast<int>(ExecMode::kEager)};
};
DeviceState& State() {
  static DeviceState* s = new DeviceState();  // never destroyed: kernels may run at exit
  return *s;
}

std::string DtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "float32";
    case c10::kDouble: return "float64";
    case c10::kHalf: return "float16";
    case c10::kBFloat16: return "bfloat16";
    case c10::kComplexFloat: return "complex64";
    case c10::kComplexDouble: return "complex128";
    case c10::kChar: return "int8";
    case c10::kByte: return "uint8";
    case c10::kShort: return "int16";
    case c10::kInt: return "int32";
    case c10::kLong: return "int64";
    case c10::kBool: return "bool";
    default: return c10::toString(t);
  }
}

// Per-process cache of which dtypes are unsupported, refreshed on activation (hot path: every
// allocation checks it).
std::atomic<uint64_t> g_unsupported_mask{0};
void CheckDtype(c10::ScalarType t) {
  if (g_unsupported_mask.load(std::memory_order_relaxed) & (uint64_t{1} << static_cast<int>(t))) {
    TORCH_CHECK(false, kTagDtype, "dtype ", DtypeName(t), " is not supported by device ",
                ActiveProfile().name);
  }
}

// ---------------------------------------------------------------------------------------------
// Allocator: host memory with a capacity. Layout of a block: [header (size) | data].

constexpr size_t kHeader = 64;

void FreeBlock(void* ctx) {
  if (ctx == nullptr) return;
  auto* base = static_cast<char*>(ctx);
  size_t n = 0;
  std::memcpy(&n, base, sizeof(n));
  State().current_bytes.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
  std::free(base);
}

class SimAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) const override {
    const c10::Device device(kDeviceType, 0);
    if (nbytes == 0) return {nullptr, nullptr, &FreeBlock, device};
    auto& s = State();
    const int64_t n = static_cast<int64_t>(nbytes);
    const int64_t now = s.current_bytes.fetch_add(n, std::memory_order_relaxed) + n;
    if (now > s.capacity.load(std::memory_order_relaxed)) {
      s.current_bytes.fetch_sub(n, std::memory_order_relaxed);
      TORCH_CHECK(false, kTagOom, "out of device memory: tried to allocate ", nbytes,
                  " bytes with ", now - n, " of ", s.capacity.load(), " bytes in use");
    }
    int64_t peak = s.peak_bytes.load(std::memory_order_relaxed);
    while (now > peak && !s.peak_bytes.compare_exchange_weak(peak, now)) {
    }
    void* base = std::aligned_alloc(64, ((nbytes + kHeader + 63) / 64) * 64);
    TORCH_CHECK(base != nullptr, kTagOom, "host allocation of ", nbytes, " bytes failed");
    std::memcpy(base, &nbytes, sizeof(nbytes));
    return {static_cast<char*>(base) + kHeader, base, &FreeBlock, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
};

SimAllocator g_allocator;
REGISTER_ALLOCATOR(kDeviceType, &g_allocator);

// ---------------------------------------------------------------------------------------------
// Device guard: one device, one (default) stream.

struct SimGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDeviceType; }
  c10::Device exchangeDevice(c10::Device) const override { return c10::Device(kDeviceType, 0); }
  c10::Device getDevice() const override { return c10::Device(kDeviceType, 0); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.index() <= 0, kTagError, "no such device index ", static_cast<int>(d.index()));
  }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, SimGuardImpl);

// ---------------------------------------------------------------------------------------------
// Runtime ops (not counted: they are plumbing, not compute).

at::Tensor AsCpuAlias(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kDeviceType) return t;
  auto opts = t.options().device(c10::kCPU);
  if (t.numel() == 0 || t.data_ptr() == nullptr) return at::empty_strided(t.sizes(), t.strides(), opts);
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), opts);
}

at::Tensor EmptyMemoryFormat(at::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                             c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                             c10::optional<bool> pin_memory,
                             c10::optional<at::MemoryFormat> memory_format) {
  (void)layout;
  (void)device;
  (void)pin_memory;
  const auto st = c10::dtype_or_default(dtype);
  CheckDtype(st);
  return at::detail::empty_generic(size, &g_allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   st, memory_format);
}

at::Tensor EmptyStrided(at::IntArrayRef size, at::IntArrayRef stride,
                        c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                        c10::optional<at::Device> device, c10::optional<bool> pin_memory) {
  (void)layout;
  (void)device;
  (void)pin_memory;
  const auto st = c10::dtype_or_default(dtype);
  CheckDtype(st);
  return at::detail::empty_strided_generic(size, stride, &g_allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st);
}

at::Tensor CopyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  (void)non_blocking;
  if (self.device().type() == kDeviceType || dst.device().type() == kDeviceType) {
    CheckDtype(dst.scalar_type());
  }
  at::Tensor dst_cpu = AsCpuAlias(dst);
  dst_cpu.copy_(AsCpuAlias(self));
  return dst;
}

at::Tensor CopyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return CopyFrom(self, dst, false);
}

const at::Tensor& Resize(const at::Tensor& self, at::IntArrayRef size,
                         c10::optional<at::MemoryFormat> memory_format) {
  // The CPU implementation reallocates through the storage's own allocator (ours) and only
  // touches host memory, which is what device memory is here.
  return at::native::resize_(self, size, memory_format);
}

at::Tensor AsStrided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                     c10::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

// at::_convolution (what traces record for conv2d) picks its backend by device type and, for
// any device but CPU/CUDA/MKLDNN, calls the *_overrideable ops, whose CPU kernels only throw.
// They route to the regular convolution ops, which this device runs (native or fallback).
at::Tensor ConvolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const c10::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                   at::IntArrayRef padding, at::IntArrayRef dilation,
                                   bool transposed, at::IntArrayRef output_padding,
                                   int64_t groups) {
  return at::convolution(input, weight, bias, stride, padding, dilation, transposed,
                         output_padding, groups);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ConvolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  const int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  return at::convolution_backward(grad_output, input, weight,
                                  at::OptionalIntArrayRef(at::IntArrayRef(&out_channels, 1)),
                                  stride, padding, dilation, transposed, output_padding, groups,
                                  output_mask);
}

bool HasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// ---------------------------------------------------------------------------------------------
// Per-operator info, cached per thread and invalidated when a profile is activated.

struct OpInfo {
  std::string name;  // "aten::add.Tensor"
  const KernelDef* kernel = nullptr;
  bool native = false;  // has a kernel and the profile lists it
  std::vector<size_t> rounded_arg_idx;
  std::vector<const Defect*> defects;  // those naming this op; pointers into State().defects
  Numerics numerics;                    // of the profile this entry was built under
};

const OpInfo& LookupOp(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const void*, OpInfo> cache;
  thread_local int64_t cache_generation = 0;
  auto& s = State();
  const int64_t gen = s.generation.load(std::memory_order_acquire);
  if (gen != cache_generation) {
    cache.clear();
    cache_generation = gen;
  }
  const void* key = &op.schema();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;

  OpInfo info;
  const auto& schema = op.schema();
  info.name = schema.name();
  if (!schema.overload_name().empty()) info.name += "." + schema.overload_name();
  info.kernel = FindKernel(info.name);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    info.native = info.kernel != nullptr && OpListMatches(s.profile.native_ops, info.name);
    info.numerics = s.profile.numerics;
    for (const auto& d : s.defects) {
      if (d.op == info.name || d.op == StripOverload(info.name)) info.defects.push_back(&d);
    }
  }
  if (info.kernel != nullptr) {
    const auto& args = schema.arguments();
    for (size_t i = 0; i < args.size(); ++i) {
      for (const auto& r : info.kernel->rounded_args) {
        if (args[i].name() == r) info.rounded_arg_idx.push_back(i);
      }
    }
  }
  return cache.emplace(key, std::move(info)).first->second;
}

void Record(std::map<std::string, OpStats> Counters::*table, const std::string& name, double ms) {
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  auto& st = (s.counters.*table)[name];
  st.calls += 1;
  st.ms += ms;
}

// ---------------------------------------------------------------------------------------------
// Defects.

bool DefectApplies(const Defect& d, const at::Tensor& out, ExecMode mode) {
  if (d.mode == DefectMode::kEager && mode != ExecMode::kEager) return false;
  if (d.mode == DefectMode::kCompiled && mode != ExecMode::kCompiled) return false;
  const auto& w = d.when;
  if (w.dtype && DtypeName(out.scalar_type()) != *w.dtype) return false;
  const int64_t numel = out.numel();
  if (w.min_numel && numel < *w.min_numel) return false;
  if (w.max_numel && numel > *w.max_numel) return false;
  const int64_t last = out.dim() == 0 ? 1 : out.size(-1);
  if (w.min_last_dim && last < *w.min_last_dim) return false;
  if (w.max_last_dim && last > *w.max_last_dim) return false;
  if (w.rank && out.dim() != *w.rank) return false;
  if (w.probability < 1.0) {
    auto& s = State();
    std::lock_guard<std::mutex> lock(s.mu);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (u(s.rng) >= w.probability) return false;
  }
  return true;
}

// Applies `d` to the CPU view of a device result (writes through to device memory).
void ApplyEffect(const Defect& d, const std::string& op, at::Tensor out_cpu) {
  switch (d.kind) {
    case EffectKind::kScale:
      if (at::isFloatingType(out_cpu.scalar_type())) out_cpu.mul_(d.value);
      return;
    case EffectKind::kOffset:
      if (at::isFloatingType(out_cpu.scalar_type())) out_cpu.add_(d.value);
      return;
    case EffectKind::kZeroTail:
    case EffectKind::kNan: {
      if (!at::isFloatingType(out_cpu.scalar_type()) || out_cpu.numel() == 0) return;
      // Operate on the logical row-major order, then write back if the result is strided.
      at::Tensor flat = out_cpu.is_contiguous() ? out_cpu.view({-1}) : out_cpu.contiguous().view({-1});
      const int64_t n = flat.numel();
      if (d.kind == EffectKind::kNan) {
        flat.narrow(0, 0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
      } else {
        const int64_t k = std::min<int64_t>(n, static_cast<int64_t>(d.value));
        flat.narrow(0, n - k, k).zero_();
      }
      if (!out_cpu.is_contiguous()) out_cpu.copy_(flat.view(out_cpu.sizes()));
      return;
    }
    case EffectKind::kError:
      TORCH_CHECK(false, kTagError, op, ": kernel execution failed (device status 0x2f)");
    case EffectKind::kAbort:
      std::fprintf(stderr, "simdevice: fatal device fault in %s, aborting\n", op.c_str());
      std::fflush(stderr);
      std::abort();
    case EffectKind::kSleepMs:
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(d.value));
      return;
  }
}

// Seeded defects, judged on the op's primary result as the device produced it (a CPU view of
// device memory, so effects land in the device tensor).
void ApplyDefects(const OpInfo& info, const at::Tensor& primary_cpu, ExecMode mode) {
  if (!primary_cpu.defined()) return;
  for (const Defect* d : info.defects) {
    if (DefectApplies(*d, primary_cpu, mode)) ApplyEffect(*d, info.name, primary_cpu);
  }
}

// ---------------------------------------------------------------------------------------------
// Device execution of one op (native kernels, and every op inside a compiled segment).

at::Tensor RoundBf16(const at::Tensor& t) {
  if (!t.defined() || t.scalar_type() != at::kFloat) return t;
  return t.to(at::kBFloat16).to(at::kFloat);
}

struct DeviceArg {
  size_t stack_pos;
  at::Tensor device_tensor;
};

// Moves a CPU result onto the device (fresh allocation, counted against capacity).
at::Tensor ToDevice(const at::Tensor& cpu) {
  CheckDtype(cpu.scalar_type());
  at::Tensor dev = at::detail::empty_strided_generic(
      cpu.sizes(), cpu.strides(), &g_allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      cpu.scalar_type());
  if (cpu.numel() > 0) AsCpuAlias(dev).copy_(cpu);
  return dev;
}

// If `cpu` is a view into the host memory of one of the device operands, returns the same view
// of the device tensor; otherwise an undefined tensor.
at::Tensor DeviceViewOf(const at::Tensor& cpu, const std::vector<DeviceArg>& args) {
  if (cpu.numel() == 0) return at::Tensor();
  const char* p = static_cast<const char*>(cpu.data_ptr());
  for (const auto& a : args) {
    const auto& st = a.device_tensor.storage();
    const char* base = static_cast<const char*>(st.data());
    if (base == nullptr || p < base || p >= base + st.nbytes()) continue;
    const int64_t elem = static_cast<int64_t>(cpu.element_size());
    const int64_t offset = (p - base) / elem;
    return at::native::as_strided_tensorimpl(a.device_tensor, cpu.sizes(), cpu.strides(), offset);
  }
  return at::Tensor();
}

void DeviceExecute(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& info,
                   ExecMode mode) {
  const auto t0 = Clock::now();
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t first = stack->size() - num_args;
  const Numerics& profile_numerics = info.numerics;

  // 1. Operands: device tensors become zero-copy CPU views of device memory.
  std::vector<DeviceArg> device_args;
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined() && t.device().type() == kDeviceType) {
        CheckDtype(t.scalar_type());
        device_args.push_back({first + i, t});
        v = AsCpuAlias(t);
      }
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) {
        at::Tensor t = list.get(j);
        if (t.defined() && t.device().type() == kDeviceType) {
          CheckDtype(t.scalar_type());
          device_args.push_back({first + i, t});
          list.set(j, AsCpuAlias(t));
        }
      }
    } else if (v.isDevice() && v.toDevice().type() == kDeviceType) {
      v = c10::IValue(c10::Device(c10::kCPU));
    }
  }
  // 2. Declared numerics of matmul-class ops: operands rounded to bf16 (accumulate in fp32).
  const bool matmul = info.kernel != nullptr && info.kernel->cls == OpClass::kMatmul;
  if (matmul && profile_numerics.matmul != MatmulNumerics::kFp32) {
    for (size_t idx : info.rounded_arg_idx) {
      c10::IValue& v = (*stack)[first + idx];
      if (v.isTensor()) v = RoundBf16(v.toTensor());
    }
  }

  // 3. Compute (below autograd: we are called from the autograd kernel's redispatch).
  op.callBoxed(stack);

  // 4. Results back to the device: aliases of operands map back to the operand (in-place and
  //    out= ops, views), fresh results are copied into device allocations.
  const size_t num_rets = schema.returns().size();
  const size_t rfirst = stack->size() - num_rets;
  bool round_out = false;
  if (mode == ExecMode::kEager) {
    if (matmul) round_out = profile_numerics.matmul == MatmulNumerics::kBf16;
    else if (info.kernel && info.kernel->cls == OpClass::kReduction)
      round_out = profile_numerics.reductions == Precision::kBf16;
    else round_out = profile_numerics.elementwise == Precision::kBf16;
  }
  at::Tensor primary_cpu;
  for (size_t i = 0; i < num_rets; ++i) {
    c10::IValue& v = (*stack)[rfirst + i];
    if (!v.isTensor()) continue;
    at::Tensor out = v.toTensor();
    if (!out.defined()) continue;
    at::Tensor dev = DeviceViewOf(out, device_args);
    if (!dev.defined()) {
      if (round_out && out.scalar_type() == at::kFloat) out = RoundBf16(out);
      dev = ToDevice(out);
    }
    if (i == 0) primary_cpu = AsCpuAlias(dev);
    v = dev;
  }
  ApplyDefects(info, primary_cpu, mode);
  Record(mode == ExecMode::kCompiled ? &Counters::compiled : &Counters::native, info.name,
         MsSince(t0));
}

void CountedFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& info) {
  const auto t0 = Clock::now();
  // Operands of an unsupported dtype cannot exist on the device (allocation refuses them), but a
  // fallback result could be one: at::native::cpu_fallback allocates it via our empty kernels,
  // which raise the device's unsupported-dtype error.
  at::native::cpu_fallback(op, stack);
  Record(&Counters::fallback, info.name, MsSince(t0));
}

ExecMode Mode() { return static_cast<ExecMode>(State().exec_mode.load(std::memory_order_relaxed)); }

// Registered for every op in KernelSet().
void KernelEntry(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpInfo& info = LookupOp(op);
  const ExecMode mode = Mode();
  if (info.native || mode == ExecMode::kCompiled) return DeviceExecute(op, stack, info, mode);
  CountedFallback(op, stack, info);
}

// Inside a compiled segment the device compiler lowers ops that have no eager kernel. They are
// computed like the fallback does (which handles out= resizing and aliasing in general) but are
// device execution: counted as compiled, and subject to defects.
void CompiledLowering(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& info) {
  const auto t0 = Clock::now();
  at::native::cpu_fallback(op, stack);
  const size_t num_rets = op.schema().returns().size();
  if (num_rets > 0) {
    const c10::IValue& v = (*stack)[stack->size() - num_rets];
    if (v.isTensor()) ApplyDefects(info, AsCpuAlias(v.toTensor()), ExecMode::kCompiled);
  }
  Record(&Counters::compiled, info.name, MsSince(t0));
}

// Catch-all for every other op that reaches the device.
void FallbackEntry(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpInfo& info = LookupOp(op);
  if (Mode() == ExecMode::kCompiled) return CompiledLowering(op, stack, info);
  CountedFallback(op, stack, info);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API.

c10::Device SimDevice() { return c10::Device(kDeviceType, 0); }

StatusOr<ProfileInfo> Activate(const std::string& profile_json, uint64_t seed) {
  TS_ASSIGN_OR_RETURN(ProfileInfo info, ParseProfile(profile_json));
  for (const auto& op : info.native_ops) {
    if (FindKernel(op) != nullptr) continue;
    bool any = false;
    for (const auto& k : KernelSet()) {
      if (StripOverload(std::string("aten::") + k.name) == op) any = true;
    }
    if (!any) {
      return InvalidArgumentError("native_ops: '" + op +
                                  "' has no device kernel in this simulator (see "
                                  "workers/simdevice/README.md for the kernel set)");
    }
  }
  auto parsed = nlohmann::json::parse(profile_json);
  std::vector<Defect> defects;
  if (parsed.contains("defects")) {
    TS_ASSIGN_OR_RETURN(defects, internal::ParseDefects(parsed["defects"]));
  }
  uint64_t mask = 0;
  for (int t = 0; t < static_cast<int>(c10::ScalarType::NumOptions); ++t) {
    if (info.unsupported_dtypes.count(DtypeName(static_cast<c10::ScalarType>(t)))) {
      mask |= uint64_t{1} << t;
    }
  }
  auto& s = State();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.profile = info;
    s.defects = std::move(defects);
    s.rng.seed(seed);
    s.capacity.store(info.memory_bytes);
    g_unsupported_mask.store(mask);
  }
  s.generation.fetch_add(1, std::memory_order_release);
  return info;
}

StatusOr<ProfileInfo> ActivateFile(const std::string& path, uint64_t seed) {
  std::ifstream in(path);
  if (!in) return NotFoundError("profile: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = Activate(ss.str(), seed);
  if (!r.ok()) return Status(r.status().code(), path + ": " + r.status().message());
  return r;
}

ProfileInfo ActiveProfile() {
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.profile;
}

void Reseed(uint64_t seed) {
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.rng.seed(seed);
}

ExecMode CurrentExecMode() { return Mode(); }

ScopedExecMode::ScopedExecMode(ExecMode mode) : previous_(Mode()) {
  State().exec_mode.store(static_cast<int>(mode));
}
ScopedExecMode::~ScopedExecMode() { State().exec_mode.store(static_cast<int>(previous_)); }

Counters SnapshotCounters() {
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  Counters c = s.counters;
  c.current_bytes = s.current_bytes.load();
  c.peak_bytes = s.peak_bytes.load();
  return c;
}

void ResetCounters() {
  auto& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.counters = Counters();
  s.peak_bytes.store(s.current_bytes.load());
}

FaultKind ClassifyFault(const std::string& what) {
  if (what.find(kTagOom) != std::string::npos) return FaultKind::kOom;
  if (what.find(kTagDtype) != std::string::npos) return FaultKind::kUnsupportedDtype;
  if (what.find(kTagError) != std::string::npos) return FaultKind::kDeviceError;
  return FaultKind::kNone;
}

}  // namespace ts::simdevice

// ---------------------------------------------------------------------------------------------
// Registrations.

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace ts::simdevice;
  m.impl("empty.memory_format", TORCH_FN(EmptyMemoryFormat));
  m.impl("empty_strided", TORCH_FN(EmptyStrided));
  m.impl("_copy_from", TORCH_FN(CopyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(CopyFromAndResize));
  m.impl("resize_", TORCH_FN(Resize));
  m.impl("as_strided", TORCH_FN(AsStrided));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("convolution_overrideable", TORCH_FN(ConvolutionOverrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(ConvolutionBackwardOverrideable));
  for (const auto& k : KernelSet()) {
    m.impl(k.name, torch::CppFunction::makeFromBoxedFunction<&KernelEntry>());
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&ts::simdevice::FallbackEntry>());
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type",
         TORCH_FN(ts::simdevice::HasCompatibleShallowCopyType));
}
