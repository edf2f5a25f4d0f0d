// c10::impl::DeviceGuardImplInterface for neuron: current device and stream per thread,
// streams as ids on the device's one hardware queue, and events as queue markers.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "aten/device/neuron_tensor.h"
#include "runtime/event.h"

namespace torchneuron::aten {
namespace {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// c10 passes index -1 for a bare "neuron" device: it means the current device.
int resolve_index(c10::Device device) {
  return device.index() < 0 ? runtime::current_device() : device.index();
}

c10::Stream make_stream(int device_index, runtime::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, static_cast<c10::DeviceIndex>(device_index)),
                     id);
}

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device old = getDevice();
    if (old.index() != device.index()) setDevice(device);
    return old;
  }

  c10::Device getDevice() const override {
    return c10::Device(kNeuron, static_cast<c10::DeviceIndex>(runtime::current_device()));
  }

  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kNeuron, "expected a neuron device, got ", device);
    runtime_call([&] { runtime::set_current_device(device.index()); });
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    try {
      runtime::set_current_device(device.index());
    } catch (...) {
      // noexcept by contract: an invalid index leaves the current device as it was.
    }
  }

  c10::Stream getStream(c10::Device device) const override {
    const int index = resolve_index(device);
    return make_stream(index, runtime::current_stream(index));
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return make_stream(resolve_index(device), runtime::kDefaultStream);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*high_priority*/) const override {
    const int index = resolve_index(device);
    return runtime_call([&] { return make_stream(index, runtime::device(index).pool_stream()); });
  }

  // One hardware queue serves all streams, so priorities cannot reorder work; accepted as given.
  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    const int index = resolve_index(device);
    return runtime_call([&] { return make_stream(index, runtime::device(index).new_stream()); });
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    const c10::Stream old = getStream(stream.device());
    runtime_call([&] { runtime::set_current_stream(stream.device_index(), stream.id()); });
    return old;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(runtime::device_count());
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "event device index ", device_index, " does not match the stream's device ",
                stream.device());
    auto* neuron_event = static_cast<runtime::Event*>(*event);
    if (neuron_event == nullptr) {
      neuron_event = new runtime::Event(flag == c10::EventFlag::BACKEND_DEFAULT);
      *event = neuron_event;
    }
    runtime_call([&] { neuron_event->record(stream.device_index(), stream.id()); });
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;
    runtime_call([&] { static_cast<runtime::Event*>(event)->block(stream.device_index(), stream.id()); });
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    return runtime_call([&] { return static_cast<runtime::Event*>(event)->query(); });
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    delete static_cast<runtime::Event*>(event);
  }

  bool queryStream(const c10::Stream& stream) const override {
    return runtime_call([&] { return runtime::device(stream.device_index()).queue().stream_idle(stream.id()); });
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    runtime_call([&] { runtime::device(stream.device_index()).queue().synchronize_stream(stream.id()); });
  }

  void synchronizeEvent(void* event) const override {
    if (event == nullptr) return;
    runtime_call([&] { static_cast<runtime::Event*>(event)->synchronize(); });
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    const int index = device_index < 0 ? runtime::current_device() : device_index;
    synchronize_device(index);
  }

  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/) const override {}

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "elapsed_time needs both events recorded first; call record() on each.");
    return runtime_call([&] {
      return static_cast<runtime::Event*>(start)->elapsed_ms(*static_cast<runtime::Event*>(end));
    });
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace torchneuron::aten
