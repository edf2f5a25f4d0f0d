// Posting, waiting and error reporting of one collective (see collective_work.h).
#include "c10d/collective_work.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "aten/device/neuron_tensor.h"
#include "runtime/device.h"

namespace torchneuron::c10d_backend {

void CollectiveState::run_post() {
  InnerWorks works;
  std::exception_ptr error;
  try {
    works = post();
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inner_ = std::move(works);
    error_ = error;
  }
  posted_.store(true, std::memory_order_release);
  attach_future();
}

bool CollectiveState::completed() {
  if (!posted()) return false;
  if (transport_done_.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) return true;
  for (auto& work : inner_) {
    if (!work->isCompleted()) return false;
  }
  return true;
}

void CollectiveState::note_command(uint64_t seq) {
  uint64_t seen = last_command_seq.load();
  while (seen < seq && !last_command_seq.compare_exchange_weak(seen, seq)) {
  }
}

bool CollectiveState::releasable() {
  return completed() && future_done_.load() &&
         runtime::device(device_index).queue().is_complete(last_command_seq.load());
}

std::exception_ptr CollectiveState::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

int CollectiveState::source_rank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!inner_.empty(), description, " has not been posted yet; wait() for it first");
  return inner_.front()->sourceRank();
}

namespace {

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

void CollectiveState::fail(const std::string& why) {
  std::string message = description + " failed: " + why;
  if (diagnose_peers) message += diagnose_peers();
  C10_THROW_ERROR(DistBackendError, message);
}

void CollectiveState::wait_transport(std::chrono::milliseconds timeout) {
  if (!posted()) {
    fail("it was never run: an earlier device error stopped the queue before it (synchronize to see it)");
  }
  std::lock_guard<std::mutex> waiting(wait_mutex_);
  InnerWorks works;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_) fail(message_of(error_));
    works = inner_;
  }
  if (transport_done_.load(std::memory_order_acquire)) return;
  for (auto& work : works) {
    try {
      work->wait(timeout);
    } catch (...) {
      auto error = std::current_exception();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = error;
      }
      fail(message_of(error));
    }
  }
  transport_done_.store(true, std::memory_order_release);
  complete_future();  // for transports without futures (point-to-point)
}

void CollectiveState::complete_future(const std::string& error) {
  if (future_done_.exchange(true)) return;
  {
    // The transport is done with the buffers: the allocator may reuse them once nobody else
    // holds them (the state itself may live on until the group's next collective).
    std::lock_guard<std::mutex> lock(mutex_);
    keep_alive.clear();
  }
  auto done = future();
  if (error.empty()) {
    done->markCompleted(c10::IValue(results));
  } else {
    done->setError(std::make_exception_ptr(c10::DistBackendError(
        c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, description + " failed: " + error)));
  }
}

c10::intrusive_ptr<c10::ivalue::Future> CollectiveState::future() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!future_) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  }
  return future_;
}

// Completes the future when every inner work is done. Runs once, right after the post.
void CollectiveState::attach_future() {
  InnerWorks works;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    works = inner_;
    error = error_;
  }
  if (error) {
    complete_future(message_of(error));
    return;
  }
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> inner_futures;
  for (auto& work : works) {
    try {
      inner_futures.push_back(work->getFuture());
    } catch (const c10::Error&) {
      return;  // no future (point-to-point): wait_transport completes ours
    }
  }
  if (inner_futures.empty()) {
    complete_future();
    return;
  }
  auto remaining = std::make_shared<std::atomic<size_t>>(inner_futures.size());
  for (auto& inner : inner_futures) {
    // The backend keeps the state until its future is complete; the callback runs on the
    // transport's thread, must not throw there, and must not hold the last reference.
    inner->addCallback([weak = weak_from_this(), remaining](c10::ivalue::Future& f) noexcept {
      try {
        auto keep = weak.lock();
        if (!keep) return;
        if (f.hasError()) {
          keep->complete_future(f.tryRetrieveErrorMessage());
        } else if (remaining->fetch_sub(1) == 1) {
          keep->complete_future();
        }
      } catch (...) {
      }
    });
  }
}

NeuronWork::NeuronWork(int rank, c10d::OpType type, std::shared_ptr<CollectiveState> state, bool host_wait)
    : c10d::Work(rank, type), state_(std::move(state)), host_wait_(host_wait) {}

bool NeuronWork::isCompleted() { return state_->completed(); }

bool NeuronWork::isSuccess() const { return state_->posted() && !state_->error(); }

std::exception_ptr NeuronWork::exception() const { return state_->error(); }

std::vector<at::Tensor> NeuronWork::result() { return state_->results; }

int NeuronWork::sourceRank() const { return state_->source_rank(); }

void NeuronWork::enqueue_stream_wait(std::chrono::milliseconds timeout) {
  const int index = state_->device_index;
  runtime::LaunchInfo info = runtime::LaunchInfo::named("c10d::wait");
  info.site = runtime::capture_launch_site();
  aten::runtime_call([&] {
    const uint64_t seq = runtime::device(index).queue().submit(runtime::current_stream(index), info, [state = state_, timeout] {
      try {
        state->wait_transport(timeout);
      } catch (const c10::Error& e) {
        throw std::runtime_error(e.what_without_backtrace());  // the queue reports what()
      }
    });
    state_->note_command(seq);
  });
}

void NeuronWork::copy_back_once() {
  std::call_once(copied_back_, [&] {
    for (auto& [user, staged] : state_->copy_back) user.copy_(staged);
  });
}

bool NeuronWork::wait(std::chrono::milliseconds timeout) {
  if (host_wait_) {
    aten::runtime_call([&] { runtime::device(state_->device_index).queue().wait_for(state_->post_seq); });
    state_->wait_transport(timeout);
  } else {
    // A failure the host already knows of is raised now; later ones at the next synchronization.
    if (state_->completed() && state_->error()) state_->wait_transport(timeout);
    enqueue_stream_wait(timeout);
  }
  copy_back_once();
  return true;
}

void NeuronWork::synchronize() { wait(); }

void NeuronWork::blockCurrentStream() { enqueue_stream_wait(kNoTimeout); }

c10::intrusive_ptr<c10::ivalue::Future> NeuronWork::getFuture() { return state_->future(); }

}  // namespace torchneuron::c10d_backend
