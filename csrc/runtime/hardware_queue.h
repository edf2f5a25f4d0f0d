// The hardware queue of one device: a worker thread that runs commands in submission order.
// All streams of a device share it; errors are recorded and re-raised at synchronization points.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

namespace torchneuron::runtime {

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
  std::string site;  // Python "file.py:12", empty when not launched from Python

  static LaunchInfo named(const char* op) {
    LaunchInfo info;
    info.op = op;
    return info;
  }
  void add_input(const TensorSummary& summary);
  // "[4, 8] float32 on neuron:0, [3] int64 on cpu"
  std::string describe_inputs() const;
};

// Returns the launching source location; installed by the Python module.
using LaunchSiteProvider = std::string (*)();
void set_launch_site_provider(LaunchSiteProvider provider);
std::string capture_launch_site();

// NEURON_LAUNCH_BLOCKING=1 (or TORCHNEURON_LAUNCH_BLOCKING=1) makes every submit wait for its
// command and raise its error at once.
bool launch_blocking();
void set_launch_blocking(bool enabled);

class HardwareQueue {
 public:
  using Kernel = std::function<void()>;

  explicit HardwareQueue(int device_index, size_t max_depth = 4096);
  ~HardwareQueue();
  HardwareQueue(const HardwareQueue&) = delete;
  HardwareQueue& operator=(const HardwareQueue&) = delete;

  // Enqueues a command and returns its sequence number (1, 2, ...). Blocks while the queue is
  // full. Under launch blocking it waits for the command and raises its error.
  uint64_t submit(StreamId stream, LaunchInfo info, Kernel kernel);

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
  int device_index() const { return device_index_; }

 private:
  struct Command {
    uint64_t seq;
    LaunchInfo info;
    Kernel kernel;
  };

  void run_worker();
  // Polls for up to a few tens of microseconds until a command after `taken` is submitted.
  void wait_briefly_for_work(uint64_t taken) const;
  void record_fault(const Command& command, const char* what);

  const int device_index_;
  const size_t max_depth_;
  mutable std::mutex mutex_;
  std::condition_variable has_work_;
  std::condition_variable has_room_;
  std::condition_variable has_progress_;
  std::deque<Command> pending_;
  std::unordered_map<StreamId, uint64_t> last_seq_by_stream_;
  uint64_t next_seq_ = 1;
  std::atomic<uint64_t> completed_{0};
  std::optional<std::string> fault_;  // the earliest failure, until raised
  uint64_t skip_through_ = 0;         // commands submitted before the last raise are skipped
  bool stopping_ = false;
  bool worker_sleeping_ = false;          // under mutex_: submit wakes the worker only then
  std::atomic<uint64_t> submitted_{0};  // the last sequence number submitted, for polling
  std::thread worker_;
};

}  // namespace torchneuron::runtime
