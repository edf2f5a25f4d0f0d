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
  m.def(
      "create_backend",
      [](py::object transport, py::object store, int rank, int size, double timeout_s) {
        auto* inner = transport.cast<c10d::Backend*>();
        auto* shared_store = store.cast<c10d::Store*>();
        TORCH_CHECK(inner != nullptr, "create_backend: no transport backend");
        auto backend = c10::make_intrusive<c10d_backend::NeuronBackend>(
            rank, size, c10::intrusive_ptr<c10d::Backend>::reclaim_copy(inner),
            shared_store ? c10::intrusive_ptr<c10d::Store>::reclaim_copy(shared_store) : nullptr,
            std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
        return c10::intrusive_ptr<c10d::Backend>(std::move(backend));
      },
      py::arg("transport"), py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"),
      "The neuron backend over `transport` (a torch.distributed Backend for CPU tensors).");
}

}  // namespace torchneuron::python
