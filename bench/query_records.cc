// Record generation for the query benchmark: rates and formats are documented in the header.
#include "bench/query_records.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "proto/names.h"

namespace ts::bench {

namespace {

// The aten vocabulary: ops every class may use, then (from kFirstFallback) the ops a device
// commonly lacks, most often lacking first.
constexpr const char* kOps[] = {
    "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::linear", "aten::add",
    "aten::mul", "aten::view", "aten::reshape", "aten::permute", "aten::transpose", "aten::softmax",
    "aten::layer_norm", "aten::embedding", "aten::_to_copy",
    // every class uses the 15 above
    "aten::conv1d", "aten::conv2d", "aten::convolution", "aten::sub", "aten::div", "aten::neg",
    "aten::pow", "aten::sqrt", "aten::rsqrt", "aten::exp", "aten::log", "aten::tanh",
    "aten::sigmoid", "aten::relu", "aten::gelu", "aten::silu", "aten::_softmax",
    "aten::log_softmax", "aten::native_layer_norm", "aten::group_norm", "aten::batch_norm",
    "aten::native_batch_norm", "aten::index_select", "aten::gather", "aten::scatter",
    "aten::scatter_add", "aten::cat", "aten::stack", "aten::split", "aten::chunk",
    "aten::contiguous", "aten::expand", "aten::slice", "aten::select", "aten::squeeze",
    "aten::unsqueeze", "aten::flatten", "aten::mean", "aten::sum", "aten::max", "aten::min",
    "aten::amax", "aten::argmax", "aten::masked_fill", "aten::where", "aten::clamp",
    "aten::clamp_min", "aten::abs", "aten::sign", "aten::floor", "aten::ceil", "aten::round",
    "aten::erf", "aten::sin", "aten::arange", "aten::zeros", "aten::ones", "aten::full",
    "aten::empty", "aten::fill_", "aten::copy_", "aten::dropout", "aten::native_dropout",
    "aten::bernoulli", "aten::rand", "aten::randn", "aten::tril", "aten::triu", "aten::baddbmm",
    "aten::addcmul", "aten::addcdiv", "aten::lerp", "aten::eq", "aten::ne", "aten::lt", "aten::gt",
    "aten::le", "aten::ge", "aten::logical_and", "aten::logical_or", "aten::logical_not",
    "aten::bitwise_and", "aten::upsample_nearest2d", "aten::avg_pool2d", "aten::max_pool2d",
    "aten::adaptive_avg_pool2d", "aten::pad", "aten::constant_pad_nd", "aten::unfold",
    "aten::repeat", "aten::one_hot", "aten::einsum", "aten::scaled_dot_product_attention",
    "aten::rms_norm", "aten::hardtanh", "aten::leaky_relu", "aten::elu", "aten::mish",
    "aten::softplus", "aten::glu", "aten::var", "aten::std", "aten::norm",
    "aten::linalg_vector_norm", "aten::index_add", "aten::nll_loss", "aten::mse_loss",
    "aten::_log_softmax_backward_data", "aten::threshold_backward",
    "aten::embedding_dense_backward", "aten::cos",
    // kFirstFallback: ops a device commonly lacks, most often first
    "aten::cumsum", "aten::nonzero", "aten::erfinv", "aten::topk", "aten::masked_select",
    "aten::sort", "aten::cumprod", "aten::upsample_bilinear2d", "aten::unique",
    "aten::repeat_interleave", "aten::_scaled_dot_product_flash_attention", "aten::roll",
    "aten::flip", "aten::logsumexp", "aten::index_put_", "aten::reflection_pad2d",
    "aten::grid_sampler_2d", "aten::bucketize", "aten::searchsorted", "aten::im2col",
    "aten::col2im", "aten::histc", "aten::stft", "aten::fft_rfft", "aten::fft_irfft", "aten::cdist",
    "aten::masked_scatter", "aten::pixel_shuffle", "aten::adaptive_avg_pool1d", "aten::_unique2"};
constexpr int kNumOps = sizeof(kOps) / sizeof(kOps[0]);
constexpr int kCoreOps = 15;
constexpr int kFirstFallback = kNumOps - 30;

// Ops whose output shape depends on the data: the compiler breaks the graph at them and again
// where the dynamic shape is used.
bool DataDependent(const std::string& op) {
  return op == "aten::nonzero" || op == "aten::masked_select" || op == "aten::unique" ||
         op == "aten::_unique2";
}

// splitmix64 over a running key: the generator's only source of randomness.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t Hash(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return Mix(Mix(Mix(Mix(a) ^ b) ^ c) ^ d);
}
double Unit(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }
uint64_t HashString(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ULL;
  return Mix(h);
}

// Salts, one per use, so that draws for different purposes are independent.
enum Salt : uint64_t {
  kSaltBase = 1,
  kSaltKind,
  kSaltDrift,
  kSaltFlipKind,
  kSaltFlaky,
  kSaltModel,
  kSaltOps,
  kSaltNumbers,
  kSaltClass,
  kSaltFix,
  kSaltErrorOp,
};

constexpr double kPassRate[] = {0, 0.80, 0.70, 0.75};  // by Mode: eager, compile, train
constexpr double kFlipForGood = 0.0010;                // per (model, mode, sweep)
constexpr double kFlipOnce = 0.0008;                   // reverted in the next sweep
constexpr double kFlaky = 0.2;                         // of flips, rerun as they were before

// A failure of `mode` drawn from u in [0, 1): the realistic mix per mode.
pb::Verdict FailureKind(pb::Mode mode, double u) {
  struct Share {
    double upto;
    pb::Verdict v;
  };
  static const Share kEager[] = {{0.58, pb::VERDICT_FAIL_ACCURACY},
                                 {0.82, pb::VERDICT_DEVICE_ERROR},
                                 {0.90, pb::VERDICT_UNSUPPORTED_DTYPE},
                                 {0.96, pb::VERDICT_OOM},
                                 {0.985, pb::VERDICT_CRASH},
                                 {1.0, pb::VERDICT_TIMEOUT}};
  static const Share kCompile[] = {{0.45, pb::VERDICT_FAIL_ACCURACY},
                                   {0.75, pb::VERDICT_COMPILE_FAIL},
                                   {0.82, pb::VERDICT_COMPILE_TIMEOUT},
                                   {0.94, pb::VERDICT_DEVICE_ERROR},
                                   {0.975, pb::VERDICT_OOM},
                                   {0.99, pb::VERDICT_CRASH},
                                   {1.0, pb::VERDICT_TIMEOUT}};
  static const Share kTrain[] = {
      {0.62, pb::VERDICT_FAIL_ACCURACY}, {0.80, pb::VERDICT_DEVICE_ERROR},
      {0.92, pb::VERDICT_OOM},           {0.96, pb::VERDICT_UNSUPPORTED_DTYPE},
      {0.985, pb::VERDICT_CRASH},        {1.0, pb::VERDICT_TIMEOUT}};
  const Share* table = mode == pb::MODE_EAGER     ? kEager
                       : mode == pb::MODE_COMPILE ? kCompile
                                                  : kTrain;
  for (int i = 0;; ++i) {
    if (u < table[i].upto || table[i].upto >= 1.0) return table[i].v;
  }
}

int LayersOf(const nlohmann::json& config) {
  for (const char* k :
       {"num_hidden_layers", "n_layers", "num_layers", "n_layer", "encoder_layers"}) {
    auto it = config.find(k);
    if (it != config.end() && it->is_number_integer()) return std::max(1, it->get<int>());
  }
  return 12;
}

std::string Fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), f, a, b, c);
  return buf;
}

}  // namespace

