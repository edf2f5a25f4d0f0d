// Checking, staging and submitting one collective (see collective_launch.h).
#include "c10d/collective_launch.h"

#include <ATen/Functions.h>
#include <c10/util/Exception.h>

#include "aten/device/neuron_tensor.h"
#include "c10d/neuron_backend.h"
#include "runtime/device.h"

namespace torchneuron::c10d_backend {

at::Tensor host_alias(const at::Tensor& tensor) {
  return at::from_blob(tensor.data_ptr(), tensor.sizes(), tensor.strides(),
                       at::TensorOptions().dtype(tensor.dtype()).device(at::kCPU));
}

CollectiveLaunch::CollectiveLaunch(NeuronBackend& backend, const char* op, c10d::OpType type)
    : backend_(backend), op_(op), type_(type), state_(std::make_shared<CollectiveState>()) {}

void CollectiveLaunch::check_device(const at::Tensor& tensor) {
  TORCH_CHECK(tensor.defined(), op_, ": the neuron backend got an undefined tensor");
  TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1, op_,
              ": the neuron backend takes neuron tensors, got one on ", tensor.device(),
              ". Move it with .to('neuron'), or create the group with "
              "init_process_group('cpu:gloo,neuron:neuron') so that CPU tensors go to Gloo");
  TORCH_CHECK(tensor.layout() == c10::kStrided, op_, ": the neuron backend takes dense tensors, got ",
              tensor.layout());
  const int index = tensor.device().index();
  if (device_index_ < 0) device_index_ = index;
  TORCH_CHECK(index == device_index_, op_, ": all tensors of one collective must be on one device, got neuron:",
              device_index_, " and neuron:", index);
  bytes_ += static_cast<int64_t>(tensor.nbytes());
}

at::Tensor CollectiveLaunch::alias(const at::Tensor& tensor) {
  state_->keep_alive.push_back(tensor);
  return host_alias(tensor);
}

at::Tensor CollectiveLaunch::input(const at::Tensor& tensor) {
  check_device(tensor);
  return alias(tensor.is_contiguous() ? tensor : tensor.contiguous());
}

at::Tensor CollectiveLaunch::output(const at::Tensor& tensor) {
  check_device(tensor);
  if (tensor.is_contiguous()) return alias(tensor);
  at::Tensor staged = at::empty(tensor.sizes(), tensor.options());
  copy_back(tensor, staged);
  return alias(staged);
}

at::Tensor CollectiveLaunch::inout(const at::Tensor& tensor) {
  check_device(tensor);
  if (tensor.is_contiguous()) return alias(tensor);
  at::Tensor staged = tensor.contiguous();
  copy_back(tensor, staged);
  return alias(staged);
}

std::vector<at::Tensor> CollectiveLaunch::inputs(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> aliases;
  for (const auto& tensor : tensors) aliases.push_back(input(tensor));
  return aliases;
}

std::vector<at::Tensor> CollectiveLaunch::outputs(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> aliases;
  for (const auto& tensor : tensors) aliases.push_back(output(tensor));
  return aliases;
}

void CollectiveLaunch::copy_back(const at::Tensor& user, const at::Tensor& staged) {
  state_->copy_back.emplace_back(user, staged);
}

c10d::ReduceOp CollectiveLaunch::prescale(at::Tensor& tensor, const c10d::ReduceOp& op, bool in_place) {
  const bool scales = op.op_ == c10d::ReduceOp::PREMUL_SUM || op.op_ == c10d::ReduceOp::AVG;
  if (scales && !in_place) tensor = tensor.clone();
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    auto* factor = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(factor != nullptr, op_, ": PREMUL_SUM without its factor");
    if (factor->tensor_factor.defined()) {
      tensor.mul_(factor->tensor_factor.to(tensor.device()));
    } else {
      tensor.mul_(factor->double_factor);
    }
    return c10d::ReduceOp(c10d::ReduceOp::SUM);
  }
  if (op.op_ == c10d::ReduceOp::AVG) {
    TORCH_CHECK(at::isFloatingType(tensor.scalar_type()), op_,
                ": ReduceOp.AVG needs a floating-point tensor, got ", tensor.scalar_type(),
                "; use SUM and divide");
    tensor.mul_(1.0 / backend_.getSize());
    return c10d::ReduceOp(c10d::ReduceOp::SUM);
  }
  return op;
}

c10::intrusive_ptr<c10d::Work> CollectiveLaunch::submit(std::function<InnerWorks()> post,
                                                        std::vector<at::Tensor> results, bool host_wait) {
  if (device_index_ < 0) device_index_ = runtime::current_device();
  // A collective's command waits on its peers and hands its Work the result: it cannot be
  // replayed by a graph.
  TORCH_CHECK(runtime::device(device_index_).queue().capturing(runtime::current_stream(device_index_)) == nullptr,
              op_, " on ", backend_.group_label(), ": collectives cannot be captured in a neuron graph (the group ",
              "was not set up for capture); run them outside the captured region.");
  const uint64_t number = backend_.next_sequence_number();
  state_->device_index = device_index_;
  state_->description = c10::str(op_, " #", number, " on ", backend_.group_label(), " (", bytes_, " bytes)");
  // The store, not the backend: a state can outlive its backend on a transport's thread.
  state_->diagnose_peers = [store = backend_.store(), rank = backend_.getRank(), size = backend_.getSize(), number] {
    return diagnose_peers(store, rank, size, number);
  };
  state_->post = std::move(post);
  state_->results = std::move(results);
  runtime::LaunchInfo info = runtime::LaunchInfo::named(op_);
  info.site = runtime::capture_launch_site();
  const int index = device_index_;
  state_->post_seq = aten::runtime_call([&] {
    return runtime::device(index).queue().submit(runtime::current_stream(index), info,
                                                 [state = state_] { state->run_post(); });
  });
  state_->note_command(state_->post_seq);
  backend_.track(state_);
  auto work = c10::make_intrusive<NeuronWork>(backend_.getRank(), type_, state_, host_wait);
  work->set_sequence_number(number);
  return work;
}

}  // namespace torchneuron::c10d_backend
