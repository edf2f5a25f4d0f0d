#include "compiler/ir.h"

#include <sstream>
#include <stdexcept>

#include "compiler/codegen.h"

namespace torchneuron::compiler {

namespace {
struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypes[] = {
    {DType::kBool, "bool"},         {DType::kUInt8, "uint8"},       {DType::kInt8, "int8"},
    {DType::kInt32, "int32"},       {DType::kInt64, "int64"},       {DType::kFloat16, "float16"},
    {DType::kBFloat16, "bfloat16"}, {DType::kFloat32, "float32"},   {DType::kFloat64, "float64"},
};
}  // namespace

DType parse_dtype(const std::string& name) {
  for (const DTypeName& entry : kDTypes) {
    if (name == entry.name) return entry.dtype;
  }
  throw std::invalid_argument("neuron compiler: dtype " + name + " is not supported");
}

const char* dtype_name(DType dtype) {
  for (const DTypeName& entry : kDTypes) {
    if (entry.dtype == dtype) return entry.name;
  }
  return "?";
}

bool is_floating(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

int Graph::new_value(DType dtype, Shape shape, int producer) {
  Value value;
  value.id = static_cast<int>(values_.size());
  value.dtype = dtype;
  value.shape = std::move(shape);
  value.producer = producer;
  values_.push_back(std::move(value));
  return values_.back().id;
}

int Graph::add_input(DType dtype, Shape shape) {
  const int id = new_value(dtype, std::move(shape), -1);
  inputs_.push_back(id);
  return id;
}

int Graph::add_pointwise(const std::string& op, std::vector<Operand> operands, DType dtype, Shape shape, DType compute) {
  if (!supports_pointwise(op, static_cast<int>(operands.size()))) {
    throw std::invalid_argument("neuron compiler: no code template for pointwise op " + op + " with " +
                                std::to_string(operands.size()) + " operands");
  }
  for (const Operand& operand : operands) {
    if (operand.is_value() && operand.value >= static_cast<int>(values_.size())) {
      throw std::invalid_argument("neuron compiler: operand refers to an unknown value");
    }
  }
  Node node;
  node.kind = NodeKind::kPointwise;
  node.op = op;
  node.operands = std::move(operands);
  node.compute = compute;
  const int index = static_cast<int>(nodes_.size());
  node.outputs.push_back(new_value(dtype, std::move(shape), index));
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs[0];
}

int Graph::add_reduction(const std::string& op, int operand, std::vector<int> dims, bool keepdim, DType dtype,
                         DType compute) {
  if (op != "sum" && op != "mean" && op != "amax" && op != "amin") {
    throw std::invalid_argument("neuron compiler: no reduction " + op);
  }
  if (operand < 0 || operand >= static_cast<int>(values_.size())) {
    throw std::invalid_argument("neuron compiler: reduction operand refers to an unknown value");
  }
  const Shape input = values_[operand].shape;
  const int ndim = static_cast<int>(input.size());
  std::vector<bool> reduced(ndim, false);
  for (int dim : dims) {
    const int d = dim < 0 ? dim + ndim : dim;
    if (d < 0 || d >= ndim || reduced[d]) {
      throw std::invalid_argument("neuron compiler: reduction dim " + std::to_string(dim) + " is out of range or repeated for " +
                                  std::to_string(ndim) + " dims");
    }
    reduced[d] = true;
  }
  Node node;
  node.kind = NodeKind::kReduction;
  node.op = op;
  node.operands.push_back(Operand{operand, 0.0});
  node.compute = compute;
  node.keepdim = keepdim;
  Shape shape;
  for (int d = 0; d < ndim; ++d) {
    if (reduced[d]) node.reduce_dims.push_back(d);
    if (!reduced[d]) shape.push_back(input[d]);
    else if (keepdim) shape.push_back("1");
  }
  const int index = static_cast<int>(nodes_.size());
  node.outputs.push_back(new_value(dtype, std::move(shape), index));
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs[0];
}

std::vector<int> Graph::add_opaque(int external_id, const std::vector<int>& inputs, const std::vector<DType>& dtypes,
                                   const std::vector<Shape>& shapes) {
  Node node;
  node.kind = NodeKind::kOpaque;
  node.op = "opaque";
  node.external_id = external_id;
  for (int value : inputs) node.operands.push_back(Operand{value, 0.0});
  const int index = static_cast<int>(nodes_.size());
  for (size_t k = 0; k < dtypes.size(); ++k) node.outputs.push_back(new_value(dtypes[k], shapes[k], index));
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs;
}

void Graph::mark_output(int value) {
  values_.at(value).graph_output = true;
  outputs_.push_back(value);
}

std::string Graph::to_string() const {
  std::ostringstream out;
  auto shape_text = [](const Shape& shape) {
    std::string text = "[";
    for (size_t d = 0; d < shape.size(); ++d) text += (d ? "," : "") + shape[d];
    return text + "]";
  };
  if (round_intermediates_) out << "round_intermediates\n";
  for (int input : inputs_) out << "in v" << input << ":" << dtype_name(values_[input].dtype) << shape_text(values_[input].shape) << "\n";
  for (const Node& node : nodes_) {
    if (node.removed) continue;
    out << (node.kind == NodeKind::kOpaque ? "opaque#" + std::to_string(node.external_id) : node.op) << "(";
    for (size_t k = 0; k < node.operands.size(); ++k) {
      const Operand& o = node.operands[k];
      out << (k ? "," : "");
      if (o.is_value()) {
        out << "v" << o.value;
      } else {
        std::ostringstream literal;
        literal.precision(17);
        literal << o.literal;
        out << literal.str();
      }
    }
    if (node.kind == NodeKind::kReduction) {
      out << ")[";
      for (size_t k = 0; k < node.reduce_dims.size(); ++k) out << (k ? "," : "") << node.reduce_dims[k];
      out << (node.keepdim ? "]keep" : "]");
    } else {
      out << ")";
    }
    out << (node.kind == NodeKind::kOpaque ? " ->" : std::string("@") + dtype_name(node.compute) + " ->");
    for (int v : node.outputs) out << " v" << v << ":" << dtype_name(values_[v].dtype) << shape_text(values_[v].shape);
    out << "\n";
  }
  out << "out";
  for (int v : outputs_) out << " v" << v;
  return out.str();
}

}  // namespace torchneuron::compiler
