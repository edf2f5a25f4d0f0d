// The hardware queue of one device: a worker thread that runs commands in submission order.
// All streams of a device share it; errors are recorded and re-raised at synchronization points.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "runtime/kernel_function.h"

namespace torchneuron::runtime {

class CapturedGraph;  // graph_capture.h

using StreamId = int64_t;
constexpr StreamId kDefaultStream = 0;

// A tensor argument as an error message shows it. Filled on the launch path without any
// formatting: the text is only built if the command fails.
struct TensorSummary {
  const char* dtype = "";  // a static name such as "float32"
  int device = -1;         // neuron device index, -1 for the host
  int ndim = 0;
  std::array<int64_t, 6> sizes{};  // leading sizes; deeper ones print as "..."
};

// Who launched a command; formatted into the error message if the command fails.
struct LaunchInfo {
  const char* op = "";  // a static name such as "aten::copy_"
  std::array<TensorSummary, 3> inputs{};
  int num_inputs = 0;
  const char* site = "";  // Python "file.py:12" (interned, never freed); "" when not from Python

  static LaunchInfo named(const char* op) {
    LaunchInfo info;
    info.op = op;
    return info;
  }
  void add_input(const TensorSummary& summary);
  // "[4, 8] float32 on neuron:0, [3] int64 on cpu"
  std::string describe_inputs() const;
};

// Returns the launching source location as a string that lives as long as the process (so
// that a command carries a pointer, not a copy); installed by the Python module.
using LaunchSiteProvider = const char* (*)();
void set_launch_site_provider(LaunchSiteProvider provider);
const char* capture_launch_site();

// NEURON_LAUNCH_BLOCKING=1 (or TORCHNEURON_LAUNCH_BLOCKING=1) makes every submit wait for its
// command and raise its error at once.
bool launch_blocking();
void set_launch_blocking(bool enabled);

// Called around a host thread's blocking wait for a queue. The Python module releases the GIL
// there: a command's captures may drop the last reference to a tensor that Python owns, and
// the worker then needs the GIL while the host thread, blocked on a full queue or a sync under
// a Python dispatch mode, would otherwise hold it.
using BlockingWaitBegin = void* (*)();
using BlockingWaitEnd = void (*)(void*);
void set_blocking_wait_hooks(BlockingWaitBegin begin, BlockingWaitEnd end);

// Runs those hooks around a scope in which the host thread blocks.
class ScopedBlockingWait {
 public:
  ScopedBlockingWait();
  ~ScopedBlockingWait();
  ScopedBlockingWait(const ScopedBlockingWait&) = delete;
  ScopedBlockingWait& operator=(const ScopedBlockingWait&) = delete;

 private:
  void* token_;
};

// Work the host holds back for a device (adaptive eager's recorded ops) reaches its queue
// before anything that could observe it: a queue with deferred work calls the flusher at the
// start of every submit, synchronization, stream query and event record.
using DeferredWorkFlusher = void (*)(int device_index);
void set_deferred_work_flusher(DeferredWorkFlusher flusher);

class HardwareQueue {
 public:
  using Kernel = KernelFunction;

  // 1024 pending commands (768 KiB of ring) keeps the slots the host writes in a core's L2.
  explicit HardwareQueue(int device_index, size_t max_depth = 1024);
  ~HardwareQueue();
  HardwareQueue(const HardwareQueue&) = delete;
  HardwareQueue& operator=(const HardwareQueue&) = delete;

  // Enqueues a command and returns its sequence number (1, 2, ...). When `max_depth` commands
  // are pending it blocks until the queue has drained to half that. Under launch blocking it
  // waits for the command and raises its error.
  uint64_t submit(StreamId stream, const LaunchInfo& info, Kernel&& kernel);

  // Enqueues a command on this queue that holds it until `other` has completed `seq`.
  uint64_t submit_wait(StreamId stream, HardwareQueue& other, uint64_t seq);

  // Blocks until command `seq` (and all before it) has run or been skipped. Never raises.
  void wait_for(uint64_t seq);
  bool is_complete(uint64_t seq) const { return completed_.load(std::memory_order_acquire) >= seq; }

  // Waits for everything submitted so far, then raises the pending fault if any.
  void synchronize();
  // Waits for the last command of `stream`, then raises the pending fault if any.
  void synchronize_stream(StreamId stream);
  bool stream_idle(StreamId stream) const;

  // Throws the earliest recorded DeviceFault and clears it, so the device works again.
  void raise_pending_fault();
  bool has_pending_fault() const;

