#include "runtime/philox.h"

namespace torchneuron::runtime {
namespace {

constexpr uint32_t kMultiplier0 = 0xD2511F53;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57;
constexpr uint32_t kWeyl0 = 0x9E3779B9;
constexpr uint32_t kWeyl1 = 0xBB67AE85;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

}  // namespace

PhiloxBlock philox4x32(PhiloxBlock counter, uint64_t key) {
  uint32_t k0 = static_cast<uint32_t>(key);
  uint32_t k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMultiplier0, counter[0], hi0, lo0);
    mulhilo(kMultiplier1, counter[2], hi1, lo1);
    counter = {hi1 ^ counter[1] ^ k0, lo1, hi0 ^ counter[3] ^ k1, lo0};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return counter;
}

uint32_t PhiloxStream::word(uint64_t index) const {
  const uint64_t block = offset / 4 + index / 4;
  PhiloxBlock counter = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0};
  return philox4x32(counter, seed)[index % 4];
}

void PhiloxGenerator::set_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t PhiloxGenerator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

void PhiloxGenerator::set_offset(uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  offset_ = offset;
}

uint64_t PhiloxGenerator::offset() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offset_;
}

PhiloxStream PhiloxGenerator::reserve(uint64_t words) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t rounded = (words + 3) / 4 * 4;
  if (capture_ != nullptr) {
    PhiloxStream stream{0, capture_offset_, capture_};
    capture_offset_ += rounded;
    return stream;
  }
  PhiloxStream stream{seed_, offset_};
  offset_ += rounded;
  return stream;
}

void PhiloxGenerator::begin_capture(const GraphRngState* state) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = state;
  capture_offset_ = 0;
}

uint64_t PhiloxGenerator::end_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = nullptr;
  return capture_offset_;
}

std::pair<uint64_t, uint64_t> PhiloxGenerator::take_for_replay(uint64_t words) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::pair<uint64_t, uint64_t> state{seed_, offset_};
  offset_ += words;
  return state;
}

}  // namespace torchneuron::runtime