absl::StatusOr<std::vector<CatalogEntry>> LoadCatalog(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("--catalog: cannot open '" + path + "'");
  std::vector<CatalogEntry> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const std::string at = path + ":" + std::to_string(n) + ": ";
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return absl::InvalidArgumentError(at + "not a JSON object");
    for (const char* k : {"id", "task", "arch"}) {
      if (!j.contains(k) || !j[k].is_string() || j[k].get<std::string>().empty()) {
        return absl::InvalidArgumentError(at + k + ": missing or not a non-empty string");
      }
    }
    if (!j.contains("config") || !j["config"].is_object()) {
      return absl::InvalidArgumentError(at + "config: missing or not an object");
    }
    CatalogEntry e;
    e.model.set_id(j["id"].get<std::string>());
    e.model.set_task(j["task"].get<std::string>());
    e.model.set_arch(j["arch"].get<std::string>());
    e.model.set_family(j.value("family", ""));
    e.model.set_config_hash(j.value("config_hash", ""));
    e.model.set_config_json(j["config"].dump());
    if (j.contains("tiny_config") && j["tiny_config"].is_object()) {
      e.tiny_config_json = j["tiny_config"].dump();
    }
    e.key = HashString(e.model.id());
    e.layers = LayersOf(j["config"]);
    out.push_back(std::move(e));
  }
  if (out.empty()) return absl::InvalidArgumentError("--catalog: '" + path + "' has no models");
  return out;
}

