// Events: markers recorded at a position of a device's hardware queue. They can be queried,
// waited on by the host or by another stream, and timed against each other.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/hardware_queue.h"

namespace torchneuron::runtime {

class Event {
 public:
  explicit Event(bool enable_timing);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Whether `handle` is an Event that exists now: handles reach Python as integers
  // (torch.Event.event_id), and one that is not must be an error, never a dereference.
  static bool is_live(const void* handle);

  // Places the marker after everything submitted so far on `device_index`'s queue.
  void record(int device_index, StreamId stream);
  bool is_recorded() const { return device_index_ >= 0; }
  int device_index() const { return device_index_; }
  // True when the marker has run; an unrecorded event counts as complete (as in CUDA).
  bool query() const;
  // Waits for the marker, then raises a pending fault of that device.
  void synchronize() const;
  // Makes work submitted later to `device_index`/`stream` wait for this marker.
  void block(int device_index, StreamId stream) const;
  // Milliseconds from this event to `end`; both must be recorded with timing enabled.
  double elapsed_ms(const Event& end) const;

 private:
  const bool enable_timing_;
  int device_index_ = -1;
  uint64_t seq_ = 0;
  // Written by the queue's worker when the marker runs; shared so the event may die first.
  std::shared_ptr<std::atomic<int64_t>> timestamp_ns_;
};

}  // namespace torchneuron::runtime
