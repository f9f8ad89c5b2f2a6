// Layout of a device block: [header: size in bytes | data], 64-byte aligned. The header lets the
// deleter (a plain function) give the right count back to the accounting.
#include "workers/simdevice/internal/allocator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include <c10/util/Exception.h>

#include "workers/simdevice/internal/device_state.h"

namespace ts::simdevice::internal {
namespace {

constexpr size_t kHeader = 64;

// Plain atomics with constant initialisation: usable from deleters that run during exit.
std::atomic<int64_t> g_capacity{int64_t{1} << 32};
std::atomic<int64_t> g_current_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};

void FreeBlock(void* ctx) {
  if (ctx == nullptr) return;
  auto* base = static_cast<char*>(ctx);
  size_t n = 0;
  std::memcpy(&n, base, sizeof(n));
  g_current_bytes.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
  std::free(base);
}

// Counts `nbytes` against the capacity (raising `[simdevice:oom]` beyond it) and the peak.
void Charge(size_t nbytes) {
  const int64_t n = static_cast<int64_t>(nbytes);
  const int64_t now = g_current_bytes.fetch_add(n, std::memory_order_relaxed) + n;
  if (now > g_capacity.load(std::memory_order_relaxed)) {
    g_current_bytes.fetch_sub(n, std::memory_order_relaxed);
    TORCH_CHECK(false, kTagOom, "out of device memory: tried to allocate ", nbytes, " bytes with ",
                now - n, " of ", g_capacity.load(), " bytes in use");
  }
  int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (now > peak && !g_peak_bytes.compare_exchange_weak(peak, now)) {
  }
}

// An adopted host block: the host storage kept alive, and the bytes charged for it.
struct Adopted {
  c10::Storage host;
  size_t nbytes;
};

void FreeAdopted(void* ctx) {
  auto* a = static_cast<Adopted*>(ctx);
  g_current_bytes.fetch_sub(static_cast<int64_t>(a->nbytes), std::memory_order_relaxed);
  delete a;
}

class SimAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) const override {
    const c10::Device device(kDeviceType, 0);
    if (nbytes == 0) return {nullptr, nullptr, &FreeBlock, device};
    Charge(nbytes);
    void* base = std::aligned_alloc(64, ((nbytes + kHeader + 63) / 64) * 64);
    TORCH_CHECK(base != nullptr, kTagOom, "host allocation of ", nbytes, " bytes failed");
    std::memcpy(base, &nbytes, sizeof(nbytes));
    return {static_cast<char*>(base) + kHeader, base, &FreeBlock, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
};

SimAllocator g_allocator;
REGISTER_ALLOCATOR(kDeviceType, &g_allocator);

}  // namespace

c10::Allocator* DeviceAllocator() { return &g_allocator; }

c10::DataPtr AdoptHostMemory(c10::Storage host) {
  const size_t nbytes = host.nbytes();
  Charge(nbytes);
  void* data = host.data();
  auto* a = new Adopted{std::move(host), nbytes};
  return {data, a, &FreeAdopted, c10::Device(kDeviceType, 0)};
}

void SetMemoryCapacity(int64_t bytes) { g_capacity.store(bytes); }
int64_t CurrentMemoryBytes() { return g_current_bytes.load(); }
int64_t PeakMemoryBytes() { return g_peak_bytes.load(); }
void ResetPeakMemory() { g_peak_bytes.store(g_current_bytes.load()); }

}  // namespace ts::simdevice::internal
