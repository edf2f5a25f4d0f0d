// c10::DeviceAllocator over the runtime's per-device CachingAllocator (torch.accelerator.memory_*
// reaches it), and the pinned host allocator behind tensor.pin_memory().
#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "aten/device/neuron_tensor.h"
#include "runtime/caching_allocator.h"

namespace torchneuron::aten {
namespace {

namespace cda = c10::CachingDeviceAllocator;

void copy_stat_array(const runtime::StatArray& from, cda::StatArray& to) {
  for (size_t i = 0; i < from.size(); ++i) {
    to[i].current = from[i].current;
    to[i].peak = from[i].peak;
    to[i].allocated = from[i].allocated;
    to[i].freed = from[i].freed;
  }
}

// torch.profiler's profile_memory: each allocation and free with the device's totals after it.
void report_to_profiler(void* ptr, int64_t delta, int device) {
  const runtime::AllocatorStats stats = runtime::device(device).allocator().stats();
  c10::reportMemoryUsageToProfiler(ptr, delta, stats.allocated_bytes[runtime::kAggregatePool].current,
                                   stats.reserved_bytes[runtime::kAggregatePool].current,
                                   c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
}

void release_block(void* handle) {
  if (handle != nullptr && c10::memoryProfilingEnabled()) {
    const int device = runtime::CachingAllocator::block_device(handle);
    const auto size = static_cast<int64_t>(runtime::CachingAllocator::block_size(handle));
    runtime::CachingAllocator::release(handle);
    report_to_profiler(handle, -size, device);
    return;
  }
  runtime::CachingAllocator::release(handle);
}

class NeuronDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    const int index = runtime::current_device();
    void* handle = nullptr;
    void* ptr = runtime_call([&] { return runtime::device(index).allocator().allocate(bytes, &handle); });
    if (handle != nullptr && c10::memoryProfilingEnabled()) {
      report_to_profiler(handle, static_cast<int64_t>(runtime::CachingAllocator::block_size(handle)), index);
    }
    return {ptr, handle, &release_block,
            c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index))};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release_block; }

  // Device-to-device copy of raw bytes, ordered on the queue; used when torch clones storages.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    const int index = runtime::current_device();
    runtime_call([&] {
      runtime::HardwareQueue& queue = runtime::device(index).queue();
      runtime::LaunchInfo info = runtime::LaunchInfo::named("storage_copy");
      queue.submit(runtime::current_stream(index), std::move(info),
                   [dest, src, count] { std::memcpy(dest, src, count); });
      queue.synchronize();
    });
  }

  bool initialized() override { return runtime::is_initialized(); }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    for (int i = 0; i < runtime::device_count(); ++i) {
      runtime_call([&] { runtime::device(i).empty_cache(); });
    }
  }

  // One in-order queue serves every stream of a device, so a block freed after its last use
  // on any stream can only be reused by later commands: no per-stream tracking is needed.
  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {}

  cda::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    const runtime::AllocatorStats stats =
        runtime_call([&] { return runtime::device(device).allocator().stats(); });
    cda::DeviceStats out;
    copy_stat_array(stats.allocation, out.allocation);
    copy_stat_array(stats.segment, out.segment);
    copy_stat_array(stats.active, out.active);
    copy_stat_array(stats.inactive_split, out.inactive_split);
    copy_stat_array(stats.allocated_bytes, out.allocated_bytes);
    copy_stat_array(stats.reserved_bytes, out.reserved_bytes);
    copy_stat_array(stats.active_bytes, out.active_bytes);
    copy_stat_array(stats.inactive_split_bytes, out.inactive_split_bytes);
    copy_stat_array(stats.requested_bytes, out.requested_bytes);
    out.num_alloc_retries = stats.num_alloc_retries;
    out.num_ooms = stats.num_ooms;
    out.num_device_alloc = stats.num_device_alloc;
    out.num_device_free = stats.num_device_free;
    return out;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    runtime_call([&] { runtime::device(device).allocator().reset_accumulated_stats(); });
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    runtime_call([&] { runtime::device(device).allocator().reset_peak_stats(); });
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return runtime_call([&] {
      runtime::CachingAllocator& allocator = runtime::device(device).allocator();
      const int64_t reserved = allocator.stats().reserved_bytes[runtime::kAggregatePool].current;
      return std::pair<size_t, size_t>(allocator.capacity() - static_cast<size_t>(reserved),
                                       allocator.capacity());
    });
  }
};

// Page-locked memory has no meaning on a simulated device; pinned buffers are ordinary host
// memory that we track, so that is_pinned() answers and non_blocking copies may skip staging.
// It is the device's at::HostAllocator (torch.accelerator.empty_host_cache, host memory stats):
// nothing is cached, so emptying the cache has nothing to do.
class PinnedHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    void* ptr = nullptr;
    if (bytes > 0) {
      ptr = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
      TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr, "pinned host allocation of ", bytes,
                       " bytes failed: the host is out of memory.");
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_.emplace(static_cast<char*>(ptr), bytes);
      stats_.active_requests.increase(1);
      stats_.active_bytes.increase(bytes);
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(bytes);
      stats_.num_host_alloc += 1;
    }
    return {ptr, ptr, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  // A copy's command keeps its source buffer alive itself: no stream bookkeeping is needed.
  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (c10::CachingAllocator::Stat* stat :
         {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations, &stats_.allocated_bytes}) {
      stat->reset_accumulated();
    }
    stats_.num_host_alloc = stats_.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (c10::CachingAllocator::Stat* stat :
         {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations, &stats_.allocated_bytes}) {
      stat->reset_peak();
    }
  }

  bool owns(const void* ptr) {
    const char* p = static_cast<const char*>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(const_cast<char*>(p));
    if (it == blocks_.begin()) return false;
    --it;
    return p < it->first + it->second;
  }

 private:
  static void release(void* ptr);
  std::mutex mutex_;
  std::map<char*, size_t> blocks_;
  at::HostStats stats_;
};

NeuronDeviceAllocator g_device_allocator;

// Leaked on purpose: pinned tensors may be freed during interpreter shutdown.
PinnedHostAllocator& pinned_allocator() {
  static auto* instance = new PinnedHostAllocator();
  return *instance;
}

void PinnedHostAllocator::release(void* ptr) {
  if (ptr == nullptr) return;
  PinnedHostAllocator& self = pinned_allocator();
  {
    std::lock_guard<std::mutex> lock(self.mutex_);
    auto it = self.blocks_.find(static_cast<char*>(ptr));
    if (it != self.blocks_.end()) {
      self.stats_.active_requests.decrease(1);
      self.stats_.active_bytes.decrease(it->second);
      self.stats_.allocations.decrease(1);
      self.stats_.allocated_bytes.decrease(it->second);
      self.stats_.num_host_free += 1;
      self.blocks_.erase(it);
    }
  }
  std::free(ptr);
}

}  // namespace

c10::Allocator* neuron_allocator() { return &g_device_allocator; }
c10::Allocator* pinned_host_allocator() { return &pinned_allocator(); }
bool is_pinned_host_pointer(const void* ptr) { return pinned_allocator().owns(ptr); }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);
REGISTER_HOST_ALLOCATOR(c10::DeviceType::PrivateUse1, &pinned_allocator());

}  // namespace torchneuron::aten
