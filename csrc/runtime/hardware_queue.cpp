#include "runtime/hardware_queue.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "runtime/cpu_relax.h"
#include "runtime/errors.h"

namespace torchneuron::runtime {
namespace {

std::atomic<LaunchSiteProvider> g_launch_site_provider{nullptr};

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "") != 0 && std::strcmp(value, "0") != 0;
}

std::atomic<bool> g_launch_blocking{env_flag("NEURON_LAUNCH_BLOCKING") ||
                                    env_flag("TORCHNEURON_LAUNCH_BLOCKING")};

// An idle worker polls this long for the next command before it sleeps: the host usually
// submits again within microseconds, and a futex sleep plus wake-up costs more than a small
// kernel (and makes the submitting thread pay a system call).
// TORCHNEURON_QUEUE_POLL_US sets it (0: sleep at once).
std::chrono::microseconds idle_poll() {
  static const std::chrono::microseconds poll = [] {
    const char* value = std::getenv("TORCHNEURON_QUEUE_POLL_US");
    return std::chrono::microseconds(value != nullptr && *value != '\0' ? std::max(0L, std::atol(value)) : 30L);
  }();
  return poll;
}

}  // namespace

void set_launch_site_provider(LaunchSiteProvider provider) { g_launch_site_provider = provider; }

const char* capture_launch_site() {
  LaunchSiteProvider provider = g_launch_site_provider.load();
  return provider != nullptr ? provider() : "";
}

bool launch_blocking() { return g_launch_blocking.load(std::memory_order_relaxed); }
void set_launch_blocking(bool enabled) { g_launch_blocking = enabled; }

void LaunchInfo::add_input(const TensorSummary& summary) {
  if (num_inputs < static_cast<int>(inputs.size())) inputs[num_inputs++] = summary;
}

std::string LaunchInfo::describe_inputs() const {
  std::string text;
  for (int i = 0; i < num_inputs; ++i) {
    const TensorSummary& input = inputs[i];
    if (i > 0) text += ", ";
    text += "[";
    const int shown = std::min<int>(input.ndim, static_cast<int>(input.sizes.size()));
    for (int d = 0; d < shown; ++d) text += (d > 0 ? ", " : "") + std::to_string(input.sizes[d]);
    if (input.ndim > shown) text += ", ...";
    text += "] " + std::string(input.dtype) + " on " +
            (input.device < 0 ? std::string("cpu") : "neuron:" + std::to_string(input.device));
  }
  return text;
}

HardwareQueue::HardwareQueue(int device_index, size_t max_depth)
    : device_index_(device_index), max_depth_(max_depth) {
  worker_ = std::thread([this] { run_worker(); });
}

HardwareQueue::~HardwareQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  has_work_.notify_all();
  worker_.join();
}

uint64_t HardwareQueue::submit(StreamId stream, LaunchInfo info, Kernel kernel) {
  uint64_t seq;
  bool wake;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (count_ >= max_depth_) {
      // Wait for half the queue to drain rather than for one free slot: waking per command
      // would put the host thread and the worker in lockstep, a context switch per op.
      ++waiting_producers_;
      has_room_.wait(lock, [this] { return count_ <= max_depth_ / 2; });
      --waiting_producers_;
    }
    seq = next_seq_++;
    last_seq_by_stream_[stream] = seq;
    Command& slot = push_slot();  // filled in place: each move of a command copies its captures
    slot.seq = seq;
    slot.info = std::move(info);
    slot.kernel = std::move(kernel);
    wake = worker_sleeping_;
  }
  // Published after the unlock: a polling worker that saw it while the lock was still held
  // would block on the mutex, and the unlock would then cost a futex wake per command.
  // Concurrent submitters may publish out of order, so it only moves forward.
  uint64_t published = submitted_.load(std::memory_order_relaxed);
  while (published < seq && !submitted_.compare_exchange_weak(published, seq, std::memory_order_release)) {
  }
  if (wake) has_work_.notify_one();
  if (launch_blocking()) {
    wait_for(seq);
    raise_pending_fault();
  }
  return seq;
}

uint64_t HardwareQueue::submit_wait(StreamId stream, HardwareQueue& other, uint64_t seq) {
  if (&other == this) return last_submitted();  // one queue runs in order already
  LaunchInfo info = LaunchInfo::named("wait_event");
  return submit(stream, std::move(info), [&other, seq] { other.wait_for(seq); });
}

void HardwareQueue::wait_briefly_for_work(uint64_t taken) const {
  const auto deadline = std::chrono::steady_clock::now() + idle_poll();
  for (int spin = 1;; ++spin) {
    if (submitted_.load(std::memory_order_acquire) > taken) return;
    if (spin % 64 == 0 && std::chrono::steady_clock::now() > deadline) return;
    cpu_relax();
  }
}

HardwareQueue::Command& HardwareQueue::push_slot() {
  if (count_ == ring_.size()) {
    std::vector<Command> grown(std::max<size_t>(64, std::min(2 * ring_.size(), max_depth_)));
    for (size_t i = 0; i < count_; ++i) grown[i] = std::move(ring_[(head_ + i) % ring_.size()]);
    ring_ = std::move(grown);
    head_ = 0;
  }
  return ring_[(head_ + count_++) % ring_.size()];
}

