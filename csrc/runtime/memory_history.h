// Memory history for snapshots: while recording, every allocation, free and segment change of
// the caching allocators is kept (a bounded ring) with the launching Python line and a time, as
// torch.cuda.memory._record_memory_history keeps CUDA's.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace torchneuron::runtime {

enum class MemoryAction : uint8_t { kAlloc, kFreeRequested, kFreeCompleted, kSegmentAlloc, kSegmentFree };

struct MemoryEvent {
  int device = 0;
  MemoryAction action = MemoryAction::kAlloc;
  uintptr_t address = 0;
  size_t size = 0;
  const char* site = "";  // "file.py:12" (interned), or ""
  int64_t time_us = 0;    // since the Unix epoch
};

namespace memory_history {

extern std::atomic<bool> recording_flag;
inline bool recording() { return recording_flag.load(std::memory_order_relaxed); }
// Starts recording, keeping the last `max_entries` events (clearing older ones), or stops.
void set_recording(bool enabled, size_t max_entries);
void record(int device, MemoryAction action, uintptr_t address, size_t size, const char* site = "");
// The recorded events, oldest first (kept: a snapshot does not clear them).
std::vector<MemoryEvent> events();

}  // namespace memory_history
}  // namespace torchneuron::runtime
