// The intra-machine transport of the `neuron` backend: a shared-memory group of the ranks'
// processes (csrc/collectives) with a worker thread that runs its collectives in launch order,
// each seen by the backend as a c10d::Work.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "collectives/shared_memory_group.h"

namespace torchneuron::c10d_backend {

class SharedMemoryTransport {
 public:
  using Job = std::function<void(collectives::SharedMemoryGroup&)>;

  // Agrees through `store` whether every rank runs on this machine (same `machine_id`), and if
  // so sets up the segment; nullptr otherwise, or if any rank could not map it (then all use Gloo).
  static std::unique_ptr<SharedMemoryTransport> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                        int size, const std::string& machine_id);
  explicit SharedMemoryTransport(collectives::SharedMemoryGroup group);
  ~SharedMemoryTransport();

  // Queues `job`; the Work completes (or fails) when it has run.
  c10::intrusive_ptr<c10d::Work> run(Job job);

 private:
  void run_worker();

  collectives::SharedMemoryGroup group_;
  std::mutex mutex_;
  std::condition_variable has_work_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace torchneuron::c10d_backend
