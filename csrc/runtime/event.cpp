#include "runtime/event.h"

#include <chrono>
#include <mutex>
#include <unordered_set>

#include "runtime/device.h"
#include "runtime/errors.h"

namespace torchneuron::runtime {
namespace {

std::mutex live_mutex;
std::unordered_set<const void*>& live_events() {
  static auto* events = new std::unordered_set<const void*>();  // never destroyed: events may outlive statics
  return *events;
}

}  // namespace

Event::Event(bool enable_timing) : enable_timing_(enable_timing) {
  std::lock_guard<std::mutex> lock(live_mutex);
  live_events().insert(this);
}

Event::~Event() {
  std::lock_guard<std::mutex> lock(live_mutex);
  live_events().erase(this);
}

bool Event::is_live(const void* handle) {
  std::lock_guard<std::mutex> lock(live_mutex);
  return live_events().count(handle) != 0;
}

void Event::record(int device_index, StreamId stream) {
  HardwareQueue& queue = device(device_index).queue();
  auto timestamp = std::make_shared<std::atomic<int64_t>>(-1);
  LaunchInfo info = LaunchInfo::named("event_record");
  if (enable_timing_) {
    seq_ = queue.submit(stream, std::move(info), [timestamp] {
      auto now = std::chrono::steady_clock::now().time_since_epoch();
      timestamp->store(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
    });
  } else {
    seq_ = queue.submit(stream, std::move(info), [] {});
  }
  timestamp_ns_ = std::move(timestamp);
  device_index_ = device_index;
}

bool Event::query() const {
  if (!is_recorded()) return true;
  return device(device_index_).queue().is_complete(seq_);
}

void Event::synchronize() const {
  if (!is_recorded()) return;
  HardwareQueue& queue = device(device_index_).queue();
  queue.wait_for(seq_);
  queue.raise_pending_fault();
}

void Event::block(int device_index, StreamId stream) const {
  if (!is_recorded()) return;
  HardwareQueue& waiter = device(device_index).queue();
  waiter.submit_wait(stream, device(device_index_).queue(), seq_);
}

double Event::elapsed_ms(const Event& end) const {
  if (!enable_timing_ || !end.enable_timing_) {
    throw InvalidArgument(
        "elapsed_time needs both events created with enable_timing=True.");
  }
  if (!is_recorded() || !end.is_recorded()) {
    throw InvalidArgument("elapsed_time needs both events recorded first; call record() on each.");
  }
  synchronize();
  end.synchronize();
  const int64_t start_ns = timestamp_ns_->load();
  const int64_t end_ns = end.timestamp_ns_->load();
  if (start_ns < 0 || end_ns < 0) {
    throw InvalidArgument("elapsed_time: an event's marker was skipped after a device fault.");
  }
  return static_cast<double>(end_ns - start_ns) / 1.0e6;
}

}  // namespace torchneuron::runtime
