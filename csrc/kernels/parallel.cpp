#include "kernels/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/cpu_relax.h"

namespace torchneuron::kernels {
namespace {

using runtime::cpu_relax;

// Back-to-back kernels are the common case, so threads poll briefly (tens of microseconds)
// before sleeping: a futex sleep and wake-up costs more than a small kernel.
constexpr int kWorkerSpins = 1000;
constexpr int kCallerSpins = 4000;

// Every few pauses the poller yields its core: when the host thread and the pool share the
// cores, the thread polled for may be waiting for one, and pausing alone keeps it waiting.
inline void spin_pause(int i) {
  if (i % 32 == 31) {
    std::this_thread::yield();
  } else {
    cpu_relax();
  }
}

// One parallel_for call: chunks are claimed through `next`, completion counted in `done`.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n;
  int64_t chunk;
  int64_t chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;
  std::exception_ptr error;

  // Runs chunks until none is left to claim.
  void work() {
    for (int64_t index = next.fetch_add(1); index < chunks; index = next.fetch_add(1)) {
      const int64_t begin = index * chunk;
      try {
        (*fn)(begin, std::min(n, begin + chunk));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
      if (done.fetch_add(1) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mutex);
        finished.notify_all();
      }
    }
  }
};

class ComputePool {
 public:
  explicit ComputePool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { run(); });
  }

  // Leaked with the process (see instance()); workers sleep on the condition variable.
  void post(const std::shared_ptr<Job>& job, int helpers) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int i = 0; i < helpers; ++i) jobs_.push_back(job);
      pending_.fetch_add(helpers, std::memory_order_release);
    }
    has_work_.notify_all();
  }

  int size() const { return static_cast<int>(workers_.size()); }

  static ComputePool& instance() {
    static ComputePool* pool = new ComputePool(
        std::max(0, static_cast<int>(std::thread::hardware_concurrency()) - 1));
    return *pool;
  }

 private:
  void run() {
    for (;;) {
      for (int i = 0; i < kWorkerSpins && pending_.load(std::memory_order_acquire) == 0; ++i) spin_pause(i);
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        has_work_.wait(lock, [this] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
        pending_.fetch_sub(1, std::memory_order_relaxed);
      }
      job->work();
    }
  }

  std::mutex mutex_;
  std::atomic<int> pending_{0};  // jobs queued and not yet taken
  std::condition_variable has_work_;
  std::deque<std::shared_ptr<Job>> jobs_;
  std::vector<std::thread> workers_;
};

}  // namespace

int compute_threads() { return ComputePool::instance().size() + 1; }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  ComputePool& pool = ComputePool::instance();
  const int64_t threads = pool.size() + 1;
  grain = std::max<int64_t>(grain, 1);
  if (threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->chunks = std::min(threads * 4, (n + grain - 1) / grain);
  job->chunk = (n + job->chunks - 1) / job->chunks;
  job->chunks = (n + job->chunk - 1) / job->chunk;
  pool.post(job, static_cast<int>(std::min<int64_t>(pool.size(), job->chunks - 1)));
  job->work();
  for (int i = 0; i < kCallerSpins && job->done.load(std::memory_order_acquire) != job->chunks; ++i) spin_pause(i);
  if (job->done.load(std::memory_order_acquire) != job->chunks) {
    std::unique_lock<std::mutex> lock(job->mutex);
    job->finished.wait(lock, [&] { return job->done.load() == job->chunks; });
  }
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace torchneuron::kernels
