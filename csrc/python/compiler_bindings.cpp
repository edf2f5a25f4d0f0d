// torchneuron._C._compiler: the compiler's C++ API for the Python lowering (building the IR,
// planning, code generation, artifacts). Kernels launch through torch.ops.torchneuron.launch_fused.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "compiler/artifact.h"
#include "compiler/codegen.h"
#include "compiler/ir.h"
#include "compiler/passes.h"

namespace py = pybind11;
namespace cc = torchneuron::compiler;

namespace torchneuron::python {

void register_program(py::module_& compiler);  // program_bindings.cpp

void register_compiler(py::module_& parent) {
  py::module_ m = parent.def_submodule("_compiler", "The neuron graph compiler.");
  register_program(m);
  m.attr("version") = cc::kCompilerVersion;
  m.def("supports", &cc::supports_pointwise);

  py::class_<cc::Graph>(m, "Graph")
      .def(py::init<>())
      .def("add_input", [](cc::Graph& g, const std::string& dtype, std::vector<std::string> shape) {
        return g.add_input(cc::parse_dtype(dtype), std::move(shape));
      })
      // Operands: ints are value ids, floats are literals.
      .def("add_pointwise", [](cc::Graph& g, const std::string& op, const py::list& operands, const std::string& dtype,
                               std::vector<std::string> shape, const std::string& compute) {
        std::vector<cc::Operand> parsed;
        for (const py::handle item : operands) {
          if (py::isinstance<py::int_>(item) && !py::isinstance<py::bool_>(item)) {
            parsed.push_back(cc::Operand{item.cast<int>(), 0.0});
          } else {
            parsed.push_back(cc::Operand{-1, item.cast<double>()});
          }
        }
        return g.add_pointwise(op, std::move(parsed), cc::parse_dtype(dtype), std::move(shape), cc::parse_dtype(compute));
      })
      .def("add_reduction", [](cc::Graph& g, const std::string& op, int operand, std::vector<int> dims, bool keepdim,
                               const std::string& dtype, const std::string& compute) {
        return g.add_reduction(op, operand, std::move(dims), keepdim, cc::parse_dtype(dtype), cc::parse_dtype(compute));
      })
      .def("add_opaque", [](cc::Graph& g, int external_id, const std::vector<int>& inputs, const std::vector<std::string>& dtypes,
                            const std::vector<std::vector<std::string>>& shapes) {
        std::vector<cc::DType> parsed;
        for (const std::string& d : dtypes) parsed.push_back(cc::parse_dtype(d));
        return g.add_opaque(external_id, inputs, parsed, shapes);
      })
      .def("mark_output", &cc::Graph::mark_output)
      .def_property("round_intermediates", &cc::Graph::round_intermediates, &cc::Graph::set_round_intermediates)
      .def("__str__", &cc::Graph::to_string);

  // Runs the passes and code generation; returns the program as plain Python data.
  m.def("plan", [](cc::Graph& graph) {
    const cc::Program program = cc::plan_program(graph);
    py::list kernels;
    for (const cc::Kernel& k : program.kernels) {
      py::dict entry;
      entry["symbol"] = k.symbol;
      entry["inputs"] = k.inputs;
      entry["outputs"] = k.outputs;
      entry["nodes"] = k.nodes.size();
      entry["shape"] = k.shape;
      entry["reduce_dims"] = k.reduce_dims;
      // Per output: 0 the kernel's shape, 1 the reduced shape with keepdim, 2 without.
      std::vector<int> forms;
      for (int v : k.outputs) {
        const cc::Shape& shape = graph.values()[v].shape;
        forms.push_back(shape == k.shape ? 0 : shape.size() == k.shape.size() ? 1 : 2);
      }
      entry["output_forms"] = forms;
      kernels.append(entry);
    }
    py::list steps;
    for (const cc::Step& s : program.steps) steps.append(py::make_tuple(s.is_kernel, s.index, s.release));
    py::dict result;
    result["kernels"] = kernels;
    result["steps"] = steps;
    result["slot"] = program.slot;
    result["num_slots"] = program.num_slots;
    result["in_place"] = program.in_place;
    result["removed_nodes"] = program.removed_nodes;
    result["fused_nodes"] = program.fused_nodes;
    result["source"] = program.kernels.empty() ? std::string() : cc::generate_source(graph, program);
    return result;
  });

  m.def("build_artifact", [](const std::string& source, const std::string& cache_dir) {
    cc::Artifact artifact;
    {
      py::gil_scoped_release release;  // other Python threads run while the compiler does
      artifact = cc::build_artifact(source, cache_dir);
    }
    return py::make_tuple(artifact.path, artifact.cache_hit, artifact.seconds);
  });
  m.def("compile_flags", &cc::compile_flags);
}

}  // namespace torchneuron::python
