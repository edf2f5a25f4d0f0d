// Building one collective's launch: checking and staging its device tensors, making the host
// aliases the transport works on, and submitting the post command to the hardware queue.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <memory>
#include <vector>

#include "c10d/collective_work.h"

namespace torchneuron::c10d_backend {

class NeuronBackend;

class CollectiveLaunch {
 public:
  // `op` is a static name such as "c10d::allreduce".
  CollectiveLaunch(NeuronBackend& backend, const char* op, c10d::OpType type);

  // Each returns the host alias of a device tensor for the transport. Non-contiguous tensors are
  // staged in a contiguous device copy (written back after the wait for outputs).
  at::Tensor input(const at::Tensor& tensor);
  at::Tensor output(const at::Tensor& tensor);
  at::Tensor inout(const at::Tensor& tensor);
  std::vector<at::Tensor> inputs(const std::vector<at::Tensor>& tensors);
  std::vector<at::Tensor> outputs(const std::vector<at::Tensor>& tensors);

  // Turns PREMUL_SUM and floating AVG into SUM by scaling `tensor` on the device before the
  // post: in place for collectives that overwrite it, else a scaled copy replaces it.
  c10d::ReduceOp prescale(at::Tensor& tensor, const c10d::ReduceOp& op, bool in_place);
  // A device tensor that replaces `user` for the transport and is copied into it after the wait.
  void copy_back(const at::Tensor& user, const at::Tensor& staged);

  // Enqueues the post on the current stream of the collective's device. `results`: what
  // Work.result() and the future give. `host_wait`: wait() blocks the host (barriers).
  c10::intrusive_ptr<c10d::Work> submit(std::function<InnerWorks()> post, std::vector<at::Tensor> results,
                                        bool host_wait = false);

 private:
  void check_device(const at::Tensor& tensor);
  at::Tensor alias(const at::Tensor& tensor);

  NeuronBackend& backend_;
  const char* op_;
  c10d::OpType type_;
  int device_index_ = -1;
  int64_t bytes_ = 0;
  std::shared_ptr<CollectiveState> state_;
};

// The host alias of a contiguous device tensor: a CPU tensor over the same bytes, owning nothing.
at::Tensor host_alias(const at::Tensor& tensor);

}  // namespace torchneuron::c10d_backend
