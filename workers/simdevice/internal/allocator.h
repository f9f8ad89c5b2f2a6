// The device allocator and its memory accounting. Device memory is host memory; the allocator
// holds the total in use to the active profile's memory_bytes and raises a `[simdevice:oom]`
// c10::Error beyond it. PRIVATE to workers/simdevice.
//
// Thread-safety: every function is thread-safe (atomics). The allocator is registered for
// PrivateUse1 at static initialisation and lives for the whole process.
#pragma once

#include <cstdint>

#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

namespace ts::simdevice::internal {

// The registered PrivateUse1 allocator (never null, never destroyed).
c10::Allocator* DeviceAllocator();

// Device memory that is `host`'s memory (no copy): `host` lives until the DataPtr is freed, and
// its bytes are charged like an allocation (`[simdevice:oom]` beyond capacity). The caller must
// hold the only reference to `host`, or device and host would share writes.
c10::DataPtr AdoptHostMemory(c10::Storage host);

// Capacity in bytes; allocations beyond it fail. 4 GiB until a profile sets it.
void SetMemoryCapacity(int64_t bytes);
// Bytes allocated now, and the most allocated at once since the last ResetPeakMemory().
int64_t CurrentMemoryBytes();
int64_t PeakMemoryBytes();
void ResetPeakMemory();  // peak := current

}  // namespace ts::simdevice::internal
