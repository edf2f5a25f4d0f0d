#include "compiler/codegen_common.h"

#include <sstream>
#include <string>
#include <vector>

namespace torchneuron::compiler::codegen_detail {
namespace {

// How an input is read in the inner loop. Rank-0 inputs are one value for the whole kernel;
// inputs that may broadcast along the innermost dimension (stride 0 there) are read through
// a flag the C++ compiler can unswitch on, so that both cases still vectorize.
// kInnerBroadcast: size 1 in the innermost dim where the kernel's is not, so read at one
// address along each run (a mask over outer dims), without a broadcast flag: a loop with more
// than 3 flags keeps its selects and does not vectorize.
enum class InputRead { kScalar, kInnerBroadcast, kMaybeBroadcast, kDense };

InputRead input_read(const Graph& graph, const Kernel& kernel, int value) {
  const Shape& shape = graph.values()[value].shape;
  if (shape.empty()) return InputRead::kScalar;
  if (shape.back() == "1" && !kernel.shape.empty() && kernel.shape.back() != "1") return InputRead::kInnerBroadcast;
  if (shape.size() < kernel.shape.size()) return InputRead::kMaybeBroadcast;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != kernel.shape[kernel.shape.size() - shape.size() + d]) return InputRead::kMaybeBroadcast;
  }
  return InputRead::kDense;
}

// The per-element body: loads, node formulas in order, stores. On the unit-stride path,
// operand k is read at j (dense), at 0 (scalar) or at j unless its flag b<k> says it is
// broadcast; on the strided path at j * s[k].
std::string element_body(const Graph& graph, const Kernel& kernel, bool unit_strides) {
  std::ostringstream body;
  const int outputs = static_cast<int>(kernel.outputs.size());
  auto index = [&](int operand) { return unit_strides ? std::string("j") : "j * s[" + std::to_string(operand) + "]"; };
  for (size_t k = 0; k < kernel.inputs.size(); ++k) {
    const int v = kernel.inputs[k];
    const int operand = outputs + static_cast<int>(k);
    const DType dtype = graph.values()[v].dtype;
    const std::string p = "p" + std::to_string(operand);
    std::string at = p + "[" + index(operand) + "]";
    if (unit_strides) {
      switch (input_read(graph, kernel, v)) {
        case InputRead::kScalar:
        case InputRead::kInnerBroadcast: at = p + "[0]"; break;
        case InputRead::kMaybeBroadcast:
          at = "(b" + std::to_string(operand) + " ? " + p + "[0] : " + p + "[j])";
          break;
        case InputRead::kDense: break;
      }
    }
    body << "        const " << compute_type(dtype) << " v" << v << " = " << load_expression(dtype, at) << ";\n";
  }
  for (int n : kernel.nodes) body << node_line(graph, graph.nodes()[n], "        ");
  for (int k = 0; k < outputs; ++k) {
    const int v = kernel.outputs[k];
    body << "        p" << k << "[" << index(k) << "] = " << store_expression(graph.values()[v].dtype, "v" + std::to_string(v))
         << ";\n";
  }
  return body.str();
}

}  // namespace

std::string kernel_source(const Graph& graph, const Kernel& kernel) {
  const int outputs = static_cast<int>(kernel.outputs.size());
  const int operands = outputs + static_cast<int>(kernel.inputs.size());
  std::ostringstream src;
  src << "extern \"C\" void " << kernel.symbol
      << "(char* const* data, const int64_t* strides, const int64_t* sizes, int ndim, int64_t begin, int64_t end) {\n";
  src << "  constexpr int kOperands = " << operands << ";\n";
  src << "  int64_t index[16] = {0};\n  int64_t offset[kOperands] = {0};\n";
  src << "  int64_t rest = begin;\n  for (int d = ndim - 1; d >= 0; --d) { index[d] = rest % sizes[d]; rest /= sizes[d]; }\n";
  src << "  for (int k = 0; k < kOperands; ++k) for (int d = 0; d < ndim; ++d) offset[k] += index[d] * strides[k * ndim + d];\n";
  src << "  const int last = ndim - 1;\n  int64_t remaining = end - begin;\n";
  src << "  while (remaining > 0) {\n";
  src << "    const int64_t n = ndim == 0 ? 1 : std::min(sizes[last] - index[last], remaining);\n";
  src << "    int64_t s[kOperands];\n";
  src << "    for (int k = 0; k < kOperands; ++k) s[k] = ndim == 0 ? 0 : strides[k * ndim + last];\n";
  // The unit-stride path takes broadcast inputs (stride 0) too; see element_body.
  src << "    const bool unit = true";
  for (int k = 0; k < operands; ++k) {
    const InputRead read = k < outputs ? InputRead::kDense : input_read(graph, kernel, kernel.inputs[k - outputs]);
    if (read == InputRead::kScalar) continue;
    if (read == InputRead::kInnerBroadcast) {
      src << " && (s[" << k << "] == 0 || n <= 1)";
      continue;
    }
    src << " && (s[" << k << "] == 1" << (read == InputRead::kMaybeBroadcast ? " || s[" + std::to_string(k) + "] == 0" : "")
        << ")";
  }
  src << ";\n";
  for (int k = outputs; k < operands; ++k) {
    if (input_read(graph, kernel, kernel.inputs[k - outputs]) == InputRead::kMaybeBroadcast) {
      src << "    const bool b" << k << " = s[" << k << "] == 0;\n";
    }
  }
  for (int k = 0; k < operands; ++k) {
    const int v = k < outputs ? kernel.outputs[k] : kernel.inputs[k - outputs];
    const char* type = storage_type(graph.values()[v].dtype);
    src << "    " << (k < outputs ? "" : "const ") << type << "* __restrict p" << k << " = reinterpret_cast<"
        << (k < outputs ? "" : "const ") << type << "*>(data[" << k << "]) + offset[" << k << "];\n";
  }
  std::vector<int> flags;
  for (int k = outputs; k < operands; ++k) {
    if (input_read(graph, kernel, kernel.inputs[k - outputs]) == InputRead::kMaybeBroadcast) flags.push_back(k);
  }
  // The pointers are restrict, but GCC does not trust restrict on pointers declared in a loop
  // body, and checks aliasing at run time instead: beyond 10 pairs of operands (two outputs and
  // five inputs), it gave up and ran the loop scalar. Elements depend on nothing across j: an
  // output overwrites only an input it reads at the same index.
  const std::string unit_loop =
      "#pragma omp simd\n      for (int64_t j = 0; j < n; ++j) {\n" + element_body(graph, kernel, true) + "      }\n";
  src << "    if (unit) {\n" << unswitch_broadcasts(unit_loop, flags, "j", "      ");
  src << "    } else {\n      for (int64_t j = 0; j < n; ++j) {\n" << element_body(graph, kernel, false) << "      }\n    }\n";
  src << "    remaining -= n;\n    if (remaining == 0 || ndim == 0) break;\n";
  src << "    for (int k = 0; k < kOperands; ++k) offset[k] += n * s[k];\n    index[last] += n;\n";
  src << "    for (int d = last; d > 0 && index[d] == sizes[d]; --d) {\n      index[d] = 0;\n      ++index[d - 1];\n";
  src << "      for (int k = 0; k < kOperands; ++k) offset[k] += strides[k * ndim + d - 1] - sizes[d] * strides[k * ndim + d];\n";
  src << "    }\n  }\n}\n";
  return src.str();
}

}  // namespace torchneuron::compiler::codegen_detail
