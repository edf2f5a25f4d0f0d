// The compute engines: one process-wide pool of worker threads that kernels split loops
// across. The calling thread (a hardware queue's worker) works too, so a pool of N threads
// starts N - 1 workers; N follows torch's intra-op thread count (set by the aten layer).
#pragma once

#include <cstdint>
#include <functional>

namespace torchneuron::kernels {

// Number of threads that run a parallel_for, the caller included.
int compute_threads();
// Sets that number (at least 1), starting workers as needed; takes effect from the next call.
void set_compute_threads(int threads);
// The size the pool starts with: OMP_NUM_THREADS when set, else the cores this process may run
// on (its CPU affinity), capped by a cgroup CPU quota (containers), as PyTorch sizes its own.
int default_compute_threads();

// Runs fn(begin, end) over [0, n) in chunks of at least `grain` elements, on the pool and
// the calling thread; returns when every chunk is done. The first exception is rethrown.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace torchneuron::kernels
