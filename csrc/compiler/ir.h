// The graph IR of the neuron compiler: typed values with symbolic shapes, pointwise nodes the
// compiler can generate code for, and opaque nodes it runs as eager calls. Built node by node
// through a small API (Python lowers FX graphs into it); every pass rewrites or reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torchneuron::compiler {

// Storage dtypes the generated code handles.
enum class DType : uint8_t { kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64 };
DType parse_dtype(const std::string& name);  // "float32", "bfloat16", ... (throws on others)
const char* dtype_name(DType dtype);
bool is_floating(DType dtype);

// A dimension is a constant ("4") or a symbol ("s0"); two values with equal dim strings have
// equal sizes at run time.
using Shape = std::vector<std::string>;

struct Value {
  int id = -1;
  DType dtype = DType::kFloat32;
  Shape shape;
  int producer = -1;         // node index, or -1 for a graph input
  bool graph_output = false;
};

// An operand: a value or a scalar literal.
struct Operand {
  int value = -1;  // -1: literal
  double literal = 0.0;
  bool is_value() const { return value >= 0; }
};

// A reduction folds dims of its one operand (op "sum", "mean", "amax" or "amin"), accumulating
// in `compute`; its output keeps the reduced dims as size 1 (keepdim) or drops them.
enum class NodeKind : uint8_t { kPointwise, kReduction, kOpaque };

struct Node {
  NodeKind kind = NodeKind::kPointwise;
  std::string op;                // pointwise: an op of the code generator's table
  std::vector<Operand> operands; // pointwise: in the op's order; opaque: the values it reads
  std::vector<int> outputs;      // value ids (pointwise: exactly one)
  DType compute = DType::kFloat32;  // pointwise: the dtype operands are promoted to
  std::vector<int> reduce_dims;  // reduction: the operand's dims it folds, ascending
  bool keepdim = false;          // reduction: whether the output keeps them as size 1
  int external_id = -1;          // the caller's handle for an opaque node (its FX node index)
  bool removed = false;
};

class Graph {
 public:
  int add_input(DType dtype, Shape shape);
  // A pointwise node computing in `compute` (the operands' promoted dtype) and producing `dtype`;
  // returns its output value id. Throws for an op the code generator lacks.
  int add_pointwise(const std::string& op, std::vector<Operand> operands, DType dtype, Shape shape, DType compute);
  // A reduction of value `operand` over `dims` (any order, negative counts from the end);
  // returns its output value id. Throws for an unknown op or a dim out of range.
  int add_reduction(const std::string& op, int operand, std::vector<int> dims, bool keepdim, DType dtype, DType compute);
  // An opaque node reading `inputs`; its outputs are new values (returned).
  std::vector<int> add_opaque(int external_id, const std::vector<int>& inputs, const std::vector<DType>& dtypes,
                              const std::vector<Shape>& shapes);
  void mark_output(int value);

  // Whether each half-precision value is rounded to its dtype where it is computed, as eager
  // mode stores every op's result (Inductor's emulate_precision_casts). Off: a kernel keeps its
  // intermediates in float and rounds only what it stores and explicit casts, as Inductor does.
  bool round_intermediates() const { return round_intermediates_; }
  void set_round_intermediates(bool round) { round_intermediates_ = round; }

  const std::vector<Value>& values() const { return values_; }
  std::vector<Value>& values() { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  std::vector<int>& outputs() { return outputs_; }

  // A stable text form (for cache keys and debugging).
  std::string to_string() const;

 private:
  int new_value(DType dtype, Shape shape, int producer);
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  bool round_intermediates_ = false;
};

}  // namespace torchneuron::compiler
