// The torch.distributed backend `neuron`: every collective is a command on the device's hardware
// queue, after the kernels that produce its inputs; the bytes move through a transport backend
// (Gloo, built by the Python creator from the same store) on host aliases of the device buffers.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "c10d/collective_work.h"
#include "c10d/shared_memory_transport.h"

namespace torchneuron::c10d_backend {

// Builds the transport of a group: (store, group rank, group size, timeout, global ranks).
using TransportFactory = std::function<c10::intrusive_ptr<c10d::Backend>(
    const c10::intrusive_ptr<c10d::Store>&, int, int, std::chrono::milliseconds, const std::vector<uint64_t>&)>;

// A failure message's tail: which peers of a group look gone or behind, from the heartbeats
// their backends write to the group's store.
std::string diagnose_peers(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                           uint64_t sequence_number);

class NeuronBackend final : public c10d::Backend {
 public:
  NeuronBackend(int rank, int size, c10::intrusive_ptr<c10d::Backend> transport,
                c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout,
                std::vector<uint64_t> global_ranks, TransportFactory transport_factory, std::string machine_id);
  ~NeuronBackend() override;

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  uint64_t split_count() const { return splits_; }
  void setSequenceNumberForGroup() override { transport_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return transport_->getSequenceNumberForGroup(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  void abort() override;
  void shutdown() override;

  // Used by CollectiveLaunch.
  c10d::Backend& transport() { return *transport_; }
  uint64_t next_sequence_number() { return ++collectives_; }
  std::string group_label() const;
  // Keeps a launched collective (and so its tensors) until its transport is done.
  void track(std::shared_ptr<CollectiveState> state);
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }

 private:
  // Reduce-scatter of contiguous flat tensors; the result lands in `user_output` after the wait.
  c10::intrusive_ptr<c10d::Work> reduce_scatter_flat(const at::Tensor& output, at::Tensor input,
                                                     const c10d::ReduceScatterOptions& opts,
                                                     const at::Tensor& user_output);
  // The shared-memory transport's element type and reduction for a tensor and op, if it has them.
  bool shared_memory_takes(const at::Tensor& tensor, const c10d::ReduceOp* op = nullptr) const;
  std::chrono::milliseconds timeout_or_default(std::chrono::milliseconds timeout) const;
  void wait_in_flight();
  void drain_queues();
  void start_heartbeat();
  void stop_heartbeat();

  c10::intrusive_ptr<c10d::Backend> transport_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  const std::vector<uint64_t> global_ranks_;  // of this group's ranks, in group order
  const TransportFactory transport_factory_;
  const std::string machine_id_;  // ranks with the same id share memory; "" turns that off
  // Inside one machine: the shared-memory transport for the collectives it has (else null).
  std::unique_ptr<SharedMemoryTransport> shared_memory_;
  std::atomic<uint64_t> collectives_{0};
  std::atomic<uint64_t> splits_{0};
  std::mutex in_flight_mutex_;
  std::deque<std::shared_ptr<CollectiveState>> in_flight_;
  std::atomic<uint64_t> devices_used_{0};  // bit d: a collective ran on neuron:d
  // Each rank publishes (collectives launched, time) to the store twice a second, so that a
  // failure can say which peer died or stopped calling collectives.
  std::thread heartbeat_;
  std::mutex heartbeat_mutex_;
  std::condition_variable heartbeat_stop_;
  bool stopping_ = false;
};

}  // namespace torchneuron::c10d_backend
