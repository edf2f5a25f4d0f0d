// The `neuron` c10d backend's collectives (see neuron_backend.h). Each one checks and stages its
// device tensors, then posts the transport's collective from a queue command.
#include "c10d/neuron_backend.h"

#include <ATen/Functions.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <optional>
#include <sstream>

#include "c10d/collective_launch.h"
#include "runtime/device.h"

namespace torchneuron::c10d_backend {
namespace {

using c10d::OpType;
using Transport = c10::intrusive_ptr<c10d::Backend>;
constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(500);

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, op, ": the neuron backend takes one tensor per rank, got ", tensors.size());
  return tensors.front();
}

// The transport with `this` kept alive by the post command.
Transport transport_of(c10d::Backend& transport) {
  return c10::intrusive_ptr<c10d::Backend>::reclaim_copy(&transport);
}

}  // namespace

NeuronBackend::NeuronBackend(int rank, int size, c10::intrusive_ptr<c10d::Backend> transport,
                             c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout,
                             std::vector<uint64_t> global_ranks, TransportFactory transport_factory,
                             std::string machine_id)
    : c10d::Backend(rank, size),
      transport_(std::move(transport)),
      store_(std::move(store)),
      timeout_(timeout),
      global_ranks_(std::move(global_ranks)),
      transport_factory_(std::move(transport_factory)),
      machine_id_(std::move(machine_id)),
      shared_memory_(SharedMemoryTransport::connect(store_, rank, size, machine_id_)) {
  start_heartbeat();
}

NeuronBackend::~NeuronBackend() {
  stop_heartbeat();
  drain_queues();
}

c10::intrusive_ptr<c10d::Backend::Options> NeuronBackend::getBackendOptions() {
  return c10::make_intrusive<Options>("neuron", timeout_);
}

c10::intrusive_ptr<c10d::Backend> NeuronBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                       const std::vector<int>& ranks,
                                                       const c10::intrusive_ptr<Options>& opts) {
  // A new transport on a store of the child's own: ProcessGroup::splitGroup hands every child
  // group of one split the same store, and Gloo's own split rendezvouses on its parent's keys,
  // so two groups of two ranks would meet as one.
  const uint64_t split_number = ++splits_;
  const auto me = std::find(ranks.begin(), ranks.end(), getRank());
  if (me == ranks.end()) return nullptr;
  std::vector<uint64_t> global_ranks;
  for (int rank : ranks) {
    TORCH_CHECK(rank >= 0 && rank < getSize(), "split: rank ", rank, " is not in a group of ", getSize());
    global_ranks.push_back(global_ranks_.empty() ? static_cast<uint64_t>(rank) : global_ranks_[rank]);
  }
  const int rank = static_cast<int>(me - ranks.begin());
  const int size = static_cast<int>(ranks.size());
  const auto timeout = opts ? opts->timeout : timeout_;
  std::string prefix = c10::str("neuron_split/", split_number, "/ranks");
  for (uint64_t global : global_ranks) prefix += c10::str("_", global);
  auto child_store = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  auto inner = transport_factory_(child_store, rank, size, timeout, global_ranks);
  return c10::make_intrusive<NeuronBackend>(rank, size, inner, child_store, timeout, global_ranks,
                                            transport_factory_, machine_id_);
}

void NeuronBackend::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  transport_->setTimeout(timeout);
}

std::string NeuronBackend::group_label() const {
  const std::string& name = getGroupUid();
  return c10::str("group '", name.empty() ? "unnamed" : name, "' (rank ", getRank(), " of ", getSize(), ")");
}

void NeuronBackend::track(std::shared_ptr<CollectiveState> state) {
  std::lock_guard<std::mutex> lock(in_flight_mutex_);
  devices_used_ |= uint64_t{1} << state->device_index;
  while (!in_flight_.empty() && in_flight_.front()->releasable()) in_flight_.pop_front();
  in_flight_.push_back(std::move(state));
}

