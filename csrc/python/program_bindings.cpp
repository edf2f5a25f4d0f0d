// torchneuron._C._compiler.NativeProgram: builds a compiled program's native executor from the
// Python lowering (literal arguments are converted once, by each op's schema) and runs it. The
// only translation unit that uses torch's Python bindings (tensors in and out of Python).
#include <ATen/ScalarOps.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "aten/compiled/compiled_program.h"

namespace py = pybind11;
namespace ta = torchneuron::aten;

namespace torchneuron::python {

namespace {

// Encoded arguments (see torchneuron/compiler/native_program.py): ("value", id), ("number", id) (a
// size where the schema takes a tensor), ("default",), ("literal", object) or
// ("list", [("value", id) or object, ...]).
std::string tag_of(const py::handle& encoded) { return py::cast<std::string>(encoded[py::int_(0)]); }

ta::ListArgument list_argument(int position, const c10::Argument& argument, const py::list& elements) {
  c10::TypePtr type = argument.type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  const auto list_type = type->cast<c10::ListType>();
  TORCH_CHECK(list_type, "argument '", argument.name(), "' of type ", argument.type()->str(), " cannot hold graph values");
  const c10::TypePtr element_type = list_type->getElementType();
  ta::ListArgument list;
  list.position = position;
  if (element_type->kind() == c10::TypeKind::TensorType) {
    list.kind = ta::ListArgument::Kind::kTensors;
  } else if (element_type->kind() == c10::TypeKind::IntType) {
    list.kind = ta::ListArgument::Kind::kInts;
  } else if (auto optional = element_type->cast<c10::OptionalType>();
             optional && optional->getElementType()->kind() == c10::TypeKind::TensorType) {
    list.kind = ta::ListArgument::Kind::kOptionalTensors;
  } else {
    TORCH_CHECK(false, "argument '", argument.name(), "' of type ", argument.type()->str(), " cannot hold graph values");
  }
  for (const py::handle element : elements) {
    ta::ListElement e;
    if (py::isinstance<py::tuple>(element) && tag_of(element) == "value") {
      e.value = py::cast<int>(element[py::int_(1)]);
    } else {
      e.constant = torch::jit::toIValue(element, element_type);
    }
    list.elements.push_back(std::move(e));
  }
  return list;
}

// A literal argument converted by its schema type. A Python number where the schema takes a
// Tensor (aten.div.Tensor(x, 2) after a decomposition) becomes a wrapped-number tensor, as
// Python's argument parser makes it: it then takes part in type promotion as a scalar.
c10::IValue literal_argument(const py::handle& object, const c10::Argument& argument) {
  c10::TypePtr type = argument.type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  const bool number = py::isinstance<py::bool_>(object) || py::isinstance<py::int_>(object) ||
                      py::isinstance<py::float_>(object);
  if (number && type->kind() == c10::TypeKind::TensorType) {
    const c10::Scalar scalar = py::isinstance<py::bool_>(object)  ? c10::Scalar(py::cast<bool>(object))
                               : py::isinstance<py::int_>(object) ? c10::Scalar(py::cast<int64_t>(object))
                                                                  : c10::Scalar(py::cast<double>(object));
    at::Tensor tensor = c10::scalar_to_tensor(scalar);
    tensor.unsafeGetTensorImpl()->set_wrapped_number(true);
    return tensor;
  }
  return torch::jit::toIValue(object, argument.type(), argument.N());
}

c10::IValue input_value(const py::handle& item) {
  if (THPVariable_Check(item.ptr())) return THPVariable_Unpack(item.ptr());
  if (item.is_none()) return {};
  if (py::isinstance<py::bool_>(item)) return py::cast<bool>(item);
  if (py::isinstance<py::int_>(item)) return py::cast<int64_t>(item);
  if (py::isinstance<py::float_>(item)) return py::cast<double>(item);
  TORCH_CHECK(false, "compiled program: unsupported input of type ", Py_TYPE(item.ptr())->tp_name);
}

}  // namespace

void register_program(py::module_& compiler) {
  compiler.def("fused_launches", [] {
    const ta::FusedLaunches counts = ta::fused_launches();
    return py::make_tuple(counts.prologues, counts.epilogues, counts.foreach_in_place);
  });
  compiler.def("reset_fused_launches", &ta::reset_fused_launches);
  py::class_<ta::NativeProgram>(compiler, "NativeProgram")
      .def(py::init<int, int, std::vector<int>>(), py::arg("num_values"), py::arg("num_buffer_slots"),
           py::arg("input_values"))
      .def("add_op", [](ta::NativeProgram& program, const std::string& name, const std::string& overload,
                        const py::list& encoded, std::vector<int> results, bool fold, std::string description) {
        const c10::FunctionSchema& schema = program.schema_of(name, overload);
        const auto& arguments = schema.arguments();
        TORCH_CHECK(encoded.size() == arguments.size(), description, ": ", encoded.size(), " arguments for ", schema);
        TORCH_CHECK(results.size() == schema.returns().size(), description, ": ", results.size(), " results for ", schema);
        std::vector<c10::IValue> stack;
        std::vector<ta::ValueArgument> value_arguments;
        std::vector<ta::ListArgument> list_arguments;
        for (size_t i = 0; i < arguments.size(); ++i) {
          const py::handle item = encoded[i];
          const std::string tag = tag_of(item);
          const int position = static_cast<int>(i);
          if (tag == "value" || tag == "number") {
            value_arguments.push_back({position, py::cast<int>(item[py::int_(1)]), tag == "number"});
            stack.emplace_back();
          } else if (tag == "default") {
            TORCH_CHECK(arguments[i].default_value(), description, ": argument '", arguments[i].name(), "' has no default");
            stack.push_back(*arguments[i].default_value());
          } else if (tag == "literal") {
            stack.push_back(literal_argument(item[py::int_(1)], arguments[i]));
          } else if (tag == "list") {
            list_arguments.push_back(list_argument(position, arguments[i], item[py::int_(1)]));
            stack.emplace_back();
          } else {
            TORCH_CHECK(false, description, ": unknown argument encoding '", tag, "'");
          }
        }
        program.add_op(name, overload, std::move(stack), std::move(value_arguments), std::move(list_arguments),
                       std::move(results), fold, std::move(description));
      })
      .def("restride_results", &ta::NativeProgram::restride_results)
      .def("add_kernel", [](ta::NativeProgram& program, uintptr_t entry, std::vector<int> inputs, const py::list& outputs,
                            std::optional<std::vector<int64_t>> static_shape, std::vector<int64_t> reduce_dims) {
        // outputs: (value, dtype, layout or None, buffer slot, overwritten value, form), form:
        // 0 the kernel's shape, 1 reduced with keepdim, 2 reduced without
        std::vector<ta::KernelOutput> parsed;
        for (const py::handle item : outputs) {
          ta::KernelOutput out;
          out.value = py::cast<int>(item[py::int_(0)]);
          out.dtype = py::cast<at::ScalarType>(item[py::int_(1)]);
          out.layout = py::cast<std::optional<std::pair<std::vector<int64_t>, std::vector<int64_t>>>>(item[py::int_(2)]);
          out.buffer_slot = py::cast<int>(item[py::int_(3)]);
          out.overwrites = py::cast<int>(item[py::int_(4)]);
          const int form = py::cast<int>(item[py::int_(5)]);
          TORCH_CHECK(form >= 0 && form <= 2, "compiled program: bad kernel output form ", form);
          out.form = static_cast<ta::KernelOutput::Form>(form);
          parsed.push_back(std::move(out));
        }
        program.add_kernel(entry, std::move(inputs), std::move(parsed), std::move(static_shape), std::move(reduce_dims));
      })
      .def("add_list_item", &ta::NativeProgram::add_list_item)
      .def("add_pack", &ta::NativeProgram::add_pack)
      .def("add_foreach_kernel", &ta::NativeProgram::add_foreach_kernel)
      .def("fuse_product_epilogue", &ta::NativeProgram::fuse_product_epilogue)
      .def("fuse_product_prologue", &ta::NativeProgram::fuse_product_prologue)
      // Operands: ("value", id) or an int.
      .def("add_int_arithmetic", [](ta::NativeProgram& program, const std::string& op, const py::tuple& operands,
                                    int result) {
        TORCH_CHECK(op.size() == 1 && operands.size() <= 2, "compiled program: bad integer operation '", op, "'");
        ta::ListElement parsed[2];
        for (size_t i = 0; i < operands.size(); ++i) {
          const py::handle item = operands[i];
          if (py::isinstance<py::tuple>(item)) {
            parsed[i].value = py::cast<int>(item[py::int_(1)]);
          } else {
            parsed[i].constant = py::cast<int64_t>(item);
          }
        }
        program.add_int_arithmetic(op[0], std::move(parsed[0]), std::move(parsed[1]), result);
      })
      .def("release_after_last_step", &ta::NativeProgram::release_after_last_step)
      .def("set_constant", [](ta::NativeProgram& program, int value, const py::handle& tensor) {
        TORCH_CHECK(THPVariable_Check(tensor.ptr()), "compiled program: constants must be tensors");
        program.set_constant(value, THPVariable_Unpack(tensor.ptr()));
      })
      .def("set_outputs", &ta::NativeProgram::set_outputs)
      // Runs the program on `inputs`, a list that is emptied first (AOTAutograd's boxed
      // convention), so that each input is freed after its last use.
      .def("run", [](ta::NativeProgram& program, const py::list& inputs) {
        std::vector<c10::IValue> values;
        values.reserve(inputs.size());
        for (const py::handle item : inputs) values.push_back(input_value(item));
        PyList_SetSlice(inputs.ptr(), 0, PY_SSIZE_T_MAX, nullptr);
        std::vector<c10::IValue> outputs;
        {
          py::gil_scoped_release release;
          outputs = program.run(std::move(values));
        }
        py::tuple result(outputs.size());
        for (size_t i = 0; i < outputs.size(); ++i) result[i] = torch::jit::toPyObject(std::move(outputs[i]));
        return result;
      });
}

}  // namespace torchneuron::python
