// The device's command trace: while enabled (by the profiler), each command the hardware queue
// runs is recorded with its queue-side start and end times and the correlation id of the host
// op that launched it. Off, it costs one relaxed atomic load per submit and per command. It
// holds at most capacity() records (TORCHNEURON_PROFILER_MAX_COMMANDS, default 500,000, about
// 40 MB); later commands are counted in dropped() instead, so a long profile cannot grow it
// without bound.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace torchneuron::runtime {

struct CommandRecord {
  int device = 0;
  int64_t stream = 0;
  uint64_t seq = 0;
  const char* op = "";    // a static name such as "aten::add.out"
  const char* site = "";  // the launching Python line, or ""
  uint64_t correlation = 0;  // the launching host op's profiler correlation id (0: none)
  int64_t start_ns = 0, end_ns = 0;  // since the Unix epoch (the profiler's clock)
  int64_t submit_ns = 0;  // when the host enqueued it
  int32_t thread = 0;     // the submitting thread's system id
  bool skipped = false;  // not run: an earlier command faulted
  bool in_graph = false;  // a captured command, run by the graph replay recorded after it
};

namespace command_trace {

extern std::atomic<bool> enabled_flag;
inline bool enabled() { return enabled_flag.load(std::memory_order_relaxed); }
// Starts (clearing what was recorded) or stops recording.
void set_enabled(bool enabled);

// The correlation id of the host op running on this thread (a stack: ops nest).
void push_correlation(uint64_t id);
void pop_correlation();
uint64_t current_correlation();

int64_t now_ns();
int32_t thread_id();  // this thread's system id (gettid)
void record(const CommandRecord& record);
size_t capacity();
void set_capacity(size_t records);
// Commands not recorded since recording started, for want of capacity.
uint64_t dropped();
// Everything recorded since recording started, in completion order; clears it.
std::vector<CommandRecord> take();

}  // namespace command_trace
}  // namespace torchneuron::runtime
