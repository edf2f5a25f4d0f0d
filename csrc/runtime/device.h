// The device registry: TORCHNEURON_NUM_DEVICES simulated NeuronCores, each owning its HBM
// allocator and hardware queue, started lazily; plus the calling thread's current device/stream.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/caching_allocator.h"
#include "runtime/hardware_queue.h"

namespace torchneuron::runtime {

constexpr int kMaxDevices = 64;

class Device {
 public:
  Device(int index, size_t hbm_bytes);
  int index() const { return index_; }
  CachingAllocator& allocator() { return allocator_; }
  HardwareQueue& queue() { return queue_; }

  // Waits for all queued work and raises a pending fault.
  void synchronize() { queue_.synchronize(); }
  // Waits for the queue and returns cached segments to HBM.
  void empty_cache() { allocator_.empty_cache(); }

  // Streams share the queue; a stream is only an id. Pool streams are 1..kPoolSize.
  StreamId new_stream();
  StreamId pool_stream();
  static constexpr StreamId kPoolSize = 32;

 private:
  const int index_;
  HardwareQueue queue_;
  CachingAllocator allocator_;
  std::atomic<StreamId> next_stream_{kPoolSize + 1};
  std::atomic<StreamId> next_pool_stream_{0};
};

// Number of devices, from TORCHNEURON_NUM_DEVICES (default 2). Never throws, never starts a queue.
int device_count() noexcept;
// HBM capacity per device, from TORCHNEURON_HBM_GB (default 8).
size_t hbm_capacity_bytes() noexcept;

// The device, started on first use. Throws InvalidArgument for a bad index and
// ForkedProcessError in a child forked after the parent started a device.
Device& device(int index);
// True once any device has been started in this process.
bool is_initialized() noexcept;
// True in a child forked after the parent had started a device: the device is unusable there.
bool in_bad_fork() noexcept;
// Throws InvalidArgument naming the valid range.
void check_device_index(int index);

// Per-thread current device (default 0) and current stream per device (default stream).
int current_device() noexcept;
void set_current_device(int index);
StreamId current_stream(int device_index) noexcept;
void set_current_stream(int device_index, StreamId stream);

}  // namespace torchneuron::runtime
