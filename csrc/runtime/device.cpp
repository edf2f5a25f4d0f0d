#include "runtime/device.h"

#include <pthread.h>

#include <array>
#include <cstdlib>
#include <mutex>
#include <string>

#include "runtime/errors.h"

namespace torchneuron::runtime {
namespace {

long env_long(const char* name, long fallback, long lo, long hi) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < lo || parsed > hi) return fallback;
  return parsed;
}

struct Registry {
  std::mutex mutex;
  std::array<std::atomic<Device*>, kMaxDevices> devices{};
  std::atomic<bool> initialized{false};
  std::atomic<bool> forked_child{false};
};

// Leaked on purpose: tensors freed during interpreter shutdown must still find their allocator.
Registry& registry() {
  static Registry* instance = [] {
    auto* r = new Registry();
    pthread_atfork(nullptr, nullptr, [] {
      Registry& reg = registry();
      // Worker threads do not survive fork(); a child must not touch the parent's devices.
      if (reg.initialized.load()) reg.forked_child = true;
    });
    return r;
  }();
  return *instance;
}

thread_local int t_current_device = 0;
thread_local std::array<StreamId, kMaxDevices> t_current_streams{};

}  // namespace

Device::Device(int index, size_t hbm_bytes)
    : index_(index), queue_(index), allocator_(index, hbm_bytes, [this] {
        // Releasing memory only needs the queue to drain; faults stay pending for the user.
        queue_.wait_for(queue_.last_submitted());
      }) {}

StreamId Device::new_stream() { return next_stream_.fetch_add(1); }

StreamId Device::pool_stream() { return 1 + next_pool_stream_.fetch_add(1) % kPoolSize; }

int device_count() noexcept {
  static const int count = static_cast<int>(env_long("TORCHNEURON_NUM_DEVICES", 2, 0, kMaxDevices));
  return count;
}

size_t hbm_capacity_bytes() noexcept {
  static const size_t bytes = static_cast<size_t>(env_long("TORCHNEURON_HBM_GB", 8, 1, 1 << 20)) << 30;
  return bytes;
}

void check_device_index(int index) {
  if (device_count() == 0) {
    throw InvalidArgument("no neuron devices are configured (TORCHNEURON_NUM_DEVICES=0); set it "
                          "to 1 or more to use device index " + std::to_string(index) + ".");
  }
  if (index < 0 || index >= device_count()) {
    throw InvalidArgument("neuron device index " + std::to_string(index) +
                          " is out of range: this process has " + std::to_string(device_count()) +
                          " neuron device(s), valid indices are 0.." +
                          std::to_string(device_count() - 1) +
                          ". Set TORCHNEURON_NUM_DEVICES to change the count.");
  }
}

Device& device(int index) {
  Registry& reg = registry();
  if (reg.forked_child.load(std::memory_order_relaxed)) {
    throw ForkedProcessError(
        "Cannot use the neuron device in a forked subprocess: the parent had already started it. "
        "Use the 'spawn' start method (multiprocessing.set_start_method('spawn')).");
  }
  if (static_cast<unsigned>(index) < static_cast<unsigned>(device_count())) {
    if (Device* existing = reg.devices[index].load(std::memory_order_acquire)) return *existing;
  }
  check_device_index(index);
  std::lock_guard<std::mutex> lock(reg.mutex);
  Device* existing = reg.devices[index].load();
  if (existing == nullptr) {
    existing = new Device(index, hbm_capacity_bytes());
    reg.devices[index].store(existing, std::memory_order_release);
    reg.initialized = true;
  }
  return *existing;
}

bool is_initialized() noexcept { return registry().initialized.load(); }

bool in_bad_fork() noexcept { return registry().forked_child.load(); }

int current_device() noexcept { return t_current_device; }

void set_current_device(int index) {
  check_device_index(index);
  t_current_device = index;
}

StreamId current_stream(int device_index) noexcept {
  if (device_index < 0 || device_index >= kMaxDevices) return kDefaultStream;
  return t_current_streams[device_index];
}

void set_current_stream(int device_index, StreamId stream) {
  check_device_index(device_index);
  t_current_streams[device_index] = stream;
}

}  // namespace torchneuron::runtime