RecordGenerator::RecordGenerator(const std::vector<CatalogEntry>& catalog, uint64_t seed)
    : seed_(seed) {
  for (const auto& e : catalog) {
    by_id_.emplace(e.model.id(), &e);
    if (classes_.count(e.model.arch())) continue;
    const uint64_t ck = Hash(seed_, HashString(e.model.arch()), kSaltClass);
    ClassProfile p;
    const int n = 25 + static_cast<int>(Mix(ck) % 36);  // 25..60 ops
    for (int i = 0; i < kCoreOps; ++i) p.ops.push_back(i);
    // The rest from the common ops, drawn without repetition.
    std::vector<int> pool;
    for (int i = kCoreOps; i < kFirstFallback; ++i) pool.push_back(i);
    for (uint64_t k = 1; static_cast<int>(p.ops.size()) < n && !pool.empty(); ++k) {
      const size_t pick = Hash(ck, k) % pool.size();
      p.ops.push_back(pool[pick]);
      pool.erase(pool.begin() + static_cast<long>(pick));
    }
    // 0-3 fallback ops (30% / 35% / 20% / 15%), skewed towards the popular ones.
    const double u = Unit(Hash(ck, 1000));
    const int nf = u < 0.30 ? 0 : u < 0.65 ? 1 : u < 0.85 ? 2 : 3;
    for (uint64_t k = 0; static_cast<int>(p.fallback.size()) < nf; ++k) {
      const double v = Unit(Hash(ck, 2000 + k));
      const int op = kFirstFallback + static_cast<int>(v * v * (kNumOps - kFirstFallback));
      if (std::find(p.fallback.begin(), p.fallback.end(), op) != p.fallback.end()) continue;
      p.fallback.push_back(op);
      p.ops.push_back(op);
      const uint64_t fx = Hash(ck, op, kSaltFix);
      p.fixed_from.push_back(Unit(fx) < 0.10 ? 2 + static_cast<int64_t>(Mix(fx) % 40) : 0);
    }
    p.shift = (Unit(Hash(ck, 3000)) - 0.5) * 0.3;  // -15..+15 points
    std::sort(p.ops.begin(), p.ops.end());
    classes_.emplace(e.model.arch(), std::move(p));
  }
}

const CatalogEntry* RecordGenerator::Find(const std::string& model_id) const {
  auto it = by_id_.find(model_id);
  return it == by_id_.end() ? nullptr : it->second;
}

const RecordGenerator::ClassProfile& RecordGenerator::Profile(const std::string& arch) const {
  return classes_.at(arch);
}