  uint64_t last_submitted() const;
  uint64_t last_submitted(StreamId stream) const;
  size_t depth() const;
  // Whether more than `n` commands are pending. Cheaper than depth() when they are not: it reads
  // the worker's completion count only when the last one it read leaves more than `n` pending.
  bool depth_exceeds(uint64_t n) const;

  // Graph capture: while `stream` captures, the commands submitted on it (from any thread) are
  // recorded into `graph` instead of run, and host waits on it raise CaptureError.
  void begin_capture(StreamId stream, CapturedGraph* graph);
  void end_capture(StreamId stream);
  CapturedGraph* capturing(StreamId stream) const;
  bool any_capture() const { return num_captures_.load(std::memory_order_acquire) > 0; }

  // Whether the host holds deferred work for this queue (see DeferredWorkFlusher).
  void set_has_deferred_work(bool deferred) { has_deferred_work_.store(deferred, std::memory_order_release); }
  bool has_deferred_work() const { return has_deferred_work_.load(std::memory_order_acquire); }
  int device_index() const { return device_index_; }

 private:
  struct alignas(64) Command {  // whole cache lines: the worker reads one while the next is written
    uint64_t seq;
    LaunchInfo info;
    Kernel kernel;
    StreamId stream = kDefaultStream;
    // While the command trace records: the launching host op's correlation id, the submit
    // time and the submitting thread.
    uint64_t correlation = 0;
    int64_t submit_ns = 0;
    int32_t thread = 0;
  };
  void run_traced(Command& command, bool skip);

  Command* slot(uint64_t seq) const { return ring_ + (seq & ring_mask_); }
  void run_worker();
  void publish_completed(uint64_t seq);
  // Polls for up to a few tens of microseconds until a command after `taken` is submitted.
  void wait_briefly_for_work(uint64_t taken) const;
  // Sleeps until a command after `taken` is submitted; false when stopping with none left.
  bool sleep_until_work(uint64_t taken);
  void record_fault(const Command& command, const char* what);
  void flush_deferred_work() const;

  const int device_index_;
  const size_t max_depth_;
  const uint64_t ring_mask_;  // the ring holds a power of two >= max_depth_ commands
  // Pending commands, slot seq & ring_mask_. Submitters construct a command in place and
  // publish submitted_; the worker runs it in place, destroys it and publishes completed_. The
  // worker never takes a submitter's lock: a lock shared by both moved its cache line between
  // the two cores on every op. Raw storage, so pages are touched only as the queue fills.
  Command* const ring_;
  std::thread worker_;

  // Members are grouped by the thread that writes them, one cache line apart, so that the
  // worker's polling and completion stores do not pull the submitting thread's lines away.
  // Submitting threads, under submit_mutex_:
  alignas(64) mutable std::mutex submit_mutex_;
  std::unordered_map<StreamId, uint64_t> last_seq_by_stream_;
  uint64_t next_seq_ = 1;
  uint64_t completed_seen_ = 0;  // a past value of completed_, enough to know there is room
  mutable std::atomic<uint64_t> completed_hint_{0};  // likewise, for depth_exceeds (no lock)

  std::atomic<bool> has_deferred_work_{false};

  mutable std::mutex capture_mutex_;
  std::unordered_map<StreamId, CapturedGraph*> captures_;
  std::atomic<int> num_captures_{0};
  // Raises CaptureError (and marks the capture unusable) if `stream` captures.
  void check_not_capturing(StreamId stream, const char* action) const;

  // Written by submit under submit_mutex_, in order; polled by the worker.
  alignas(64) std::atomic<uint64_t> submitted_{0};

  // The worker's sleep and the waiters' wake-ups, and the recorded fault.
  alignas(64) mutable std::mutex mutex_;
  std::condition_variable has_work_;
  std::condition_variable has_progress_;
  std::optional<std::string> fault_;  // the earliest failure, until raised
  bool stopping_ = false;
  std::atomic<bool> worker_sleeping_{false};  // submit wakes the worker only then

  // Written by the worker after each command.
  alignas(64) std::atomic<uint64_t> completed_{0};
  std::atomic<int> progress_waiters_{0};  // threads in wait_for; the worker wakes them only then
  // The smallest sequence number a thread in wait_for needs (UINT64_MAX once they are woken);
  // written under mutex_.
  std::atomic<uint64_t> earliest_awaited_{UINT64_MAX};

  // Written rarely (a fault, a raise), read by the worker before each command without the lock.
  alignas(64) std::atomic<bool> fault_pending_{false};
  std::atomic<uint64_t> skip_through_{0};  // commands submitted before the last raise are skipped
};

}  // namespace torchneuron::runtime
