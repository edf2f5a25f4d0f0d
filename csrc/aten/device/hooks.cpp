// at::PrivateUse1HooksInterface for neuron: what torch.accelerator, generators, pinned memory
// and storage resizing ask of the backend.
#include <ATen/core/Tensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <cstring>

#include "aten/device/generator.h"
#include "aten/device/neuron_tensor.h"

namespace torchneuron::aten {
namespace {

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return runtime::device_count() > 0; }
  void init() const override {}  // devices start lazily on first use

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    for (int i = 0; i < runtime::device_count(); ++i) {
      if (runtime::device(i).allocator().owns(data)) {
        return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(i));
      }
    }
    TORCH_CHECK(false, "pointer ", data, " does not belong to any neuron device's memory.");
  }

  bool isPinnedPtr(const void* data) const override { return is_pinned_host_pointer(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }

  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override {
    return runtime::is_initialized();
  }

  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(runtime::device_count());
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    runtime_call([&] { runtime::set_current_device(device); });
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return static_cast<c10::DeviceIndex>(runtime::current_device());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex old = getCurrentDevice();
    setCurrentDevice(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  // storage.resize_(): a new block, the old bytes copied over on the queue, the rest left as is.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    const int index = impl->device().index();
    const size_t old_bytes = impl->nbytes();
    const int previous_device = runtime::current_device();
    runtime_call([&] { runtime::set_current_device(index); });
    c10::DataPtr fresh = impl->allocator()->allocate(new_bytes);
    runtime::set_current_device(previous_device);
    const size_t keep = std::min(old_bytes, new_bytes);
    if (keep > 0) {
      void* dst = fresh.get();
      const void* src = impl->data();
      runtime::LaunchInfo info = runtime::LaunchInfo::named("storage_resize");
      info.site = runtime::capture_launch_site();
      runtime_call([&] {
        runtime::device(index).queue().submit(runtime::current_stream(index), std::move(info),
                                              [dst, src, keep] { std::memcpy(dst, src, keep); });
      });
    }
    // The old block goes back to the pool now; the in-order queue reads it before any reuse.
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(new_bytes);
  }
};

const bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace
}  // namespace torchneuron::aten
