// torchneuron._C._c10d: the factory that torchneuron.distributed's backend creator calls. It
// shares pybind11 type records with torch (same headers and ABI), so the transport and store
// arrive as torch's own objects and the backend returns as a torch.distributed Backend.
#include <torch/csrc/utils/pybind.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

#include "c10d/neuron_backend.h"

namespace py = pybind11;

namespace torchneuron::python {

void register_c10d(py::module_& parent) {
  py::module_ m = parent.def_submodule("_c10d", "the neuron c10d backend");
  py::module_::import("torch.distributed");  // registers the Backend base class
  using torchneuron::c10d_backend::NeuronBackend;
  py::class_<NeuronBackend, c10d::Backend, c10::intrusive_ptr<NeuronBackend>>(m, "NeuronBackend",
                                                                               "The neuron c10d backend.")
      // What torch.distributed asks of a backend that splits (as it does of NCCL's): options to
      // copy into the child groups (none: a child takes its parent's timeout), and a split for
      // the ranks left out of a new group (nothing to do: Gloo connects per group).
      .def_property_readonly("options", [](const NeuronBackend&) { return py::none(); })
      .def("perform_nocolor_split", [](NeuronBackend&, const py::object&) {})
      .def("comm_split_count", &NeuronBackend::split_count);
  m.def(
      "create_backend",
      [](py::object transport, py::object store, int rank, int size, double timeout_s,
         std::vector<uint64_t> global_ranks, py::object transport_factory, std::string machine_id) {
        auto* inner = transport.cast<c10d::Backend*>();
        auto* shared_store = store.cast<c10d::Store*>();
        TORCH_CHECK(inner != nullptr && shared_store != nullptr, "create_backend: no transport or store");
        // Child groups of a split get their transport from Python (the GIL is released there).
        auto factory = std::make_shared<py::object>(std::move(transport_factory));
        torchneuron::c10d_backend::TransportFactory make_transport =
            [factory](const c10::intrusive_ptr<c10d::Store>& child_store, int child_rank, int child_size,
                      std::chrono::milliseconds timeout, const std::vector<uint64_t>& ranks) {
              py::gil_scoped_acquire gil;
              py::object made = (*factory)(child_store, child_rank, child_size, timeout.count() / 1000.0, ranks);
              return c10::intrusive_ptr<c10d::Backend>::reclaim_copy(made.cast<c10d::Backend*>());
            };
        return c10::make_intrusive<NeuronBackend>(
            rank, size, c10::intrusive_ptr<c10d::Backend>::reclaim_copy(inner),
            c10::intrusive_ptr<c10d::Store>::reclaim_copy(shared_store),
            std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)), std::move(global_ranks),
            std::move(make_transport), std::move(machine_id));
      },
      py::arg("transport"), py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"),
      py::arg("global_ranks"), py::arg("transport_factory"), py::arg("machine_id"),
      "The neuron backend over `transport` (a torch.distributed Backend for CPU tensors); "
      "`transport_factory(store, rank, size, timeout_s, global_ranks)` makes those of split groups; ranks "
      "with the same non-empty `machine_id` share memory.");
}

}  // namespace torchneuron::python
