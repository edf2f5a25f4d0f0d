// The neuron random generator: a c10::GeneratorImpl over the runtime's Philox state, with the
// 16-byte (seed, offset) state layout that torch.distributed's tensor RNG tracker reads.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include "runtime/philox.h"

namespace torchneuron::aten {

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex device_index);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // Reserves `words` 32-bit random words for one kernel launch.
  runtime::PhiloxStream reserve(uint64_t words) { return philox_.reserve(words); }
  // The state itself, for graph capture and replay.
  runtime::PhiloxGenerator& philox() { return philox_; }

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  runtime::PhiloxGenerator philox_;
};

const at::Generator& default_generator(c10::DeviceIndex device_index);
at::Generator new_generator(c10::DeviceIndex device_index);

}  // namespace torchneuron::aten
