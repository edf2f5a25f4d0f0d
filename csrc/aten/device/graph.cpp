// at::GraphImplInterface for neuron (torch.accelerator.Graph, torch.neuron.NeuronGraph): capture
// records the capturing thread's commands into a runtime::CapturedGraph with memory from the
// graph's pool; a replay is one queue command that runs them.
#include <ATen/core/GraphImplInterface.h>
#include <c10/util/Exception.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>

#include "aten/device/generator.h"
#include "aten/device/neuron_tensor.h"
#include "runtime/device.h"
#include "runtime/graph_capture.h"

namespace torchneuron::aten {
namespace {

// MempoolId_t pairs name pools to users; the allocator keys them by one number.
uint64_t allocator_pool_key(at::MempoolId_t id) {
  static std::mutex mutex;
  static std::map<at::MempoolId_t, uint64_t> keys;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = keys.find(id);
  if (it == keys.end()) it = keys.emplace(id, keys.size() + 1).first;
  return it->second;
}

runtime::PhiloxGenerator& default_philox(int device) {
  auto* gen = default_generator(static_cast<c10::DeviceIndex>(device)).get<NeuronGeneratorImpl>();
  return gen->philox();
}

class NeuronGraphImpl final : public at::GraphImplInterface {
 public:
  explicit NeuronGraphImpl(const at::GraphImplArgs& /*args*/) {}
  ~NeuronGraphImpl() override {
    try {
      if (capturing_) end_capture_state();
      release();
    } catch (...) {  // a destructor never throws; the device may be gone at exit
    }
  }

  void capture_begin(at::MempoolId_t pool, at::GraphCaptureMode /*mode*/) override {
    TORCH_CHECK(!capturing_, "neuron graph: capture_begin() called while this graph is capturing");
    release();  // a graph captured before is replaced, as after reset()
    device_ = runtime::current_device();
    runtime::Device& device = runtime_call([&]() -> runtime::Device& { return runtime::device(device_); });
    device.queue().last_submitted();  // adaptive eager's held-back ops go to the queue now, not into the graph
    stream_ = runtime::current_stream(device_);
    pool_ = (pool.first != 0 || pool.second != 0) ? pool : at::MempoolId_t{runtime::new_graph_pool_id(), 0};
    pool_key_ = allocator_pool_key(pool_);
    device.allocator().retain_pool(pool_key_);
    graph_ = std::make_shared<runtime::CapturedGraph>();
    graph_->device = device_;
    runtime_call([&] { device.queue().begin_capture(stream_, graph_.get()); });
    device.allocator().begin_allocate_to_pool(pool_key_, stream_);
    default_philox(device_).begin_capture(graph_->rng_state());
    capturing_ = true;
  }

  void capture_end() override {
    TORCH_CHECK(capturing_, "neuron graph: capture_end() called without capture_begin()");
    end_capture_state();
  }

  void instantiate() override {}  // a captured list runs as it is

  void replay() override {
    TORCH_CHECK(!capturing_, "neuron graph: replay() called during its own capture");
    TORCH_CHECK(graph_ != nullptr, "neuron graph: replay() called before a capture (or after reset())");
    TORCH_CHECK(graph_->invalidated.empty(), "neuron graph: the capture failed and cannot be replayed: ",
                graph_->invalidated);
    const auto [seed, offset] =
        graph_->rng_words > 0 ? default_philox(device_).take_for_replay(graph_->rng_words) : std::pair<uint64_t, uint64_t>{0, 0};
    runtime::LaunchInfo info = runtime::LaunchInfo::named("graph_replay");
    info.site = runtime::capture_launch_site();
    std::shared_ptr<runtime::CapturedGraph> graph = graph_;
    const runtime::StreamId stream = runtime::current_stream(device_);
    runtime_call([&] {
      runtime::device(device_).queue().submit(stream, info, [graph, seed = seed, offset = offset, stream] {
        graph->run(seed, offset, stream);
      });
    });
  }

  void reset() override {
    TORCH_CHECK(!capturing_, "neuron graph: reset() called during capture; call capture_end() first");
    release();
  }

  at::MempoolId_t pool() const override {
    TORCH_CHECK(graph_ != nullptr || capturing_, "neuron graph: pool() called before a capture");
    return pool_;
  }

  void enable_debug_mode() override { debug_ = true; }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(graph_ != nullptr, "neuron graph: debug_dump() called before a capture");
    std::ofstream out(path);
    TORCH_CHECK(out.good(), "neuron graph: cannot write ", path);
    out << "neuron:" << device_ << " graph of " << graph_->size() << " commands, pool (" << pool_.first << ", "
        << pool_.second << "), " << graph_->rng_words << " random words per replay\n"
        << graph_->describe();
  }

  size_t num_commands() const { return graph_ ? graph_->size() : 0; }

 private:
  void end_capture_state() {
    runtime::Device& device = runtime::device(device_);
    device.queue().last_submitted();  // adaptive eager's held-back ops of the region go into the graph
    device.queue().end_capture(stream_);
    graph_->rng_words = default_philox(device_).end_capture();
    device.allocator().end_allocate_to_pool(stream_);
    capturing_ = false;
  }

  void release() {
    graph_.reset();
    if (pool_key_ != 0) runtime::device(device_).allocator().release_pool(pool_key_);
    pool_key_ = 0;
  }

  int device_ = 0;
  runtime::StreamId stream_ = 0;
  std::shared_ptr<runtime::CapturedGraph> graph_;
  at::MempoolId_t pool_{0, 0};
  uint64_t pool_key_ = 0;
  bool capturing_ = false;
  bool debug_ = false;
};

}  // namespace
}  // namespace torchneuron::aten

// The registry is keyed by c10::DeviceTypeName(PrivateUse1, false): the renamed backend's name
// in capitals.
namespace at {
REGISTER_GRAPH_IMPL(NEURON, torchneuron::aten::NeuronGraphImpl);
}  // namespace at