void NeuronBackend::wait_in_flight() {
  std::deque<std::shared_ptr<CollectiveState>> pending;
  {
    std::lock_guard<std::mutex> lock(in_flight_mutex_);
    pending.swap(in_flight_);
  }
  for (auto& state : pending) {
    runtime::device(state->device_index).queue().wait_for(state->post_seq);
    try {
      state->wait_transport(timeout_);
    } catch (const std::exception&) {
      // already reported to whoever waits on it
    }
  }
  drain_queues();
}

void NeuronBackend::drain_queues() {
  // Every queue command that holds a collective's state (a stream-side wait may come after the
  // state left in_flight_) finishes before this thread drops the states (see releasable).
  for (int index = 0; index < runtime::kMaxDevices; ++index) {
    if (devices_used_ & (uint64_t{1} << index)) {
      auto& queue = runtime::device(index).queue();
      queue.wait_for(queue.last_submitted());
    }
  }
}

// ---- peer heartbeats ----

void NeuronBackend::start_heartbeat() {
  if (!store_) return;
  heartbeat_ = std::thread([this] {
    const std::string key = c10::str("neuron_heartbeat/", getRank());
    std::unique_lock<std::mutex> lock(heartbeat_mutex_);
    while (!stopping_) {
      lock.unlock();
      try {
        std::string value = c10::str(collectives_.load(), " ", now_ms());
        store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
      } catch (const std::exception&) {
        // the store is gone (shutdown); a failure report will say so
      }
      lock.lock();
      heartbeat_stop_.wait_for(lock, kHeartbeatPeriod, [this] { return stopping_; });
    }
  });
}

void NeuronBackend::stop_heartbeat() {
  {
    std::lock_guard<std::mutex> lock(heartbeat_mutex_);
    stopping_ = true;
  }
  heartbeat_stop_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

std::string diagnose_peers(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                           uint64_t sequence_number) {
  if (!store) return "";
  // Two readings of every peer's heartbeat, more than a heartbeat period apart: a peer whose
  // reading did not move is gone; one that moves but launched fewer collectives stopped short.
  auto read = [&](int peer) -> std::optional<std::pair<uint64_t, int64_t>> {
    const std::string key = c10::str("neuron_heartbeat/", peer);
    if (!store->check({key})) return std::nullopt;
    auto bytes = store->get(key);
    std::istringstream value(std::string(bytes.begin(), bytes.end()));
    uint64_t launched = 0;
    int64_t time_ms = 0;
    value >> launched >> time_ms;
    return std::make_pair(launched, time_ms);
  };
  std::ostringstream report;
  try {
    std::vector<std::optional<std::pair<uint64_t, int64_t>>> before(size);
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) before[peer] = read(peer);
    }
    std::this_thread::sleep_for(kHeartbeatPeriod * 3);
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      auto after = read(peer);
      if (!after) {
        report << "; rank " << peer << " never started";
      } else if (before[peer] && after->second == before[peer]->second) {
        report << "; rank " << peer << " is gone (no heartbeat for "
               << static_cast<double>(now_ms() - after->second) / 1000.0 << " s)";
      } else if (after->first < sequence_number) {
        report << "; rank " << peer << " is alive but has launched only " << after->first
               << " collectives on this group (this one is #" << sequence_number << ")";
      }
    }
  } catch (const c10::Error& e) {
    report << "; the peers' state is unknown (" << e.what_without_backtrace() << ")";
  } catch (const std::exception& e) {
    report << "; the peers' state is unknown (" << e.what() << ")";
  }
  return report.str();
}

// ---- collectives ----

namespace {

std::optional<collectives::ElementType> element_type(c10::ScalarType type) {
  using collectives::ElementType;
  switch (type) {
    case c10::kFloat: return ElementType::kFloat32;
    case c10::kDouble: return ElementType::kFloat64;
    case c10::kHalf: return ElementType::kFloat16;
    case c10::kBFloat16: return ElementType::kBFloat16;
    case c10::kChar: return ElementType::kInt8;
    case c10::kByte: return ElementType::kUInt8;
    case c10::kInt: return ElementType::kInt32;
    case c10::kLong: return ElementType::kInt64;
    default: return std::nullopt;
  }
}

std::optional<collectives::Reduction> reduction(const c10d::ReduceOp& op) {
  using collectives::Reduction;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return Reduction::kSum;
    case c10d::ReduceOp::PRODUCT: return Reduction::kProduct;
    case c10d::ReduceOp::MIN: return Reduction::kMin;
    case c10d::ReduceOp::MAX: return Reduction::kMax;
    default: return std::nullopt;
  }
}

}  // namespace

