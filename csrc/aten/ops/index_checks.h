// Host-side range checks of index values, so that an index out of range raises at the call with
// CPU PyTorch's exception type and message instead of as a device fault at the next sync.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace torchneuron::aten {

struct OutOfRange {
  int64_t position;  // in the index's flattened order
  int64_t value;
};

// The first element of an int32 / int64 `index` outside [lower, upper), or nullopt when all are
// in range. A neuron index is read back, which waits for the queue up to it (and raises an
// earlier pending fault there). Nothing is read while a graph is being captured on its device
// (its values do not exist yet), nor under TORCHNEURON_DEVICE_INDEX_CHECKS=1: the kernels' own
// device-side checks report those at the next synchronization.
std::optional<OutOfRange> first_out_of_range(const at::Tensor& index, int64_t lower, int64_t upper);

// Marks a scope whose index ops take indices the caller computed in range (unique's inverse, a
// sparse tensor's coordinates): they skip the host check and its wait.
class TrustedIndices {
 public:
  TrustedIndices();
  ~TrustedIndices();
  TrustedIndices(const TrustedIndices&) = delete;
  TrustedIndices& operator=(const TrustedIndices&) = delete;
  static bool active();

 private:
  bool previous_;
};

}  // namespace torchneuron::aten
