#include "runtime/hardware_queue.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

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
  {
    std::unique_lock<std::mutex> lock(mutex_);
    has_room_.wait(lock, [this] { return pending_.size() < max_depth_; });
    seq = next_seq_++;
    last_seq_by_stream_[stream] = seq;
    pending_.push_back(Command{seq, std::move(info), std::move(kernel)});
  }
  has_work_.notify_one();
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

void HardwareQueue::run_worker() {
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    has_work_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping with nothing left
    Command command = std::move(pending_.front());
    pending_.pop_front();
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
