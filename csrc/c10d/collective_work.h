// One collective of the `neuron` c10d backend as it moves through the device's hardware queue, and
// the c10d::Work that users wait on.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace torchneuron::c10d_backend {

using InnerWorks = std::vector<c10::intrusive_ptr<c10d::Work>>;

// A collective after its launch. A queue command posts it to the transport once the kernels
// before it have run (`post`); the transport then moves the bytes on its own threads while the
// queue runs on. Whoever needs the result waits: a later queue command (Work::wait), the host
// (barriers, futures) or nobody (the backend keeps the state, and so the tensors, until done).
struct CollectiveState : std::enable_shared_from_this<CollectiveState> {
  std::string description;  // "allreduce #3 on group 'default_pg' (rank 0 of 2)"
  std::function<std::string()> diagnose_peers;  // said after a failure: which rank is missing
  int device_index = 0;
  uint64_t post_seq = 0;  // the queue position of the post command
  // The last queue command that holds this state (the post or a stream-side wait). The backend
  // drops its reference, the last one, only once that command has run: the tensors then die
  // on the host thread, never on a queue or transport thread (their Python objects need the GIL,
  // which a thread cannot take while the interpreter shuts down).
  std::atomic<uint64_t> last_command_seq{0};
  void note_command(uint64_t seq);
  // Done, future completed, and no queue command holds it any more.
  bool releasable();
  // The device tensors the transport reads or writes through host aliases: alive until done
  // (filled at launch, cleared when the transport completes).
  std::vector<at::Tensor> keep_alive;
  std::vector<at::Tensor> results;  // Work.result() and the future's value
  // Contiguous stand-ins for non-contiguous arguments: copied back after the wait.
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (user tensor, staged)
  std::function<InnerWorks()> post;  // runs on the queue worker

  // Runs `post` (on the queue worker); a failure is kept for the waiters.
  void run_post();
  bool posted() const { return posted_.load(std::memory_order_acquire); }
  // True when the transport is done (or the post failed).
  bool completed();
  // Waits for the transport; throws a runtime error that names the collective and the peers.
  void wait_transport(std::chrono::milliseconds timeout);
  std::exception_ptr error() const;
  // The future completed with `results` once every inner work is done.
  c10::intrusive_ptr<c10::ivalue::Future> future();
  int source_rank() const;

 private:
  [[noreturn]] void fail(const std::string& why);
  void attach_future();
  // Completes the future once, whichever of the transport's callbacks and the waiters gets
  // there first: with `results`, or with the error.
  void complete_future(const std::string& error = "");

  std::atomic<bool> posted_{false};
  // Waits are serialized and done once: a Gloo send waited for twice waits for a second send.
  std::mutex wait_mutex_;
  std::atomic<bool> transport_done_{false};
  std::atomic<bool> future_done_{false};
  mutable std::mutex mutex_;
  InnerWorks inner_;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class NeuronWork final : public c10d::Work {
 public:
  // `host_wait`: wait() blocks the calling thread (barriers); otherwise it makes the current
  // stream wait, as CUDA backends do.
  NeuronWork(int rank, c10d::OpType type, std::shared_ptr<CollectiveState> state, bool host_wait);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  int sourceRank() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  void blockCurrentStream() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return sequence_number_; }
  void set_sequence_number(uint64_t number) { sequence_number_ = number; }

 private:
  void enqueue_stream_wait(std::chrono::milliseconds timeout);
  void copy_back_once();

  std::shared_ptr<CollectiveState> state_;
  const bool host_wait_;
  std::once_flag copied_back_;
  uint64_t sequence_number_ = 0;
};

}  // namespace torchneuron::c10d_backend
