// Collectives between the processes of one machine through a shared-memory segment: each rank
// owns a slot, ranks meet at barriers of atomic counters, and reductions read every slot.
// Torch-free; the c10d backend sets the segment up through its store and calls these.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace torchneuron::collectives {

enum class ElementType : uint8_t { kFloat32, kFloat64, kFloat16, kBFloat16, kInt8, kUInt8, kInt32, kInt64 };
enum class Reduction : uint8_t { kSum, kProduct, kMin, kMax };

size_t element_size(ElementType type);
const char* element_name(ElementType type);

// Raised when a peer does not reach a barrier in time, or when the ranks called different
// collectives; the message says which.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class SharedMemoryGroup {
 public:
  // Rank 0 creates the segment `name` (a POSIX shared-memory name such as "/torchneuron-1a2b");
  // the others open it once it exists. `slot_bytes` is each rank's staging room per step.
  static SharedMemoryGroup create(const std::string& name, int rank, int size, size_t slot_bytes);
  static SharedMemoryGroup open(const std::string& name, int rank, int size, size_t slot_bytes);
  // Removes the name once every rank has mapped the segment (the mappings stay valid).
  static void unlink(const std::string& name);
  // Removes segments "<prefix><pid>-..." in /dev/shm that a process now gone created over a
  // minute ago: a job killed during its set-up could not remove its own.
  static void remove_orphans(const std::string& prefix);

  SharedMemoryGroup(SharedMemoryGroup&& other) noexcept;
  SharedMemoryGroup& operator=(SharedMemoryGroup&&) = delete;
  SharedMemoryGroup(const SharedMemoryGroup&) = delete;
  ~SharedMemoryGroup();

  // Each blocks until the collective is done on this rank. `timeout` bounds every wait for a peer.
  void allreduce(void* data, size_t count, ElementType type, Reduction op, std::chrono::milliseconds timeout);
  // `outputs[r]` receives rank r's `bytes` bytes.
  void allgather(const void* input, void* const* outputs, size_t bytes, std::chrono::milliseconds timeout);
  // `input` holds size pieces of `count` elements; piece r, reduced over ranks, lands in rank r's output.
  void reduce_scatter(const void* input, void* output, size_t count, ElementType type, Reduction op,
                      std::chrono::milliseconds timeout);
  void broadcast(void* data, size_t bytes, int root, std::chrono::milliseconds timeout);

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  struct Header;
  SharedMemoryGroup(void* base, size_t mapped_bytes, int rank, int size, size_t slot_bytes);
  // Publishes what this rank is about to run, meets the others, and checks they agree.
  void begin(const char* op, uint64_t a, uint64_t b, uint64_t c, std::chrono::milliseconds timeout);
  void barrier(std::chrono::milliseconds timeout);
  unsigned char* slot(int rank) const;

  void* base_;
  size_t mapped_bytes_;
  int rank_;
  int size_;
  size_t slot_bytes_;
  uint64_t phase_ = 0;
};

}  // namespace torchneuron::collectives
