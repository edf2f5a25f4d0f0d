// The shared-memory transport: set-up through the store, the worker thread, and its Work.
#include "c10d/shared_memory_transport.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <chrono>
#include <random>

namespace torchneuron::c10d_backend {
namespace {

constexpr size_t kSlotBytes = 4 << 20;  // each rank's staging room per step

std::string get_string(c10d::Store& store, const std::string& key) {
  auto bytes = store.get(key);  // waits for the key, up to the store's timeout
  return std::string(bytes.begin(), bytes.end());
}

void set_string(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

// A transport collective: done when its job has run on the worker thread.
class LocalWork final : public c10d::Work {
 public:
  LocalWork()
      : future_(c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get())) {}

  void finish(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = error;
      done_ = true;
    }
    done_changed_.notify_all();
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue());
    }
  }
  bool isCompleted() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  bool isSuccess() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_ && !error_;
  }
  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  bool wait(std::chrono::milliseconds /*timeout: each barrier of the job has its own*/) override {
    std::unique_lock<std::mutex> lock(mutex_);
    done_changed_.wait(lock, [this] { return done_; });
    if (error_) std::rethrow_exception(error_);
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  mutable std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace

std::unique_ptr<SharedMemoryTransport> SharedMemoryTransport::connect(const c10::intrusive_ptr<c10d::Store>& store,
                                                                      int rank, int size,
                                                                      const std::string& machine_id) {
  if (machine_id.empty() || size < 2) return nullptr;
  set_string(*store, c10::str("neuron_shm/machine/", rank), machine_id);
  for (int peer = 0; peer < size; ++peer) {
    if (get_string(*store, c10::str("neuron_shm/machine/", peer)) != machine_id) return nullptr;
  }
  // Rank 0 names and creates the segment; every rank reports whether it could map it.
  std::optional<collectives::SharedMemoryGroup> group;
  std::string name;
  // Rank 0 removes the segment's name when set-up ends, however it ends: a peer that dies before
  // mapping it makes the store's wait throw. The mapped memory lives on while mapped.
  struct UnlinkName {
    std::string name;
    ~UnlinkName() {
      if (!name.empty()) collectives::SharedMemoryGroup::unlink(name);
    }
  } unlink_name;
  if (rank == 0) {
    collectives::SharedMemoryGroup::remove_orphans("torchneuron-");
    std::random_device random;
    name = c10::str("/torchneuron-", getpid(), "-", random());
    try {
      group.emplace(collectives::SharedMemoryGroup::create(name, rank, size, kSlotBytes));
      unlink_name.name = name;
    } catch (const collectives::CollectiveError&) {
      name.clear();
    }
    set_string(*store, "neuron_shm/name", name);
  } else {
    name = get_string(*store, "neuron_shm/name");
    if (!name.empty()) {
      try {
        group.emplace(collectives::SharedMemoryGroup::open(name, rank, size, kSlotBytes));
      } catch (const collectives::CollectiveError&) {
      }
    }
  }
  set_string(*store, c10::str("neuron_shm/mapped/", rank), group ? "yes" : "no");
  bool everyone = true;
  for (int peer = 0; peer < size; ++peer) everyone = everyone && get_string(*store, c10::str("neuron_shm/mapped/", peer)) == "yes";
  if (!everyone) return nullptr;
  return std::make_unique<SharedMemoryTransport>(std::move(*group));
}

SharedMemoryTransport::SharedMemoryTransport(collectives::SharedMemoryGroup group)
    : group_(std::move(group)), worker_([this] { run_worker(); }) {}

SharedMemoryTransport::~SharedMemoryTransport() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  has_work_.notify_all();
  worker_.join();
}

c10::intrusive_ptr<c10d::Work> SharedMemoryTransport::run(Job job) {
  auto work = c10::make_intrusive<LocalWork>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.emplace_back([this, job = std::move(job), work] {
      std::exception_ptr error;
      try {
        job(group_);
      } catch (...) {
        error = std::current_exception();
      }
      work->finish(error);
    });
  }
  has_work_.notify_one();
  return work;
}

void SharedMemoryTransport::run_worker() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    has_work_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping with nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

}  // namespace torchneuron::c10d_backend
