// Counter-based Philox 4x32-10 random numbers: a (seed, offset) state that kernels consume by
// reserving ranges of counters, so results do not depend on threading or launch order.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <utility>

namespace torchneuron::runtime {

using PhiloxBlock = std::array<uint32_t, 4>;

// The Philox seed and base offset of the graph replay being run: written by the replay command
// before its kernels run, read by the random kernels it captured (PhiloxStream::resolved).
struct GraphRngState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// One Philox 4x32 call with 10 rounds: 128 random bits for `counter` under `key`.
PhiloxBlock philox4x32(PhiloxBlock counter, uint64_t key);

// Uniform float in [0, 1) from 32 random bits (24 bits of mantissa, as torch does).
inline float uint32_to_uniform_float(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}
// Uniform double in [0, 1) from 64 random bits (53 bits of mantissa).
inline double uint64_to_uniform_double(uint64_t bits) {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

// Random stream position: word `index` of a draw that started at `offset` is word index % 4
// of block (offset / 4 + index / 4).
struct PhiloxStream {
  uint64_t seed;
  uint64_t offset;  // in 32-bit words, a multiple of 4 (as torch's Philox offsets are)
  // Set when a graph captured the draw: the seed is the replay's and offset counts from the
  // replay's base offset (see resolved()).
  const GraphRngState* graph = nullptr;

  // The concrete stream: as it is, or with the running replay's seed and base offset.
  PhiloxStream resolved() const {
    return graph == nullptr ? *this : PhiloxStream{graph->seed, graph->offset + offset, nullptr};
  }
  uint32_t word(uint64_t index) const;
};

// The state of one device's generator. Thread-safe.
class PhiloxGenerator {
 public:
  explicit PhiloxGenerator(uint64_t seed = 67280421310721ULL) : seed_(seed) {}

  void set_seed(uint64_t seed);
  uint64_t seed() const;
  void set_offset(uint64_t offset);
  uint64_t offset() const;
  // Reserves `words` 32-bit words, rounded up to a multiple of 4, and returns where they start.
  PhiloxStream reserve(uint64_t words);

  // While a graph captures, draws are taken relative to the replay's state and do not advance
  // the generator; end_capture returns the words they took (what each replay advances by).
  void begin_capture(const GraphRngState* state);
  uint64_t end_capture();
  // A replay's state: the current seed and offset, after which the offset advances by `words`.
  std::pair<uint64_t, uint64_t> take_for_replay(uint64_t words);

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
  const GraphRngState* capture_ = nullptr;
  uint64_t capture_offset_ = 0;
};

}  // namespace torchneuron::runtime
