#include "compiler/codegen_common.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace torchneuron::compiler::codegen_detail {
namespace {

constexpr int kRowBlock = 8;  // rows a column kernel's float sums add before a double fold

}  // namespace

// A column kernel (see Kernel): [begin, end) counts kept elements ("columns"); one pass over
// every folded index accumulates the block's columns side by side, so the inner loop runs
// along the innermost kept dim (contiguous, vectorized) and the accumulators live in a
// block-long array. With kept dims on both sides of folded ones (a sum over a middle dim), the
// block is cut into runs along the innermost kept dim.
std::string column_kernel_source(const Graph& graph, const Kernel& kernel) {
  const auto& values = graph.values();
  const auto& nodes = graph.nodes();
  const int outputs = static_cast<int>(kernel.outputs.size());
  const int operands = outputs + static_cast<int>(kernel.inputs.size());
  std::map<int, int> made_by;
  for (int n : kernel.nodes) made_by[nodes[n].outputs[0]] = n;
  auto operand_of = [&](int value) {
    for (int k = 0; k < outputs; ++k) if (kernel.outputs[k] == value) return k;
    for (size_t k = 0; k < kernel.inputs.size(); ++k) if (kernel.inputs[k] == value) return outputs + static_cast<int>(k);
    return -1;
  };
  // Full values are computed in the pass over the folded indices, kept-shaped ones after it.
  // A kept-shaped value that no reduction feeds but that a per-element node reads (a mask of a
  // broadcast input, say) is computed in the pass too, and again after it.
  std::set<int> reduced;  // values a reduction of this kernel feeds: known only after the pass
  for (int n : kernel.nodes) {
    const Node& node = nodes[n];
    bool fed = node.kind == NodeKind::kReduction;
    for (const Operand& o : node.operands) fed = fed || (o.is_value() && reduced.count(o.value) > 0);
    if (fed) reduced.insert(node.outputs[0]);
  }
  std::set<int> per_element, read_per_element;
  for (auto it = kernel.nodes.rbegin(); it != kernel.nodes.rend(); ++it) {
    const Node& node = nodes[*it];
    const int out = node.outputs[0];
    if (node.kind == NodeKind::kReduction || is_full(graph, kernel, out) ||
        (!reduced.count(out) && read_per_element.count(out))) {
      per_element.insert(*it);
      for (const Operand& o : node.operands) {
        if (o.is_value()) read_per_element.insert(o.value);
      }
    }
  }
  std::vector<int> full_nodes, reductions, column_nodes;
  std::set<int> full_inputs, column_inputs;
  for (int n : kernel.nodes) {
    const Node& node = nodes[n];
    const bool reduction = node.kind == NodeKind::kReduction, kept = !reduction && !is_full(graph, kernel, node.outputs[0]);
    if (reduction) reductions.push_back(n);
    if (!reduction && per_element.count(n)) full_nodes.push_back(n);
    if (kept) column_nodes.push_back(n);
    for (const Operand& o : node.operands) {
      if (!o.is_value() || made_by.count(o.value)) continue;
      if (per_element.count(n)) full_inputs.insert(o.value);
      if (kept) column_inputs.insert(o.value);
    }
  }
  // Per-element inputs dense along the kept dims are read at c; others through a broadcast flag.
  std::set<int> dense;
  for (int v : full_inputs) {
    const Shape& shape = values[v].shape;
    const size_t skip = kernel.shape.size() - shape.size();
    bool all_full = true;
    for (size_t d = 0; d < kernel.shape.size(); ++d) {
      if (std::find(kernel.reduce_dims.begin(), kernel.reduce_dims.end(), static_cast<int>(d)) != kernel.reduce_dims.end()) continue;
      all_full = all_full && d >= skip && shape[d - skip] == kernel.shape[d];
    }
    if (all_full) dense.insert(v);
  }
  std::ostringstream src;
  src << "extern \"C\" void " << kernel.symbol
      << "(char* const* data, const int64_t* strides, const int64_t* sizes, int ndim, int inner_ndim, int64_t begin, "
         "int64_t end) {\n";
  src << "  constexpr int kOperands = " << operands << ";\n";
  src << "  const int outer_ndim = ndim - inner_ndim;\n";
  src << "  const int64_t count = end - begin;\n  if (count <= 0) return;\n";
  src << "  int64_t folded = 1;\n  for (int d = outer_ndim; d < ndim; ++d) folded *= sizes[d];\n";
  // Offsets of kept element e and of folded index r, per operand.
  src << "  auto kept_offset = [&](int k, int64_t e) {\n    int64_t off = 0;\n"
         "    for (int d = outer_ndim - 1; d >= 0; --d) { off += (e % sizes[d]) * strides[k * ndim + d]; e /= sizes[d]; }\n"
         "    return off;\n  };\n";
  // Folded offsets advance as an odometer, and the first run's kept offsets are computed once:
  // dividing per row and operand cost more than a narrow kernel's arithmetic.
  src << "  int64_t folded_index[16] = {0};\n  int64_t folded_at[kOperands] = {0};\n";
  src << "  auto next_folded = [&] {\n"
         "    for (int d = ndim - 1; d >= outer_ndim; --d) {\n"
         "      for (int k = 0; k < kOperands; ++k) folded_at[k] += strides[k * ndim + d];\n"
         "      if (++folded_index[d] < sizes[d]) return;\n"
         "      for (int k = 0; k < kOperands; ++k) folded_at[k] -= sizes[d] * strides[k * ndim + d];\n"
         "      folded_index[d] = 0;\n    }\n  };\n";
  src << "  int64_t s[kOperands];\n  for (int k = 0; k < kOperands; ++k) s[k] = outer_ndim == 0 ? 0 : strides[k * ndim + outer_ndim - 1];\n";
  src << "  const bool unit = true";
  for (int k = 0; k < operands; ++k) {
    const int v = k < outputs ? kernel.outputs[k] : kernel.inputs[k - outputs];
    if (k < outputs ? is_full(graph, kernel, v) : dense.count(v) > 0) {
      src << " && (s[" << k << "] == 1 || count <= 1)";
    } else if (k >= outputs && full_inputs.count(v)) {
      src << " && (s[" << k << "] == 0 || s[" << k << "] == 1)";
    }
  }
  src << ";\n";
  for (int v : full_inputs) {
    if (!dense.count(v)) src << "  const bool b" << operand_of(v) << " = s[" << operand_of(v) << "] == 0;\n";
  }
  auto nan_flag = [&](int n) { return keeps_nan_flag(nodes[n]); };
  // Float sums add each block of kRowBlock rows in float (vector registers), then fold that into
  // a double total, as eager column sums accumulate in double: summed in float alone, a column
  // drifted from CPU PyTorch by several ulps; all in double, these kernels ran 20-40% slower.
  std::set<int> blocked;
  for (int n : reductions) {
    const std::string type = compute_type(nodes[n].compute);
    src << "  std::vector<" << type << "> a" << n << "(static_cast<size_t>(count), " << accumulator_init(nodes[n].op, type) << ");\n";
    if (nan_flag(n)) src << "  std::vector<int> nan" << n << "(static_cast<size_t>(count), 0);\n";
    if (type == "float" && (nodes[n].op == "sum" || nodes[n].op == "mean")) {
      blocked.insert(n);
      src << "  std::vector<double> t" << n << "(static_cast<size_t>(count), 0.0);\n";
    }
  }
  auto body = [&](bool unit) {
    std::ostringstream b;
    for (int v : full_inputs) {
      const int k = operand_of(v);
      const std::string p = "p" + std::to_string(k);
      std::string at = p + "[kept_offset(" + std::to_string(k) + ", begin + c)]";
      if (unit) at = dense.count(v) ? p + "[c]" : "(b" + std::to_string(k) + " ? " + p + "[0] : " + p + "[c])";
      b << "        const " << compute_type(values[v].dtype) << " v" << v << " = " << load_expression(values[v].dtype, at) << ";\n";
    }
    for (int n : full_nodes) b << node_line(graph, nodes[n], "        ");
    const std::string at_block = unit ? "[c0 + c]" : "[c]";  // the column's place in the block
    for (int n : reductions) {
      const std::string acc = "a" + std::to_string(n) + at_block;
      const std::string value = std::string(compute_type(nodes[n].compute)) + "(v" + std::to_string(nodes[n].operands[0].value) + ")";
      b << "        " << acc << " = " << accumulate(nodes[n].op, acc, value) << ";\n";
      if (nan_flag(n)) b << "        nan" << n << at_block << " |= " << value << " != " << value << ";\n";
    }
    for (int v : kernel.outputs) {
      if (!is_full(graph, kernel, v)) continue;
      const int k = operand_of(v);
      b << "        p" << k << "[" << (unit ? std::string("c") : "kept_offset(" + std::to_string(k) + ", begin + c)") << "] = "
        << store_expression(values[v].dtype, "v" + std::to_string(v)) << ";\n";
    }
    return b.str();
  };
  // Runs of the block along the innermost kept dim: [c0, c0 + n) of the block is one.
  src << "  const int64_t run = outer_ndim == 0 ? count : sizes[outer_ndim - 1];\n";
  src << "  int64_t first_run_at[kOperands];\n  for (int k = 0; k < kOperands; ++k) first_run_at[k] = kept_offset(k, begin);\n";
  src << "  for (int64_t r = 0; r < folded; ++r, next_folded()) {\n";
  src << "    for (int64_t c0 = 0; c0 < count;) {\n";
  src << "      const int64_t n = unit ? std::min(count - c0, run - (begin + c0) % run) : count;\n";
  for (int k = 0; k < operands; ++k) {
    const int v = k < outputs ? kernel.outputs[k] : kernel.inputs[k - outputs];
    const char* type = storage_type(values[v].dtype);
    src << "      " << (k < outputs ? "" : "const ") << type << "* __restrict p" << k << " = reinterpret_cast<"
        << (k < outputs ? "" : "const ") << type << "*>(data[" << k << "]) + folded_at[" << k << "]"
        << " + (!unit ? 0 : c0 == 0 ? first_run_at[" << k << "] : kept_offset(" << k << ", begin + c0));\n";
  }
  std::vector<int> flags;
  for (int v : full_inputs) {
    if (!dense.count(v)) flags.push_back(operand_of(v));
  }
  const std::string unit_loop = "#pragma omp simd\n        for (int64_t c = 0; c < n; ++c) {\n" + body(true) + "        }\n";
  src << "      if (unit) {\n" << unswitch_broadcasts(unit_loop, flags, "c", "        ");
  src << "      } else {\n        for (int64_t c = 0; c < count; ++c) {\n" << body(false) << "        }\n      }\n";
  src << "      c0 += n;\n    }\n";
  if (!blocked.empty()) {
    src << "    if ((r + 1) % " << kRowBlock << " == 0 || r + 1 == folded) {\n      for (int64_t c = 0; c < count; ++c) {\n";
    for (int n : blocked) src << "        t" << n << "[c] += double(a" << n << "[c]);\n        a" << n << "[c] = 0.0f;\n";
    src << "      }\n    }\n";
  }
  src << "  }\n";
  // The column nodes, then the reduced outputs, one kept element at a time.
  src << "  for (int64_t c = 0; c < count; ++c) {\n";
  for (int v : column_inputs) {
    const int k = operand_of(v);
    src << "    const " << compute_type(values[v].dtype) << " v" << v << " = "
        << load_expression(values[v].dtype, "reinterpret_cast<const " + std::string(storage_type(values[v].dtype)) + "*>(data[" +
                                                std::to_string(k) + "])[kept_offset(" + std::to_string(k) + ", begin + c)]")
        << ";\n";
  }
  for (int n : reductions) {
    const Node& node = nodes[n];
    const std::string type = blocked.count(n) ? "double" : std::string(compute_type(node.compute));
    std::string result = (blocked.count(n) ? "t" : "a") + std::to_string(n) + "[c]";
    if (node.op == "mean") result = result + " / " + type + "(folded)";
    if (nan_flag(n)) result = "nan" + std::to_string(n) + "[c] ? std::numeric_limits<" + type + ">::quiet_NaN() : " + result;
    const Value& out = values[node.outputs[0]];
    src << "    const " << compute_type(out.dtype) << " v" << out.id << " = "
        << kept(graph, node, std::string(compute_type(out.dtype)) + "(" + result + ")") << ";\n";
  }
  for (int n : column_nodes) src << node_line(graph, nodes[n], "    ");
  for (int k = 0; k < outputs; ++k) {
    const int v = kernel.outputs[k];
    if (is_full(graph, kernel, v)) continue;
    const char* type = storage_type(values[v].dtype);
    src << "    reinterpret_cast<" << type << "*>(data[" << k << "])[kept_offset(" << k << ", begin + c)] = "
        << store_expression(values[v].dtype, "v" + std::to_string(v)) << ";\n";
  }
  src << "  }\n}\n";
  return src.str();
}

}  // namespace torchneuron::compiler::codegen_detail
