// Graph capture: a stream's commands recorded instead of run, replayed later as one command.
// The recorded list, the random-number state a replay hands its kernels, and the capture errors.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/errors.h"
#include "runtime/hardware_queue.h"
#include "runtime/philox.h"

namespace torchneuron::runtime {

// An action that cannot be captured (a host synchronization, a host read, a CPU fallback, an op
// whose output shape depends on the data): raised at capture, as CUDA raises it.
class CaptureError : public Error {
 public:
  using Error::Error;
};

// A captured command list. Built by one capturing thread, then only run by the device's queue
// worker (one replay at a time, in queue order).
class CapturedGraph {
 public:
  CapturedGraph() = default;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  void record(const LaunchInfo& info, KernelFunction&& kernel);
  size_t size() const;
  // Runs every command in capture order with the replay's random state (seed, base offset), as
  // part of a replay on `replay_stream` (for the command trace); a failing command is rethrown as
  // a KernelError naming its op, inputs and the line that captured it.
  void run(uint64_t seed, uint64_t offset, int64_t replay_stream = 0);
  // One line per command: index, op, inputs, capturing line.
  std::string describe() const;

  GraphRngState* rng_state() { return &rng_; }
  // Philox words the captured random kernels reserved: a replay advances the generator this far.
  uint64_t rng_words = 0;
  int device = 0;  // for the command trace
  // Why the capture is unusable (an action that could not be captured), or empty.
  std::string invalidated;

 private:
  struct Command {
    LaunchInfo info;
    KernelFunction kernel;
  };
  std::vector<Command> commands_;
  GraphRngState rng_;
};

// A new graph pool id (the first of a MempoolId_t pair; graph_pool_handle() uses the second).
uint64_t new_graph_pool_id();

// The message of a CaptureError: `action` is not permitted while `stream` of `device` captures.
std::string capture_error_message(const char* action, int device, int64_t stream);

}  // namespace torchneuron::runtime
