// The PrivateUse1 device guard: one device (index 0) with one default stream. Registered at
// static initialisation; no header, c10 finds it through its registry.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "workers/simdevice/internal/device_state.h"

namespace ts::simdevice::internal {
namespace {

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

}  // namespace
}  // namespace ts::simdevice::internal

C10_REGISTER_GUARD_IMPL(PrivateUse1, ts::simdevice::internal::SimGuardImpl);
