#include "runtime/hardware_queue.h"

#include "runtime/command_trace.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "runtime/cpu_relax.h"
#include "runtime/errors.h"
#include "runtime/device.h"
#include "runtime/graph_capture.h"

namespace torchneuron::runtime {
namespace {

std::atomic<LaunchSiteProvider> g_launch_site_provider{nullptr};
std::atomic<DeferredWorkFlusher> g_deferred_work_flusher{nullptr};
std::atomic<BlockingWaitBegin> g_blocking_wait_begin{nullptr};
std::atomic<BlockingWaitEnd> g_blocking_wait_end{nullptr};

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

void set_deferred_work_flusher(DeferredWorkFlusher flusher) { g_deferred_work_flusher = flusher; }

void set_blocking_wait_hooks(BlockingWaitBegin begin, BlockingWaitEnd end) {
  g_blocking_wait_end = end;
  g_blocking_wait_begin = begin;
}

ScopedBlockingWait::ScopedBlockingWait() {
  BlockingWaitBegin begin = g_blocking_wait_begin.load();
  token_ = begin != nullptr ? begin() : nullptr;
}

ScopedBlockingWait::~ScopedBlockingWait() {
  if (token_ != nullptr) g_blocking_wait_end.load()(token_);
}

void HardwareQueue::flush_deferred_work() const {
  if (!has_deferred_work_.load(std::memory_order_acquire)) return;
  DeferredWorkFlusher flusher = g_deferred_work_flusher.load();
  if (flusher != nullptr) flusher(device_index_);
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
    : device_index_(device_index),
      max_depth_(std::max<size_t>(max_depth, 2)),
      ring_mask_(std::bit_ceil(max_depth_) - 1),
      ring_(std::allocator<Command>().allocate(ring_mask_ + 1)) {
  worker_ = std::thread([this] { run_worker(); });
}

HardwareQueue::~HardwareQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  has_work_.notify_all();
  worker_.join();  // the worker runs and destroys every submitted command before it returns
  std::allocator<Command>().deallocate(ring_, ring_mask_ + 1);
}

uint64_t HardwareQueue::submit(StreamId stream, const LaunchInfo& info, Kernel&& kernel) {
  flush_deferred_work();
  if (any_capture()) {
    if (CapturedGraph* graph = capturing(stream)) {
      graph->record(info, std::move(kernel));  // run by the graph's replays, not now
      return last_submitted(stream);
    }
  }
  uint64_t seq;
  {
    std::unique_lock<std::mutex> lock(submit_mutex_);
    for (;;) {
      seq = next_seq_;
      // completed_ is read only when the last value read says the queue may be full: its cache
      // line is written by the worker after every command, so reading it costs a transfer.
      if (seq - 1 - completed_seen_ < max_depth_) break;
      completed_seen_ = completed_.load(std::memory_order_acquire);
      if (seq - 1 - completed_seen_ < max_depth_) break;
      // Full: wait for half the queue to drain rather than for one free slot, which would put
      // the host thread and the worker in lockstep, a context switch per op. Without the lock:
      // the wait releases the GIL, and a thread that takes it may come to submit too.
      lock.unlock();
      wait_for(seq - 1 - max_depth_ / 2);
      lock.lock();
      completed_seen_ = completed_.load(std::memory_order_acquire);
    }
    next_seq_ = seq + 1;
    last_seq_by_stream_[stream] = seq;
    if (command_trace::enabled()) {
      new (slot(seq)) Command{seq, info, std::move(kernel), stream, command_trace::current_correlation(),
                              command_trace::now_ns(), command_trace::thread_id()};
    } else {
      new (slot(seq)) Command{seq, info, std::move(kernel), stream};
    }
    // Sequentially consistent, as is the worker's sleeping flag: either the worker sees this
    // command before it sleeps or this thread sees it sleeping and wakes it.
    submitted_.store(seq, std::memory_order_seq_cst);
  }
  if (worker_sleeping_.load(std::memory_order_seq_cst)) {
    std::lock_guard<std::mutex> lock(mutex_);
    has_work_.notify_one();
  }
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

bool HardwareQueue::sleep_until_work(uint64_t taken) {
  std::unique_lock<std::mutex> lock(mutex_);
  worker_sleeping_.store(true, std::memory_order_seq_cst);
  has_work_.wait(lock, [&] { return stopping_ || submitted_.load(std::memory_order_seq_cst) > taken; });
  worker_sleeping_.store(false, std::memory_order_relaxed);
  return submitted_.load(std::memory_order_acquire) > taken;
}

void HardwareQueue::run_worker() {
  uint64_t taken = 0;
  for (;;) {
    uint64_t available = submitted_.load(std::memory_order_acquire);
    if (available == taken) {
      wait_briefly_for_work(taken);
      available = submitted_.load(std::memory_order_acquire);
      if (available == taken) {
        if (!sleep_until_work(taken)) return;  // stopping with nothing left
        continue;
      }
    }
    for (uint64_t seq = taken + 1; seq <= available; ++seq) {
      Command* command = slot(seq);
      // Read per command: a fault earlier in this run, or a raise on the host since, decides
      // whether it runs.
      const bool skip = fault_pending_.load(std::memory_order_acquire) ||
                        seq <= skip_through_.load(std::memory_order_acquire);
      if (command_trace::enabled()) {
        run_traced(*command, skip);
      } else if (!skip) {
        try {
          command->kernel();
        } catch (const std::exception& e) {
          record_fault(*command, e.what());
        } catch (...) {
          record_fault(*command, "unknown exception");
        }
      }
      command->~Command();  // releases captured state, and the slot, before completion is seen
      publish_completed(seq);
    }
    taken = available;
  }
}

void HardwareQueue::run_traced(Command& command, bool skip) {
  CommandRecord record;
  record.device = device_index_;
  record.stream = command.stream;
  record.seq = command.seq;
  record.op = command.info.op;
  record.site = command.info.site;
  record.correlation = command.correlation;
  record.submit_ns = command.submit_ns;
  record.thread = command.thread;
  record.skipped = skip;
  record.start_ns = command_trace::now_ns();
  if (!skip) {
    try {
      command.kernel();
    } catch (const std::exception& e) {
      record_fault(command, e.what());
    } catch (...) {
      record_fault(command, "unknown exception");
    }
  }
  record.end_ns = command_trace::now_ns();
  command_trace::record(record);
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
  if (any_capture()) check_not_capturing(current_stream(device_index_), "waiting for the device");
  if (is_complete(seq)) return;
  ScopedBlockingWait blocking;
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
  if (any_capture()) {
    std::lock_guard<std::mutex> lock(capture_mutex_);
    for (const auto& [stream, graph] : captures_) {
      const std::string message = capture_error_message("synchronizing the device", device_index_, stream);
      if (graph->invalidated.empty()) graph->invalidated = message;
      throw CaptureError(message);
    }
  }
  flush_deferred_work();
  wait_for(last_submitted());
  raise_pending_fault();
}

void HardwareQueue::synchronize_stream(StreamId stream) {
  if (any_capture()) check_not_capturing(stream, "synchronizing the stream");
  flush_deferred_work();
  wait_for(last_submitted(stream));
  raise_pending_fault();
}

bool HardwareQueue::stream_idle(StreamId stream) const {
  flush_deferred_work();
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
    skip_through_.store(submitted_.load(std::memory_order_acquire), std::memory_order_release);
    fault_pending_.store(false, std::memory_order_release);
  }
  throw DeviceFault(*fault);
}

bool HardwareQueue::has_pending_fault() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fault_.has_value();
}

void HardwareQueue::begin_capture(StreamId stream, CapturedGraph* graph) {
  std::lock_guard<std::mutex> lock(capture_mutex_);
  if (!captures_.emplace(stream, graph).second) {
    throw InvalidArgument("neuron:" + std::to_string(device_index_) + " stream " + std::to_string(stream) +
                          " is capturing a graph already; end that capture first");
  }
  num_captures_.fetch_add(1, std::memory_order_acq_rel);
}

void HardwareQueue::end_capture(StreamId stream) {
  std::lock_guard<std::mutex> lock(capture_mutex_);
  if (captures_.erase(stream) > 0) num_captures_.fetch_sub(1, std::memory_order_acq_rel);
}

CapturedGraph* HardwareQueue::capturing(StreamId stream) const {
  std::lock_guard<std::mutex> lock(capture_mutex_);
  auto it = captures_.find(stream);
  return it == captures_.end() ? nullptr : it->second;
}

void HardwareQueue::check_not_capturing(StreamId stream, const char* action) const {
  CapturedGraph* graph = capturing(stream);
  if (graph == nullptr) return;
  const std::string message = capture_error_message(action, device_index_, stream);
  if (graph->invalidated.empty()) graph->invalidated = message;
  throw CaptureError(message);
}

uint64_t HardwareQueue::last_submitted() const {
  flush_deferred_work();
  return submitted_.load(std::memory_order_acquire);
}

uint64_t HardwareQueue::last_submitted(StreamId stream) const {
  flush_deferred_work();
  std::lock_guard<std::mutex> lock(submit_mutex_);
  auto it = last_seq_by_stream_.find(stream);
  return it == last_seq_by_stream_.end() ? 0 : it->second;
}

bool HardwareQueue::depth_exceeds(uint64_t n) const {
  const uint64_t submitted = submitted_.load(std::memory_order_acquire);
  if (submitted - std::min(submitted, completed_hint_.load(std::memory_order_relaxed)) <= n) return false;
  const uint64_t completed = completed_.load(std::memory_order_acquire);
  completed_hint_.store(completed, std::memory_order_relaxed);
  return submitted - completed > n;
}

size_t HardwareQueue::depth() const {
  const uint64_t completed = completed_.load(std::memory_order_acquire);
  return static_cast<size_t>(submitted_.load(std::memory_order_acquire) - completed);
}

}  // namespace torchneuron::runtime
