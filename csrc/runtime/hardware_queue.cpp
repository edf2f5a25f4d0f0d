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

std::string capture_launch_site() {
  LaunchSiteProvider provider = g_launch_site_provider.load();
  return provider != nullptr ? provider() : std::string();
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
    has_room_.wait(lock, [this] { return pending_.size() < max_depth_; });
    seq = next_seq_++;
    last_seq_by_stream_[stream] = seq;
    pending_.push_back(Command{seq, std::move(info), std::move(kernel)});
    submitted_.store(seq, std::memory_order_release);
    wake = worker_sleeping_;
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

void HardwareQueue::run_worker() {
  uint64_t taken = 0;
  for (;;) {
    wait_briefly_for_work(taken);
    std::unique_lock<std::mutex> lock(mutex_);
    if (!stopping_ && pending_.empty()) {
      worker_sleeping_ = true;
      has_work_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      worker_sleeping_ = false;
    }
    if (pending_.empty()) return;  // stopping with nothing left
    Command command = std::move(pending_.front());
    pending_.pop_front();
    taken = command.seq;
    const bool skip = fault_.has_value() || command.seq <= skip_through_;
    lock.unlock();
    has_room_.notify_one();

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
    {
      // Publishing under the mutex pairs with the predicate check in wait_for.
      std::lock_guard<std::mutex> guard(mutex_);
      completed_.store(command.seq, std::memory_order_release);
    }
    has_progress_.notify_all();
  }
}

void HardwareQueue::record_fault(const Command& command, const char* what) {
  std::string message = "neuron:" + std::to_string(device_index_) + ": '" + command.info.op +
                        "' failed on the device: " + what;
  if (command.info.num_inputs > 0) message += "\n  inputs: " + command.info.describe_inputs();
  message += "\n  launched at: " +
             (command.info.site.empty() ? std::string("<not from Python>") : command.info.site);
  message += "\n  Commands queued after it were skipped. Set NEURON_LAUNCH_BLOCKING=1 to raise "
             "the error at the launching call.";
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fault_) fault_ = std::move(message);  // keep the earliest failure only
}

void HardwareQueue::wait_for(uint64_t seq) {
  if (is_complete(seq)) return;
  std::unique_lock<std::mutex> lock(mutex_);
  has_progress_.wait(lock, [this, seq] { return is_complete(seq); });
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
    skip_through_ = next_seq_ - 1;
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
  return pending_.size();
}

}  // namespace torchneuron::runtime
