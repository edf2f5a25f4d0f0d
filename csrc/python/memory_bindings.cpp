// torchneuron._C memory functions for snapshots (torch.neuron.memory._snapshot and friends):
// the caching allocators' segments and blocks, and the recorded memory history.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "runtime/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/graph_capture.h"
#include "runtime/memory_history.h"

namespace py = pybind11;
namespace rt = torchneuron::runtime;

namespace torchneuron::python {

namespace {

const char* action_name(rt::MemoryAction action) {
  switch (action) {
    case rt::MemoryAction::kAlloc: return "alloc";
    case rt::MemoryAction::kFreeRequested: return "free_requested";
    case rt::MemoryAction::kFreeCompleted: return "free_completed";
    case rt::MemoryAction::kSegmentAlloc: return "segment_alloc";
    case rt::MemoryAction::kSegmentFree: return "segment_free";
  }
  return "?";
}

}  // namespace

void register_memory(py::module_& m) {
  // Graph capture state of the calling thread, and new pool handles for graphs to share.
  m.def("_is_current_stream_capturing", [] {
    if (!rt::is_initialized()) return false;
    const int device = rt::current_device();
    return rt::device(device).queue().capturing(rt::current_stream(device)) != nullptr;
  });
  m.def("_graph_pool_handle", [] { return py::make_tuple(0, rt::new_graph_pool_id()); });
  // [(address, size, pool, graph pool key (0: none), [(address, size, requested, allocated), ...]), ...]
  // of started devices.
  m.def("_memory_segments", [](int device) {
    py::list segments;
    if (!rt::is_initialized()) return segments;
    for (const auto& s : rt::device(device).allocator().snapshot()) {
      py::list blocks;
      for (const auto& b : s.blocks) blocks.append(py::make_tuple(b.address, b.size, b.requested, b.allocated));
      segments.append(py::make_tuple(s.address, s.size, s.pool == rt::kSmallPool ? "small" : "large", s.memory_pool,
                                     blocks));
    }
    return segments;
  });
  m.def("_record_memory_history", &rt::memory_history::set_recording, py::arg("enabled"), py::arg("max_entries"));
  m.def("_memory_history_recording", &rt::memory_history::recording);
  // [(device, action, address, size, site, time_us), ...], oldest first.
  m.def("_memory_history", [] {
    py::list out;
    for (const rt::MemoryEvent& e : rt::memory_history::events()) {
      out.append(py::make_tuple(e.device, action_name(e.action), e.address, e.size, e.site, e.time_us));
    }
    return out;
  });
}

}  // namespace torchneuron::python