pb::Verdict RecordGenerator::Status(const CatalogEntry& e, pb::Mode mode, int64_t sweep) const {
  const uint64_t mk = Hash(seed_, e.key, kSaltModel);
  // Models that fail before any mode runs: every mode has that status.
  const double whole = Unit(Hash(mk, kSaltBase));
  if (whole < 0.003) return pb::VERDICT_LOAD_FAIL;
  if (whole < 0.005) return pb::VERDICT_REF_FAIL;
  const double rate = std::clamp(kPassRate[mode] + Profile(e.model.arch()).shift, 0.02, 0.995);
  bool pass = Unit(Hash(mk, mode, kSaltBase)) < rate;
  int64_t failed_at = 0;  // the sweep whose flip made it fail (0: from the start)
  for (int64_t s = 2; s <= sweep; ++s) {
    const double d = Unit(Hash(mk, mode, s, kSaltDrift));
    if (d < kFlipForGood || (s == sweep && d < kFlipForGood + kFlipOnce)) {
      pass = !pass;
      if (!pass) failed_at = s;
    }
  }
  if (pass) return pb::VERDICT_PASS;
  return FailureKind(mode, Unit(Hash(mk, mode, failed_at, kSaltFlipKind)));
}

namespace {

// What one record draws on besides its statuses.
struct Draw {
  uint64_t key;  // per (model, sweep, run)
  double Next(uint64_t salt) const { return Unit(Hash(key, salt)); }
};

// The op an error names: one of the model's fallback ops when it has some, else any of its ops.
std::string ErrorOp(const RecordGenerator::ClassProfile& p, const Draw& d) {
  const auto& from = p.fallback.empty() ? p.ops : p.fallback;
  return kOps[from[Hash(d.key, kSaltErrorOp) % from.size()]];
}

std::string ErrorFor(pb::Verdict v, pb::Mode mode, const std::string& op, const Draw& d,
                     const pb::ModeVerdict& m) {
  switch (v) {
    case pb::VERDICT_FAIL_ACCURACY:
      if (mode == pb::MODE_TRAIN) {
        return Fmt("loss curve leaves its band: gap %.3g x band at step %.0f (device %.4g)",
                   m.max_loss_gap_ratio(), 1 + std::floor(d.Next(40) * 4), m.loss_device(4));
      }
      return Fmt("rmse_ratio %.3g > 3 (rmse vs fp64 %.3g, declared-numerics reference %.3g), ",
                 m.rmse_ratio(), m.rmse_device(), m.rmse_reference()) +
             Fmt("max_abs_err %.3g, cosine %.6f", m.max_abs_err(), m.cosine());
    case pb::VERDICT_DEVICE_ERROR:
      return "[simdevice:device_error] " + op + ": kernel execution failed (device status 0x2f)";
    case pb::VERDICT_UNSUPPORTED_DTYPE:
      return "[simdevice:unsupported_dtype] " + op + ": dtype BFloat16 is not supported";
    case pb::VERDICT_OOM:
      return "[simdevice:oom] out of device memory: tried to allocate " +
             std::to_string(1 << (20 + Hash(d.key, 41) % 8)) + " bytes in " + op;
    case pb::VERDICT_COMPILE_FAIL:
      return "compile_fail: a device segment has " + std::to_string(5000 + Hash(d.key, 42) % 4000) +
             " nodes, more than 4096 (segment ending at " + op + ")";
    case pb::VERDICT_COMPILE_TIMEOUT:
      return Fmt("compile_timeout: simulated compile %.0f ms > budget 60000 ms",
                 60000 + d.Next(43) * 1e5);
    case pb::VERDICT_CRASH:
      return "runner child killed by signal 11 (SIGSEGV) while running " + op;
    case pb::VERDICT_TIMEOUT:
      return "model exceeded its time limit of 300 s (last op " + op + ")";
    case pb::VERDICT_LOAD_FAIL:
      return "config: cannot build the model: " + op + " has no implementation for this layout";
    case pb::VERDICT_REF_FAIL:
      return "CPU reference produced non-finite outputs after " + op;
    default:
      return "";
  }
}

// Accuracy numbers of an eager or compile run: within tolerance on pass, off on fail_accuracy.
void FillAccuracy(pb::ModeVerdict& m, pb::Verdict v, const Draw& d, uint64_t salt) {
  const double ref = 1e-3 * (0.3 + 2 * d.Next(salt + 1));
  const double ratio =
      v == pb::VERDICT_FAIL_ACCURACY ? 3.2 + 40 * d.Next(salt + 2) : 0.8 + 0.6 * d.Next(salt + 2);
  m.set_has_accuracy(true);
  m.set_rmse_reference(ref);
  m.set_rmse_device(ref * ratio);
  m.set_rmse_ratio(ratio);
  m.set_max_abs_err(ref * ratio * (3 + 5 * d.Next(salt + 3)));
  m.set_cosine(v == pb::VERDICT_FAIL_ACCURACY ? 0.98 + 0.0199 * d.Next(salt + 4)
                                              : 0.999999 - 1e-5 * d.Next(salt + 4));
  m.set_rmse_vs_declared(ref * (0.9 + 0.2 * d.Next(salt + 5)));
  m.set_max_rel_err(1e-3 * ratio);
  m.set_allclose(v == pb::VERDICT_PASS);
}

// The compiled graph: breaks at the class's fallback ops the compiler lacks and at
// data-dependent ops, segments between them.
void FillCompile(pb::ModeVerdict& m, const RecordGenerator::ClassProfile& p,
                 const std::vector<bool>& native, const CatalogEntry& e, const Draw& d) {
  for (size_t i = 0; i < p.fallback.size(); ++i) {
    const std::string op = kOps[p.fallback[i]];
    if (DataDependent(op)) {
      m.add_break_reasons("data-dependent op " + op);
      m.add_break_reasons("dynamic shape from " + op);
    } else if (!native[i]) {
      m.add_break_reasons("unsupported op " + op);
    }
  }
  m.set_graph_breaks(m.break_reasons_size());
  m.set_device_segments(m.graph_breaks() + 1);
  m.set_graph_nodes(static_cast<int64_t>(p.ops.size()) * (4 + e.layers));
  m.set_compile_ms(200 + 40.0 * e.layers * (1 + d.Next(50)));
  m.set_compile_wall_ms(m.compile_ms() * 0.05);
  m.set_first_run_ms(m.compile_ms() * 1.1);
}

// Five SGD steps: the reference loss falls from ~ln(vocab); the device follows it within the
// band on pass and leaves it on fail_accuracy.
void FillTrain(pb::ModeVerdict& m, pb::Verdict v, const Draw& d) {
  double loss = 5.5 + d.Next(60), gap = 0;
  for (int s = 0; s < 5; ++s) {
    const double band = 0.02 * loss + 1e-3;
    const double off = v == pb::VERDICT_FAIL_ACCURACY ? band * (1.5 + 3 * d.Next(61 + s))
                                                      : band * 0.6 * d.Next(61 + s);
    m.add_loss_reference(loss);
    m.add_loss_device(loss + off);
    m.add_loss_declared(loss + band * 0.1);
    m.add_loss_band(band);
    gap = std::max(gap, off / band);
    loss *= 0.93 - 0.04 * d.Next(70 + s);
  }
  m.set_max_loss_gap_ratio(gap);
}

}  // namespace

