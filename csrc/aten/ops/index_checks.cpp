// Host-side range checks of index values (see index_checks.h).
#include "aten/ops/index_checks.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>

#include "aten/device/neuron_tensor.h"

namespace torchneuron::aten {
namespace {

thread_local bool trusted_indices = false;

// TORCHNEURON_DEVICE_INDEX_CHECKS=1 leaves index checks to the kernels, as on CUDA: no wait for
// the index, and an index out of range raises at the next synchronization.
bool device_checks_only() {
  static const bool only = [] {
    const char* value = std::getenv("TORCHNEURON_DEVICE_INDEX_CHECKS");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return only;
}

template <typename T>
std::optional<OutOfRange> scan(const T* values, int64_t count, int64_t lower, int64_t upper) {
  for (int64_t i = 0; i < count; ++i) {
    const auto v = static_cast<int64_t>(values[i]);
    if (v < lower || v >= upper) return OutOfRange{i, v};
  }
  return std::nullopt;
}

}  // namespace

std::optional<OutOfRange> first_out_of_range(const at::Tensor& index, int64_t lower, int64_t upper) {
  if (trusted_indices || index.numel() == 0) return std::nullopt;
  const c10::ScalarType type = index.scalar_type();
  if (type != at::kLong && type != at::kInt) return std::nullopt;
  at::Tensor host = index;
  if (!index.is_cpu()) {
    if (index.device().type() != c10::DeviceType::PrivateUse1 || device_checks_only()) return std::nullopt;
    const bool capturing = runtime_call([&] { return runtime::device(index.device().index()).queue().any_capture(); });
    if (capturing) return std::nullopt;
    host = index.to(at::kCPU);  // waits for the queue up to the index, as any read-back does
  }
  host = host.contiguous();
  return type == at::kLong ? scan(host.const_data_ptr<int64_t>(), host.numel(), lower, upper)
                           : scan(host.const_data_ptr<int32_t>(), host.numel(), lower, upper);
}

TrustedIndices::TrustedIndices() : previous_(trusted_indices) { trusted_indices = true; }
TrustedIndices::~TrustedIndices() { trusted_indices = previous_; }
bool TrustedIndices::active() { return trusted_indices; }

}  // namespace torchneuron::aten