HardwareQueue::Command HardwareQueue::pop() {
  Command command = std::move(ring_[head_]);
  head_ = (head_ + 1) % ring_.size();
  --count_;
  return command;
}

void HardwareQueue::run_worker() {
  // Commands are taken in batches under one lock: the host thread submits under the same
  // mutex, and every acquisition moves its cache line between the two cores.
  constexpr size_t kBatch = 64;
  std::vector<Command> batch;
  batch.reserve(kBatch);
  uint64_t taken = 0;
  for (;;) {
    wait_briefly_for_work(taken);
    std::unique_lock<std::mutex> lock(mutex_);
    if (!stopping_ && count_ == 0) {
      worker_sleeping_ = true;
      has_work_.wait(lock, [this] { return stopping_ || count_ > 0; });
      worker_sleeping_ = false;
    }
    if (count_ == 0) return;  // stopping with nothing left
    while (count_ > 0 && batch.size() < kBatch) batch.push_back(pop());
    taken = batch.back().seq;
    const bool room = waiting_producers_ > 0 && count_ <= max_depth_ / 2;
    lock.unlock();
    if (room) has_room_.notify_all();

    for (Command& command : batch) {
      // Read per command: a fault earlier in this batch, or a raise on the host since the
      // batch was taken, decides whether it runs.
      const bool skip = fault_pending_.load(std::memory_order_acquire) ||
                        command.seq <= skip_through_.load(std::memory_order_acquire);
      if (!skip) {
        try {
          command.kernel();
        } catch (const std::exception& e) {
          record_fault(command, e.what());
        } catch (...) {
          record_fault(command, "unknown exception");
        }
      }
      command.kernel = nullptr;  // release captured state before signalling completion
      publish_completed(command.seq);
    }
    batch.clear();
  }
}

void HardwareQueue::publish_completed(uint64_t seq) {
  // wait_for registers in progress_waiters_ before it checks completed_ (both sequentially
  // consistent), so either it sees this store or this load sees it waiting and wakes it.
  // Waiters are woken only once the earliest sequence number one of them waits for is done:
  // waking a synchronize for every command cost it a context switch per command.
  completed_.store(seq, std::memory_order_seq_cst);
  if (progress_waiters_.load(std::memory_order_seq_cst) > 0 &&
      seq >= earliest_awaited_.load(std::memory_order_seq_cst)) {
    {
      std::lock_guard<std::mutex> guard(mutex_);  // a waiter between its check and its sleep holds it
      earliest_awaited_.store(UINT64_MAX, std::memory_order_seq_cst);  // woken waiters register again
    }
    has_progress_.notify_all();
  }
}

void HardwareQueue::record_fault(const Command& command, const char* what) {
  std::string message = "neuron:" + std::to_string(device_index_) + ": '" + command.info.op +
                        "' failed on the device: " + what;
  if (command.info.num_inputs > 0) message += "\n  inputs: " + command.info.describe_inputs();
  message += "\n  launched at: " +
             (*command.info.site == '\0' ? std::string("<not from Python>") : std::string(command.info.site));
  message += "\n  Commands queued after it were skipped. Set NEURON_LAUNCH_BLOCKING=1 to raise "
             "the error at the launching call.";
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fault_) fault_ = std::move(message);  // keep the earliest failure only
  fault_pending_.store(true, std::memory_order_release);
}

void HardwareQueue::wait_for(uint64_t seq) {
  if (is_complete(seq)) return;
  std::unique_lock<std::mutex> lock(mutex_);
  progress_waiters_.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    if (seq < earliest_awaited_.load(std::memory_order_relaxed)) {
      earliest_awaited_.store(seq, std::memory_order_seq_cst);
    }
    if (completed_.load(std::memory_order_seq_cst) >= seq) break;
    has_progress_.wait(lock);
  }
  progress_waiters_.fetch_sub(1, std::memory_order_relaxed);
}

void HardwareQueue::synchronize() {
  wait_for(last_submitted());
  raise_pending_fault();
}

void HardwareQueue::synchronize_stream(StreamId stream) {
  wait_for(last_submitted(stream));
  raise_pending_fault();
}

bool HardwareQueue::stream_idle(StreamId stream) const {
  return is_complete(last_submitted(stream));
}

void HardwareQueue::raise_pending_fault() {
  std::optional<std::string> fault;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!fault_) return;
    // Work queued before the raise still belongs to the faulted run: it stays skipped even
    // when the raise came from a stream or event sync that did not wait for it.
    fault.swap(fault_);
    // skip_through_ first: the worker reads fault_pending_ and then skip_through_.
    skip_through_.store(next_seq_ - 1, std::memory_order_release);
    fault_pending_.store(false, std::memory_order_release);
  }
  throw DeviceFault(*fault);
}

bool HardwareQueue::has_pending_fault() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fault_.has_value();
}

uint64_t HardwareQueue::last_submitted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_seq_ - 1;
}

uint64_t HardwareQueue::last_submitted(StreamId stream) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = last_seq_by_stream_.find(stream);
  return it == last_seq_by_stream_.end() ? 0 : it->second;
}

size_t HardwareQueue::depth() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return count_;
}

}  // namespace torchneuron::runtime