pb::ModelResult RecordGenerator::Make(const CatalogEntry& e, int64_t sweep, int run) const {
  const ClassProfile& p = Profile(e.model.arch());
  const Draw d{Hash(seed_, e.key, static_cast<uint64_t>(sweep), static_cast<uint64_t>(run))};
  const uint64_t mk = Hash(seed_, e.key, kSaltModel);
  // A flaky flip's reruns come out as the model was in the sweep before.
  const bool flaky_rerun = run > 1 && Unit(Hash(mk, sweep, kSaltFlaky)) < kFlaky;
  pb::ModelResult r;
  r.set_model_id(e.model.id());
  r.set_run(run);
  r.set_family(e.model.family());
  r.set_arch(e.model.arch());
  r.set_task(e.model.task());
  r.set_config_hash(e.model.config_hash());
  r.set_tiny_config_json(e.tiny_config_json);
  // Ops: the class's set, a fallback op native from its fix on.
  std::vector<bool> native(p.fallback.size());
  for (size_t i = 0; i < p.fallback.size(); ++i) {
    native[i] = p.fixed_from[i] > 0 && sweep >= p.fixed_from[i];
  }
  int64_t native_calls = 0, all_calls = 0;
  std::vector<pb::OpUse> natives, fallbacks;
  for (int op : p.ops) {
    const auto f = std::find(p.fallback.begin(), p.fallback.end(), op);
    const bool is_native = f == p.fallback.end() || native[f - p.fallback.begin()];
    pb::OpUse u;
    u.set_op(kOps[op]);
    u.set_calls(static_cast<int64_t>((1 + Hash(mk, op, kSaltOps) % 8) * e.layers));
    u.set_ms(static_cast<double>(u.calls()) * (0.01 + 0.2 * d.Next(100 + op)) *
             (is_native ? 1 : 20));
    u.set_native(is_native);
    all_calls += u.calls();
    if (is_native) native_calls += u.calls();
    (is_native ? natives : fallbacks).push_back(std::move(u));
  }
  for (auto* list : {&natives, &fallbacks}) {
    for (auto& u : *list) *r.add_ops() = std::move(u);
  }
  r.set_distinct_ops(r.ops_size());
  r.set_native_ops(static_cast<int>(natives.size()));
  r.set_opcov_ratio(static_cast<double>(natives.size()) / r.ops_size());
  r.set_call_ratio(static_cast<double>(native_calls) / static_cast<double>(all_calls));
  const std::string error_op = ErrorOp(p, d);
  double total = 0;
  for (pb::Mode mode : {pb::MODE_EAGER, pb::MODE_COMPILE, pb::MODE_TRAIN}) {
    const pb::Verdict v = Status(e, mode, flaky_rerun ? sweep - 1 : sweep);
    pb::ModeVerdict& m = *r.add_modes();
    m.set_mode(mode);
    m.set_status(v);
    m.set_ms(5 + e.layers * 2.0 * (1 + d.Next(10 + mode)) * (mode == pb::MODE_TRAIN ? 3 : 1));
    total += m.ms();
    const bool ran = v != pb::VERDICT_LOAD_FAIL && v != pb::VERDICT_REF_FAIL;
    if (mode != pb::MODE_TRAIN && ran) FillAccuracy(m, v, d, 20 * mode);
    if (mode == pb::MODE_COMPILE && ran) FillCompile(m, p, native, e, d);
    if (mode == pb::MODE_TRAIN && ran) FillTrain(m, v, d);
    m.set_error(ErrorFor(v, mode, error_op, d, m));
    (*r.mutable_timings_ms())[proto::ModeName(mode)] = m.ms();
  }
  r.set_total_ms(total + 30);
  r.set_peak_device_bytes(static_cast<int64_t>(e.layers) * (4 << 20) +
                          static_cast<int64_t>(Hash(d.key, 7) % (64 << 20)));
  (*r.mutable_timings_ms())["build"] = 10 + 2.0 * e.layers;
  (*r.mutable_timings_ms())["reference"] = total * 0.4;
  (*r.mutable_timings_ms())["total"] = r.total_ms();
  return r;
}

}  // namespace ts::bench
