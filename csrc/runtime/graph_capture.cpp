#include "runtime/graph_capture.h"

#include "runtime/command_trace.h"

namespace torchneuron::runtime {

void CapturedGraph::record(const LaunchInfo& info, KernelFunction&& kernel) {
  commands_.push_back(Command{info, std::move(kernel)});
}

size_t CapturedGraph::size() const { return commands_.size(); }

void CapturedGraph::run(uint64_t seed, uint64_t offset, int64_t replay_stream) {
  if (!invalidated.empty()) throw KernelError("the graph's capture failed: " + invalidated);
  rng_.seed = seed;
  rng_.offset = offset;
  const bool traced = command_trace::enabled();
  for (size_t i = 0; i < commands_.size(); ++i) {
    Command& command = commands_[i];
    try {
      if (traced) {
        CommandRecord record;
        record.device = device;
        record.stream = replay_stream;
        record.seq = i;
        record.op = command.info.op;
        record.site = command.info.site;
        record.in_graph = true;
        record.start_ns = command_trace::now_ns();
        command.kernel();
        record.end_ns = command_trace::now_ns();
        command_trace::record(record);
      } else {
        command.kernel();
      }
    } catch (const std::exception& e) {
      std::string message = "graph command " + std::to_string(i) + " '" + command.info.op + "' failed: " + e.what();
      if (command.info.num_inputs > 0) message += "\n  inputs: " + command.info.describe_inputs();
      message += "\n  captured at: " +
                 (*command.info.site == '\0' ? std::string("<not from Python>") : std::string(command.info.site));
      throw KernelError(message);
    }
  }
}

std::string CapturedGraph::describe() const {
  std::string text;
  for (size_t i = 0; i < commands_.size(); ++i) {
    const LaunchInfo& info = commands_[i].info;
    text += std::to_string(i) + " " + info.op;
    if (info.num_inputs > 0) text += " (" + info.describe_inputs() + ")";
    if (*info.site != '\0') text += " at " + std::string(info.site);
    text += "\n";
  }
  return text;
}

uint64_t new_graph_pool_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string capture_error_message(const char* action, int device, int64_t stream) {
  return std::string(action) + " is not permitted while neuron:" + std::to_string(device) + " stream " +
         std::to_string(stream) +
         " is capturing a graph: the host cannot wait for or read work that has not run. Move host reads "
         "(.item(), .cpu(), printing), synchronizations, ops that fall back to the CPU and ops whose output "
         "shape depends on the data out of the captured region.";
}

}  // namespace torchneuron::runtime
