// The Kineto activity-profiler plug-in of the neuron device: torch.profiler with
// ProfilerActivity.PrivateUse1 starts a session, which turns on the runtime's command trace and
// keeps each host op's correlation id while it launches commands; at the end every command the
// hardware queues ran becomes a device activity (a "neuron N / hw queue" track) linked to the op
// that launched it, so key_averages() counts device time and the chrome trace draws the arrows.
#include <libkineto.h>
#include <output_base.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/command_trace.h"
#include "runtime/device.h"
#include "runtime/event.h"

namespace torchneuron::profiler {
namespace {

namespace rt = torchneuron::runtime;
using libkineto::ActivityType;

// Copies move bytes (GPU_MEMCPY), fills set them (GPU_MEMSET); everything else is a kernel.
ActivityType activity_type_of(const char* op) {
  if (std::strstr(op, "copy") != nullptr || std::strstr(op, "_to_copy") != nullptr) return ActivityType::GPU_MEMCPY;
  if (std::strstr(op, "fill") != nullptr || std::strstr(op, "zero") != nullptr) return ActivityType::GPU_MEMSET;
  return ActivityType::CONCURRENT_KERNEL;
}

class NeuronProfilerSession : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    rt::command_trace::set_enabled(true);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  // Waits for the commands launched while recording, so that every one is in the trace.
  void stop() override {
    if (rt::is_initialized()) {
      for (int d = 0; d < rt::device_count(); ++d) {
        rt::HardwareQueue& queue = rt::device(d).queue();
        queue.wait_for(queue.last_submitted());
      }
    }
    rt::command_trace::set_enabled(false);
    records_ = rt::command_trace::take();
    if (const uint64_t dropped = rt::command_trace::dropped()) {
      TORCH_WARN("torch.profiler: ", dropped, " neuron device commands are missing from the trace: it holds at most ",
                 rt::command_trace::capacity(), "; set TORCHNEURON_PROFILER_MAX_COMMANDS higher, or profile fewer steps.");
    }
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity,
                    int64_t start_time, int64_t end_time) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_time, end_time, "neuron");
    buffer_->gpuOpCount = 0;
    for (const rt::CommandRecord& r : records_) {
      if (r.skipped) continue;
      // Named apart from the host op that launched it, as CUDA kernels are, so the two are
      // separate rows of key_averages().
      std::string name = std::string(r.op) + " [neuron]";
      buffer_->emplace_activity(buffer_->span, activity_type_of(r.op), name);
      libkineto::GenericTraceActivity& a = *buffer_->activities.back();
      a.startTime = r.start_ns;
      a.endTime = r.end_ns;
      a.id = static_cast<int32_t>(r.correlation);
      a.device = r.device;
      a.resource = static_cast<int32_t>(r.stream);
      a.threadId = static_cast<int32_t>(r.stream);
      if (r.correlation != 0 && linked_activity) {
        a.linked = linked_activity(static_cast<int32_t>(r.correlation));
        a.flow.id = static_cast<uint32_t>(r.correlation);
        a.flow.type = libkineto::kLinkAsyncCpuGpu;
        a.flow.start = false;
      }
      if (r.correlation != 0 && r.submit_ns != 0) add_launch(r, linked_activity, logger);
      a.addMetadata("device", r.device);
      a.addMetadata("stream", r.stream);
      a.addMetadata(r.in_graph ? "graph command" : "queue seq", r.seq);
      if (r.in_graph) a.addMetadata("in graph replay", 1);
      a.addMetadata("correlation", r.correlation);
      if (r.site != nullptr && *r.site != '\0') a.addMetadataQuoted("launched at", r.site);
      queues_.insert({r.device, r.stream});
      ++buffer_->gpuOpCount;
      logger.handleGenericActivity(a);
    }
    status_ = libkineto::TraceStatus::READY;
  }

  // The host side of a launch: an event on the submitting thread, inside the op that launched
  // the command, where the flow arrow to the device activity starts.
  void add_launch(const rt::CommandRecord& r, const libkineto::getLinkedActivityCallback& linked_activity,
                  libkineto::ActivityLogger& logger) {
    buffer_->emplace_activity(buffer_->span, ActivityType::PRIVATEUSE1_RUNTIME, std::string("neuron launch"));
    libkineto::GenericTraceActivity& launch = *buffer_->activities.back();
    launch.startTime = r.submit_ns;
    launch.endTime = r.submit_ns + 1000;
    launch.id = static_cast<int32_t>(r.correlation);
    launch.device = static_cast<int32_t>(::getpid());
    launch.resource = r.thread;
    launch.threadId = r.thread;
    if (linked_activity) launch.linked = linked_activity(static_cast<int32_t>(r.correlation));
    launch.flow.id = static_cast<uint32_t>(r.correlation);
    launch.flow.type = libkineto::kLinkAsyncCpuGpu;
    launch.flow.start = true;
    launch.addMetadataQuoted("command", r.op);
    logger.handleGenericActivity(launch);
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "neuron 0", "neuron"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [device, stream] : queues_) {
      infos.push_back(libkineto::ResourceInfo{stream, stream, device,
                                              "hw queue (stream " + std::to_string(stream) + ")"});
    }
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { rt::command_trace::push_correlation(id); }
  void popCorrelationId() override { rt::command_trace::pop_correlation(); }

  std::string getDeviceProperties() override {
    return "{\"name\": \"neuron\", \"devices\": " + std::to_string(rt::device_count()) + "}";
  }

 private:
  std::vector<rt::CommandRecord> records_;
  std::set<std::pair<int, int64_t>> queues_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class NeuronActivityProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config&) override {
    for (ActivityType t : activity_types) {
      if (activities_.count(t) != 0) return std::make_unique<NeuronProfilerSession>();
    }
    return nullptr;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_ = "neuron";
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                     ActivityType::GPU_MEMSET, ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

// The legacy path (torch.autograd.profiler.profile(use_device="neuron") without Kineto's device
// activities): each op's device time is the queue time between timing events recorded around it.
class NeuronProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const int index = rt::current_device();
    if (device != nullptr) *device = static_cast<c10::DeviceIndex>(index);
    auto marker = std::make_shared<rt::Event>(true);
    marker->record(index, rt::current_stream(index));
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    if (event != nullptr) *event = marker;
  }

  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    if (start == nullptr || end == nullptr || !*start || !*end) return 0.0f;
    const auto* a = static_cast<const rt::Event*>(start->get());
    const auto* b = static_cast<const rt::Event*>(end->get());
    return static_cast<float>(a->elapsed_ms(*b) * 1000.0);  // microseconds
  }

  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    const int saved = rt::current_device();
    for (int d = 0; d < rt::device_count(); ++d) {
      rt::set_current_device(d);
      op(d);
    }
    rt::set_current_device(saved);
  }

  void synchronize() const override {
    if (!rt::is_initialized()) return;
    for (int d = 0; d < rt::device_count(); ++d) {
      rt::HardwareQueue& queue = rt::device(d).queue();
      queue.wait_for(queue.last_submitted());
    }
  }
};

struct RegisterStubs {
  RegisterStubs() {
    static NeuronProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} register_stubs;

}  // namespace
}  // namespace torchneuron::profiler
