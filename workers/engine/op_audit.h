// The op-by-op replay (README.md, "Suspects"): a mode run again on the device with an op checker
// installed that compares each device op with the same op on the CPU at the declared numerics
// (simdevice/op_numerics.h, the kernel table's tolerance) and then substitutes that reference
// result for the device's, so that every op is fed the reference inputs and an error upstream
// never shows up as a divergence downstream. Private to the engine.
//
// Thread-safety: OpAudit::Check may be called from any thread (autograd's device thread runs
// backward ops); one replay at a time per process (the checker is process-global).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "workers/engine/verdict.h"
#include "workers/simdevice/profile.h"
#include "workers/simdevice/runtime.h"

namespace ts::engine::internal {

inline constexpr size_t kMaxSuspects = 8;

class OpAudit {
 public:
  explicit OpAudit(const simdevice::Numerics& numerics) : numerics_(numerics) {}

  // Compares one device op with its CPU reference and substitutes the reference results.
  void Check(simdevice::DeviceOpCall& call);

  // The ops over tolerance: the first divergent op first, then by ratio (at most `max`).
  std::vector<Suspect> Suspects(size_t max = kMaxSuspects) const;
  // The ops whose CPU reference threw, with how many calls, by name.
  std::vector<UncheckedOp> Unchecked() const;

 private:
  struct OpRecord {
    int64_t first_over = -1;  // index of its first call over tolerance
    Suspect worst;            // its worst call, with counts
  };
  mutable std::mutex mu_;
  simdevice::Numerics numerics_;
  int64_t calls_ = 0;                               // guarded by mu_
  std::map<std::string, OpRecord> ops_;             // guarded by mu_
  std::map<std::string, UncheckedOp> unchecked_;    // guarded by mu_
};

// What a replay found: the suspects (OpAudit::Suspects) and the ops it could not check.
struct ReplayFindings {
  std::vector<Suspect> suspects;
  std::vector<UncheckedOp> unchecked;
};

// Runs `replay` with an OpAudit installed as the device's op checker and returns its findings.
// A device fault during the replay ends it; what was found until then is kept.
ReplayFindings ReplayOpByOp(const simdevice::Numerics& numerics,
                            const std::function<void()>& replay);

// The error of `got` against `want` over tolerance: max |got - want| / (tol * max |want|),
// over finite reference elements; kNonFiniteRatio for a shape mismatch or a non-finite value
// where the reference has a finite one (or a different non-finite one).
double ErrorRatio(const at::Tensor& got, const at::Tensor& want, double tol);

}  // namespace ts::engine::internal
