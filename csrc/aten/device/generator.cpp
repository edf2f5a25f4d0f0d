#include "aten/device/generator.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstring>
#include <mutex>
#include <random>

#include "aten/device/neuron_tensor.h"

namespace torchneuron::aten {
namespace {
constexpr size_t kStateBytes = 16;  // uint64 seed, then int64 offset
}

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device_index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device_index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) { philox_.set_seed(seed); }

void NeuronGeneratorImpl::set_offset(uint64_t offset) {
  TORCH_CHECK(offset % 4 == 0, "neuron generator offset must be a multiple of 4, got ", offset);
  philox_.set_offset(offset);
}

uint64_t NeuronGeneratorImpl::get_offset() const { return philox_.offset(); }

uint64_t NeuronGeneratorImpl::current_seed() const { return philox_.seed(); }

uint64_t NeuronGeneratorImpl::seed() {
  const uint64_t seed = (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  set_current_seed(seed);
  return seed;
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.device().is_cpu() && new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "neuron generator state must be a CPU torch.uint8 tensor, got ", new_state.dtype(),
              " on ", new_state.device());
  TORCH_CHECK(static_cast<size_t>(new_state.numel()) == kStateBytes,
              "neuron generator state must have ", kStateBytes, " bytes (seed, offset), got ",
              new_state.numel());
  TORCH_CHECK(new_state.is_contiguous(), "neuron generator state must be contiguous");
  uint64_t seed;
  int64_t offset;
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed, bytes, 8);
  std::memcpy(&offset, bytes + 8, 8);
  TORCH_CHECK(offset >= 0, "neuron generator offset must not be negative, got ", offset);
  philox_.set_seed(seed);
  set_offset(static_cast<uint64_t>(offset));
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  at::Tensor state = at::empty({static_cast<int64_t>(kStateBytes)}, at::TensorOptions().dtype(at::kByte));
  const uint64_t seed = philox_.seed();
  const int64_t offset = static_cast<int64_t>(philox_.offset());
  std::memcpy(state.data_ptr(), &seed, 8);
  std::memcpy(static_cast<uint8_t*>(state.data_ptr()) + 8, &offset, 8);
  return state.getIntrusivePtr();
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* copy = new NeuronGeneratorImpl(device().index());
  copy->philox_.set_seed(philox_.seed());
  copy->philox_.set_offset(philox_.offset());
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device_index) {
  static std::array<at::Generator, runtime::kMaxDevices>* generators =
      new std::array<at::Generator, runtime::kMaxDevices>();
  static std::once_flag flags[runtime::kMaxDevices];
  const int index = device_index < 0 ? runtime::current_device() : device_index;
  runtime_call([&] { runtime::check_device_index(index); });
  std::call_once(flags[index], [&] {
    (*generators)[index] = at::make_generator<NeuronGeneratorImpl>(static_cast<c10::DeviceIndex>(index));
  });
  return (*generators)[index];
}

at::Generator new_generator(c10::DeviceIndex device_index) {
  const int index = device_index < 0 ? runtime::current_device() : device_index;
  runtime_call([&] { runtime::check_device_index(index); });
  return at::make_generator<NeuronGeneratorImpl>(static_cast<c10::DeviceIndex>(index));
}

}  // namespace torchneuron::aten