bool NeuronBackend::shared_memory_takes(const at::Tensor& tensor, const c10d::ReduceOp* op) const {
  return shared_memory_ && element_type(tensor.scalar_type()) && (op == nullptr || reduction(*op));
}

std::chrono::milliseconds NeuronBackend::timeout_or_default(std::chrono::milliseconds timeout) const {
  return timeout == c10d::kUnsetTimeout ? timeout_ : timeout;
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::broadcast", OpType::BROADCAST);
  const at::Tensor& tensor = single(tensors, "broadcast");
  std::vector<at::Tensor> alias{launch.inout(tensor)};
  if (shared_memory_takes(tensor)) {
    const auto timeout = timeout_or_default(opts.timeout);
    const int root = static_cast<int>(opts.rootRank);
    return launch.submit([shm = shared_memory_.get(), a = alias[0], timeout, root] {
      return InnerWorks{shm->run([a, timeout, root](collectives::SharedMemoryGroup& group) {
        group.broadcast(a.data_ptr(), a.nbytes(), root, timeout);
      })};
    }, {tensor});
  }
  return launch.submit([t = transport_of(*transport_), alias, opts]() mutable {
    return InnerWorks{t->broadcast(alias, opts)};
  }, {tensor});
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::allreduce", OpType::ALLREDUCE);
  at::Tensor tensor = single(tensors, "allreduce");
  c10d::AllreduceOptions inner = opts;
  inner.reduceOp = launch.prescale(tensor, opts.reduceOp, /*in_place=*/true);
  std::vector<at::Tensor> alias{launch.inout(tensor)};
  if (shared_memory_takes(tensor, &inner.reduceOp)) {
    const auto timeout = timeout_or_default(opts.timeout);
    const auto type = *element_type(tensor.scalar_type());
    const auto op = *reduction(inner.reduceOp);
    return launch.submit([shm = shared_memory_.get(), a = alias[0], timeout, type, op] {
      return InnerWorks{shm->run([a, timeout, type, op](collectives::SharedMemoryGroup& group) {
        group.allreduce(a.data_ptr(), static_cast<size_t>(a.numel()), type, op, timeout);
      })};
    }, {tensor});
  }
  return launch.submit([t = transport_of(*transport_), alias, inner]() mutable {
    return InnerWorks{t->allreduce(alias, inner)};
  }, {tensor});
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                  const c10d::AllreduceCoalescedOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::allreduce_coalesced", OpType::ALLREDUCE_COALESCED);
  c10d::AllreduceOptions inner;
  inner.timeout = opts.timeout;
  std::vector<at::Tensor> aliases;
  for (at::Tensor tensor : tensors) {
    inner.reduceOp = launch.prescale(tensor, opts.reduceOp, /*in_place=*/true);
    aliases.push_back(launch.inout(tensor));
  }
  return launch.submit([t = transport_of(*transport_), aliases, inner]() mutable {
    InnerWorks works;
    for (auto& alias : aliases) {
      std::vector<at::Tensor> one{alias};
      works.push_back(t->allreduce(one, inner));
    }
    return works;
  }, tensors);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::reduce", OpType::REDUCE);
  at::Tensor tensor = single(tensors, "reduce");
  c10d::ReduceOptions inner = opts;
  inner.reduceOp = launch.prescale(tensor, opts.reduceOp, /*in_place=*/true);
  std::vector<at::Tensor> alias{launch.inout(tensor)};
  return launch.submit([t = transport_of(*transport_), alias, inner]() mutable {
    return InnerWorks{t->reduce(alias, inner)};
  }, {tensor});
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::allgather", OpType::ALLGATHER);
  TORCH_CHECK(outputs.size() == 1, "allgather: the neuron backend takes one output list per rank");
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == getSize(), "allgather: expected ", getSize(),
              " output tensors (one per rank), got ", outputs[0].size());
  std::vector<at::Tensor> input{launch.input(single(inputs, "allgather"))};
  std::vector<std::vector<at::Tensor>> output{launch.outputs(outputs[0])};
  return launch.submit([t = transport_of(*transport_), output, input, opts]() mutable {
    return InnerWorks{t->allgather(output, input, opts)};
  }, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::allgather_into_tensor", OpType::_ALLGATHER_BASE);
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "all_gather_into_tensor: the output has ",
              output.numel(), " elements; it must have world size (", getSize(), ") times the input's ",
              input.numel());
  at::Tensor in = launch.input(input);
  at::Tensor out = launch.output(output);
  if (shared_memory_takes(input) && input.scalar_type() == output.scalar_type()) {
    const auto timeout = timeout_or_default(opts.timeout);
    return launch.submit([shm = shared_memory_.get(), in, out, timeout, size = getSize()] {
      return InnerWorks{shm->run([in, out, timeout, size](collectives::SharedMemoryGroup& group) {
        std::vector<void*> pieces;
        for (int r = 0; r < size; ++r) pieces.push_back(static_cast<char*>(out.data_ptr()) + r * in.nbytes());
        group.allgather(in.data_ptr(), pieces.data(), in.nbytes(), timeout);
      })};
    }, {output});
  }
  return launch.submit([t = transport_of(*transport_), out, in, opts]() mutable {
    return InnerWorks{t->_allgather_base(out, in, opts)};
  }, {output});
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                  std::vector<at::Tensor>& inputs,
                                                                  const c10d::AllgatherOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::allgather_coalesced", OpType::ALLGATHER_COALESCED);
  TORCH_CHECK(outputs.size() == inputs.size(), "allgather_coalesced: ", outputs.size(), " output lists for ",
              inputs.size(), " inputs");
  std::vector<std::vector<at::Tensor>> out_aliases;
  std::vector<at::Tensor> in_aliases = launch.inputs(inputs);
  std::vector<at::Tensor> results;
  for (auto& list : outputs) {
    out_aliases.push_back(launch.outputs(list));
    results.insert(results.end(), list.begin(), list.end());
  }
  return launch.submit([t = transport_of(*transport_), out_aliases, in_aliases, opts]() mutable {
    InnerWorks works;
    for (size_t i = 0; i < in_aliases.size(); ++i) {
      std::vector<std::vector<at::Tensor>> out{out_aliases[i]};
      std::vector<at::Tensor> in{in_aliases[i]};
      works.push_back(t->allgather(out, in, opts));
    }
    return works;
  }, results);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                              std::vector<at::Tensor>& inputs,
                                                                              const c10d::AllgatherOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::allgather_into_tensor_coalesced", OpType::COALESCED);
  TORCH_CHECK(outputs.size() == inputs.size(), "allgather_into_tensor_coalesced: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  std::vector<at::Tensor> in_aliases = launch.inputs(inputs);
  std::vector<at::Tensor> out_aliases = launch.outputs(outputs);
  return launch.submit([t = transport_of(*transport_), out_aliases, in_aliases, opts]() mutable {
    InnerWorks works;
    for (size_t i = 0; i < in_aliases.size(); ++i) works.push_back(t->_allgather_base(out_aliases[i], in_aliases[i], opts));
    return works;
  }, outputs);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::GatherOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::gather", OpType::GATHER);
  std::vector<at::Tensor> input{launch.input(single(inputs, "gather"))};
  std::vector<std::vector<at::Tensor>> output;
  std::vector<at::Tensor> results;
  for (auto& list : outputs) {
    output.push_back(launch.outputs(list));
    results.insert(results.end(), list.begin(), list.end());
  }
  return launch.submit([t = transport_of(*transport_), output, input, opts]() mutable {
    return InnerWorks{t->gather(output, input, opts)};
  }, results);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::scatter(std::vector<at::Tensor>& outputs,
                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                      const c10d::ScatterOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::scatter", OpType::SCATTER);
  std::vector<at::Tensor> output{launch.output(single(outputs, "scatter"))};
  std::vector<std::vector<at::Tensor>> input;
  for (auto& list : inputs) input.push_back(launch.inputs(list));
  return launch.submit([t = transport_of(*transport_), output, input, opts]() mutable {
    return InnerWorks{t->scatter(output, input, opts)};
  }, outputs);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ReduceScatterOptions& opts) {
  // As one reduce-scatter of the inputs laid end to end, when every piece has the output's size.
  const at::Tensor& output = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(), "reduce_scatter: expected ",
              getSize(), " input tensors (one per rank)");
  for (const auto& piece : inputs[0]) {
    TORCH_CHECK(piece.numel() == output.numel() && piece.scalar_type() == output.scalar_type(),
                "reduce_scatter: every input must have the output's size and dtype, got ", piece.sizes(), " ",
                piece.scalar_type(), " for ", output.sizes(), " ", output.scalar_type());
  }
  std::vector<at::Tensor> flat_pieces;
  for (const auto& piece : inputs[0]) flat_pieces.push_back(piece.reshape({-1}));
  at::Tensor flat_input = at::cat(flat_pieces);
  at::Tensor flat_output = output.is_contiguous() ? output.view({-1}) : at::empty({output.numel()}, output.options());
  return reduce_scatter_flat(flat_output, flat_input, opts, output);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "reduce_scatter_tensor: the input has ",
              input.numel(), " elements; it must have world size (", getSize(), ") times the output's ",
              output.numel());
  return reduce_scatter_flat(output, input, opts, output);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter_flat(const at::Tensor& output, at::Tensor input,
                                                                  const c10d::ReduceScatterOptions& opts,
                                                                  const at::Tensor& user_output) {
  CollectiveLaunch launch(*this, "c10d::reduce_scatter", OpType::_REDUCE_SCATTER_BASE);
  c10d::ReduceScatterOptions inner = opts;
  inner.reduceOp = launch.prescale(input, opts.reduceOp, /*in_place=*/false);
  at::Tensor in = launch.input(input);
  at::Tensor out = launch.output(output);
  if (!(user_output.is_contiguous() && output.data_ptr() == user_output.data_ptr())) launch.copy_back(user_output, output.view(user_output.sizes()));
  if (shared_memory_takes(input, &inner.reduceOp) && input.scalar_type() == output.scalar_type()) {
    const auto timeout = timeout_or_default(opts.timeout);
    const auto type = *element_type(input.scalar_type());
    const auto op = *reduction(inner.reduceOp);
    return launch.submit([shm = shared_memory_.get(), in, out, timeout, type, op] {
      return InnerWorks{shm->run([in, out, timeout, type, op](collectives::SharedMemoryGroup& group) {
        group.reduce_scatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()), type, op, timeout);
      })};
    }, {user_output});
  }
  return launch.submit([t = transport_of(*transport_), out, in, inner]() mutable {
    return InnerWorks{t->_reduce_scatter_base(out, in, inner)};
  }, {user_output});
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::reduce_scatter_tensor_coalesced", OpType::REDUCE_SCATTER_TENSOR_COALESCED);
  TORCH_CHECK(outputs.size() == inputs.size(), "reduce_scatter_tensor_coalesced: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  c10d::ReduceScatterOptions inner = opts;
  std::vector<at::Tensor> in_aliases;
  for (at::Tensor input : inputs) {
    inner.reduceOp = launch.prescale(input, opts.reduceOp, /*in_place=*/false);
    in_aliases.push_back(launch.input(input));
  }
  std::vector<at::Tensor> out_aliases = launch.outputs(outputs);
  return launch.submit([t = transport_of(*transport_), out_aliases, in_aliases, inner]() mutable {
    InnerWorks works;
    for (size_t i = 0; i < in_aliases.size(); ++i) {
      works.push_back(t->_reduce_scatter_base(out_aliases[i], in_aliases[i], inner));
    }
    return works;
  }, outputs);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                            std::vector<int64_t>& output_split_sizes,
                                                            std::vector<int64_t>& input_split_sizes,
                                                            const c10d::AllToAllOptions& opts) {
  CollectiveLaunch launch(*this, "c10d::alltoall_base", OpType::ALLTOALL_BASE);
  at::Tensor in = launch.input(input);
  at::Tensor out = launch.output(output);
  return launch.submit([t = transport_of(*transport_), out, in, output_split_sizes, input_split_sizes,
                        opts]() mutable {
    return InnerWorks{t->alltoall_base(out, in, output_split_sizes, input_split_sizes, opts)};
  }, {output});
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllToAllOptions& opts) {
  // As one all-to-all of the flattened tensors laid end to end, split by element counts.
  TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() && static_cast<int>(outputs.size()) == getSize(),
              "all_to_all: expected ", getSize(), " input and output tensors (one per rank), got ", inputs.size(),
              " and ", outputs.size());
  CollectiveLaunch launch(*this, "c10d::alltoall", OpType::ALLTOALL);
  std::vector<at::Tensor> flat_inputs;
  std::vector<int64_t> input_splits, output_splits;
  int64_t output_numel = 0;
  for (int r = 0; r < getSize(); ++r) {
    TORCH_CHECK(inputs[r].scalar_type() == outputs[r].scalar_type() &&
                    inputs[r].scalar_type() == inputs[0].scalar_type(),
                "all_to_all: every tensor must have one dtype");
    flat_inputs.push_back(inputs[r].reshape({-1}));
    input_splits.push_back(inputs[r].numel());
    output_splits.push_back(outputs[r].numel());
    output_numel += outputs[r].numel();
  }
  at::Tensor flat_input = at::cat(flat_inputs);
  at::Tensor flat_output = at::empty({output_numel}, outputs[0].options());
  at::Tensor in = launch.input(flat_input);
  at::Tensor out = launch.output(flat_output);
  int64_t offset = 0;
  for (int r = 0; r < getSize(); ++r) {
    launch.copy_back(outputs[r], flat_output.narrow(0, offset, output_splits[r]).view(outputs[r].sizes()));
    offset += output_splits[r];
  }
  return launch.submit([t = transport_of(*transport_), out, in, output_splits, input_splits, opts]() mutable {
    return InnerWorks{t->alltoall_base(out, in, output_splits, input_splits, opts)};
  }, outputs);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  CollectiveLaunch launch(*this, "c10d::send", OpType::SEND);
  std::vector<at::Tensor> alias{launch.input(single(tensors, "send"))};
  return launch.submit([t = transport_of(*transport_), alias, dst_rank, tag]() mutable {
    return InnerWorks{t->send(alias, dst_rank, tag)};
  }, tensors);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  CollectiveLaunch launch(*this, "c10d::recv", OpType::RECV);
  std::vector<at::Tensor> alias{launch.output(single(tensors, "recv"))};
  return launch.submit([t = transport_of(*transport_), alias, src_rank, tag]() mutable {
    return InnerWorks{t->recv(alias, src_rank, tag)};
  }, tensors);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  CollectiveLaunch launch(*this, "c10d::recv_anysource", OpType::RECVANYSOURCE);
  std::vector<at::Tensor> alias{launch.output(single(tensors, "recv"))};
  return launch.submit([t = transport_of(*transport_), alias, tag]() mutable {
    return InnerWorks{t->recvAnysource(alias, tag)};
  }, tensors);
}

c10::intrusive_ptr<c10d::Work> NeuronBackend::barrier(const c10d::BarrierOptions& opts) {
  // Ordered after the device work before it, and waited for on the host.
  CollectiveLaunch launch(*this, "c10d::barrier", OpType::BARRIER);
  return launch.submit([t = transport_of(*transport_), opts]() mutable { return InnerWorks{t->barrier(opts)}; },
                       {}, /*host_wait=*/true);
}

void NeuronBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  transport_->monitoredBarrier(opts, wait_all_ranks);
}

void NeuronBackend::abort() {
  stop_heartbeat();
  transport_->abort();
}

void NeuronBackend::shutdown() {
  wait_in_flight();
  stop_heartbeat();
  transport_->shutdown();
}

}  // namespace torchneuron::c10d_backend
