#include "kernels/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
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
  // Leaked with the process (see instance()); workers sleep on the condition variable.
  void post(const std::shared_ptr<Job>& job, int helpers) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int i = 0; i < helpers; ++i) jobs_.push_back(job);
      pending_.fetch_add(helpers, std::memory_order_release);
    }
    for (int i = 0; i < helpers; ++i) has_work_.notify_one();  // surplus workers sleep on
  }

  // Threads that run a parallel_for, the caller included.
  int threads() const { return threads_.load(std::memory_order_relaxed); }

  // Starts workers up to `threads` - 1; surplus workers stay asleep, since each job is posted
  // to only as many helpers as threads() allows.
  void resize(int threads) {
    threads = std::max(threads, 1);
    std::lock_guard<std::mutex> lock(resize_mutex_);
    while (static_cast<int>(workers_.size()) < threads - 1) workers_.emplace_back([this] { run(); });
    threads_.store(threads, std::memory_order_relaxed);
  }

  static ComputePool& instance() {
    static ComputePool* pool = [] {
      auto* created = new ComputePool();
      created->resize(default_compute_threads());
      return created;
    }();
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
  std::mutex resize_mutex_;
  std::vector<std::thread> workers_;
  std::atomic<int> threads_{1};
};

// A positive whole number in the environment variable, or 0.
int positive_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  return *end == '\0' && parsed > 0 && parsed <= 4096 ? static_cast<int>(parsed) : 0;
}

// The cgroup v2 CPU quota ("max 100000" or "200000 100000") in whole cores, rounded up; 0: none.
int cgroup_cpu_quota() {
  std::ifstream file("/sys/fs/cgroup/cpu.max");
  std::string quota;
  int64_t period = 0;
  if (!(file >> quota >> period) || quota == "max" || period <= 0) return 0;
  const int64_t microseconds = std::strtoll(quota.c_str(), nullptr, 10);
  return microseconds > 0 ? static_cast<int>((microseconds + period - 1) / period) : 0;
}

}  // namespace

int default_compute_threads() {
  if (const int requested = positive_env("OMP_NUM_THREADS")) return requested;
  cpu_set_t allowed;
  int cores = sched_getaffinity(0, sizeof(allowed), &allowed) == 0 ? CPU_COUNT(&allowed)
                                                                   : static_cast<int>(std::thread::hardware_concurrency());
  if (const int quota = cgroup_cpu_quota()) cores = std::min(cores, quota);
  return std::max(cores, 1);
}

void set_compute_threads(int threads) { ComputePool::instance().resize(threads); }

namespace {
}  // namespace

int compute_threads() { return ComputePool::instance().threads(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  ComputePool& pool = ComputePool::instance();
  const int64_t threads = pool.threads();
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
  pool.post(job, static_cast<int>(std::min<int64_t>(threads - 1, job->chunks - 1)));
  job->work();
  for (int i = 0; i < kCallerSpins && job->done.load(std::memory_order_acquire) != job->chunks; ++i) spin_pause(i);
  if (job->done.load(std::memory_order_acquire) != job->chunks) {
    std::unique_lock<std::mutex> lock(job->mutex);
    job->finished.wait(lock, [&] { return job->done.load() == job->chunks; });
  }
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace torchneuron::kernels
