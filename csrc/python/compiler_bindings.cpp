// torchneuron._C._compiler: the compiler's C++ API for the Python lowering (building the IR,
// planning, code generation, artifacts). Kernels launch through torch.ops.torchneuron.launch_fused.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>

#include "compiler/artifact.h"
#include "compiler/codegen.h"
#include "compiler/ir.h"
#include "compiler/passes.h"
#include "compiler/tile_program.h"

namespace py = pybind11;
namespace cc = torchneuron::compiler;

namespace torchneuron::python {

void register_program(py::module_& compiler);  // program_bindings.cpp

namespace {

// An access as the NKI tracer writes it: (buffer, offset, sizes, strides, lower, upper).
cc::TileAccess to_access(const py::handle& item) {
  const auto t = item.cast<py::tuple>();
  return cc::TileAccess{t[0].cast<int>(), t[1].cast<std::string>(), t[2].cast<std::vector<int64_t>>(),
                        t[3].cast<std::vector<int64_t>>(), t[4].cast<std::vector<std::string>>(),
                        t[5].cast<std::vector<std::string>>()};
}

cc::TileOpKind to_kind(const std::string& kind) {
  static const std::map<std::string, cc::TileOpKind> kinds{
      {"pointwise", cc::TileOpKind::kPointwise}, {"reduce", cc::TileOpKind::kReduce},
      {"matmul", cc::TileOpKind::kMatmul},       {"scan", cc::TileOpKind::kScan},
      {"max8", cc::TileOpKind::kMax8},           {"find_index8", cc::TileOpKind::kFindIndex8},
      {"print", cc::TileOpKind::kPrint}};
  const auto it = kinds.find(kind);
  if (it == kinds.end()) throw py::value_error("tile program: unknown op kind " + kind);
  return it->second;
}

void register_tile_program(py::module_& m) {
  py::class_<cc::TileProgram>(m, "TileProgram")
      .def(py::init<>())
      .def("add_buffer", [](cc::TileProgram& p, const std::string& name, const std::string& space, const std::string& dtype,
                            int64_t elements, int argument) {
        const cc::MemorySpace s = space == "hbm" ? cc::MemorySpace::kHbm : space == "psum" ? cc::MemorySpace::kPsum
                                                                                            : cc::MemorySpace::kSbuf;
        return p.add_buffer(name, s, cc::parse_dtype(dtype), elements, argument);
      })
      .def("begin_loop", &cc::TileProgram::begin_loop)
      .def("end_loop", &cc::TileProgram::end_loop)
      .def("set_grid", &cc::TileProgram::set_grid)
      .def("set_external_scratch", &cc::TileProgram::set_external_scratch)
      .def("cut", &cc::TileProgram::cut)
      .def_property_readonly("segments", &cc::TileProgram::segments)
      .def("scratch_offset", [](const cc::TileProgram& p, int buffer) {
        return p.buffers().at(static_cast<size_t>(buffer)).scratch_offset;
      })
      // op: kind, destination (an access, or None), sources, expression [(op, arguments, source,
      // literal, dim, text)], and the optional reduce_op, reduce_dims, scale, accumulate, initial, label.
      .def("add", [](cc::TileProgram& p, const py::dict& op) {
        cc::TileOp parsed;
        parsed.kind = to_kind(op["kind"].cast<std::string>());
        if (!op["destination"].is_none()) parsed.destination = to_access(op["destination"]);
        for (const py::handle s : op["sources"].cast<py::list>()) parsed.sources.push_back(to_access(s));
        for (const py::handle n : op["expression"].cast<py::list>()) {
          const auto t = n.cast<py::tuple>();
          parsed.expression.push_back(cc::ExpressionNode{t[0].cast<std::string>(), t[1].cast<std::vector<int>>(),
                                                         t[2].cast<int>(), t[3].cast<double>(), t[4].cast<int>(),
                                                         t[5].cast<std::string>()});
        }
        if (op.contains("reduce_op")) parsed.reduce_op = op["reduce_op"].cast<std::string>();
        if (op.contains("reduce_dims")) parsed.reduce_dims = op["reduce_dims"].cast<std::vector<int>>();
        if (op.contains("scale")) parsed.scale = op["scale"].cast<double>();
        if (op.contains("accumulate")) parsed.accumulate = op["accumulate"].cast<bool>();
        if (op.contains("initial")) parsed.initial = op["initial"].cast<double>();
        if (op.contains("label")) parsed.label = op["label"].cast<std::string>();
        try {
          p.add(std::move(parsed));
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      })
      .def_property_readonly("scratch_floats", &cc::TileProgram::scratch_floats)
      .def_property_readonly("programs", &cc::TileProgram::programs)
      .def("source", &cc::generate_tile_source)
      .def("__str__", &cc::TileProgram::to_string);
}

}  // namespace

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
  register_tile_program(m);
}

}  // namespace torchneuron::python
