// The compute engines: one process-wide pool of worker threads that kernels split loops
// across. The calling thread (a hardware queue's worker) works too, so the pool has one
// thread fewer than the host has cores and never oversubscribes them.
#pragma once

#include <cstdint>
#include <functional>

namespace torchneuron::kernels {

// Number of threads that run a parallel_for, the caller included.
int compute_threads();

// Runs fn(begin, end) over [0, n) in chunks of at least `grain` elements, on the pool and
// the calling thread; returns when every chunk is done. The first exception is rethrown.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace torchneuron::kernels
