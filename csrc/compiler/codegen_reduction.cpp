#include "compiler/codegen_common.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace torchneuron::compiler::codegen_detail {

bool is_full(const Graph& graph, const Kernel& kernel, int value) {
  return graph.values()[value].shape == kernel.shape && graph.values()[value].producer >= 0 &&
         graph.nodes()[graph.values()[value].producer].kind != NodeKind::kReduction;
}

// A floating max or min keeps a NaN flag beside it: OpenMP's max/min reductions vectorize to
// vmaxps/vminps, which drop NaNs.
bool keeps_nan_flag(const Node& node) {
  return (node.op == "amax" || node.op == "amin") && is_floating(node.compute);
}

std::string accumulator_init(const std::string& op, const std::string& type) {
  if (op == "sum" || op == "mean") return type + "(0)";
  return std::string(op == "amax" ? "tn_lowest(" : "tn_highest(") + type + "(0))";
}

std::string accumulate(const std::string& op, const std::string& a, const std::string& b) {
  if (op == "sum" || op == "mean") return a + " + " + b;
  // NaNs are tracked apart (see reduction_kernel_source): this form vectorizes to vmaxps.
  return "(" + b + (op == "amax" ? " > " : " < ") + a + " ? " + b + " : " + a + ")";
}

namespace {

// A reduction kernel's plan: which loop over the row computes each full node, when each row
// value becomes known, and which operands are read per element ("full") or once per row.
struct RowPlan {
  std::map<int, int> made_by;  // value made in the kernel -> node index
  std::map<int, int> loop;     // full value -> the first loop over the row that can compute it
  std::map<int, int> reduction_loop;  // reduction node -> the loop that accumulates it
  std::map<int, int> ready;    // row value -> loops finished before it is known
  int final_loop = 0;          // the last loop, which also stores the full outputs
};

RowPlan plan_rows(const Graph& graph, const Kernel& kernel) {
  RowPlan plan;
  for (int n : kernel.nodes) plan.made_by[graph.nodes()[n].outputs[0]] = n;
  // The first loop in which a full node may read `value`.
  auto available = [&](int value) {
    if (!plan.made_by.count(value)) return 0;
    const auto full = plan.loop.find(value);
    return full != plan.loop.end() ? full->second : plan.ready.at(value);
  };
  for (int n : kernel.nodes) {
    const Node& node = graph.nodes()[n];
    const int out = node.outputs[0];
    int level = 0;
    for (const Operand& o : node.operands) {
      if (o.is_value()) level = std::max(level, available(o.value));
    }
    if (node.kind == NodeKind::kReduction) {
      plan.reduction_loop[n] = level;
      plan.ready[out] = level + 1;
      plan.final_loop = std::max(plan.final_loop, level);
    } else if (is_full(graph, kernel, out)) {
      plan.loop[out] = level;
    } else {
      plan.ready[out] = level;  // a row node reads row values only
    }
  }
  for (int out : kernel.outputs) {
    if (plan.loop.count(out)) plan.final_loop = std::max(plan.final_loop, plan.loop.at(out));
  }
  return plan;
}

// Ops worth computing once per element and keeping rather than recomputing in a later loop.
bool costly(const std::string& op) {
  static const std::set<std::string> ops{"exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos",
                                         "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "erf", "erfc",
                                         "sigmoid", "silu", "gelu", "gelu_tanh", "pow", "silu_backward", "gelu_backward"};
  return ops.count(op) > 0;
}

}  // namespace

std::string reduction_kernel_source(const Graph& graph, const Kernel& kernel) {
  const auto& values = graph.values();
  const auto& nodes = graph.nodes();
  const RowPlan plan = plan_rows(graph, kernel);
  const int outputs = static_cast<int>(kernel.outputs.size());
  const int operands = outputs + static_cast<int>(kernel.inputs.size());
  auto operand_of = [&](int value) {
    for (int k = 0; k < outputs; ++k) if (kernel.outputs[k] == value) return k;
    for (size_t k = 0; k < kernel.inputs.size(); ++k) if (kernel.inputs[k] == value) return outputs + static_cast<int>(k);
    return -1;
  };
  // Inputs read per element (by full nodes or reductions) and once per row (by row nodes).
  std::set<int> full_inputs, row_inputs;
  for (int n : kernel.nodes) {
    const Node& node = nodes[n];
    const bool per_element = node.kind == NodeKind::kReduction || is_full(graph, kernel, node.outputs[0]);
    for (const Operand& o : node.operands) {
      if (o.is_value() && !plan.made_by.count(o.value)) (per_element ? full_inputs : row_inputs).insert(o.value);
    }
  }
  std::ostringstream src;
  src << "extern \"C\" void " << kernel.symbol
      << "(char* const* data, const int64_t* strides, const int64_t* sizes, int ndim, int inner_ndim, int64_t begin, "
         "int64_t end) {\n";
  src << "  constexpr int kOperands = " << operands << ";\n";
  src << "  const int outer_ndim = ndim - inner_ndim;\n";
  src << "  int64_t inner_n = 1;\n  for (int d = outer_ndim; d < ndim; ++d) inner_n *= sizes[d];\n";
  src << "  int64_t index[16] = {0};\n  int64_t offset[kOperands] = {0};\n";
  src << "  int64_t rest = begin;\n  for (int d = outer_ndim - 1; d >= 0; --d) { index[d] = rest % sizes[d]; rest /= sizes[d]; }\n";
  src << "  for (int k = 0; k < kOperands; ++k) for (int d = 0; d < outer_ndim; ++d) offset[k] += index[d] * strides[k * ndim + d];\n";
  src << "  int64_t s[kOperands];\n  for (int k = 0; k < kOperands; ++k) s[k] = inner_ndim == 0 ? 0 : strides[k * ndim + ndim - 1];\n";
  // Per-element inputs by their IR shape: constant along the row (every folded dim broadcast:
  // read once per row), dense along it (every folded dim full: read at j on the unit-stride
  // path), or either (read through a broadcast flag).
  std::set<int> dense, mixed;
  for (int v : full_inputs) {
    const Shape& shape = values[v].shape;
    const size_t skip = kernel.shape.size() - shape.size();
    bool all_full = true, all_broadcast = true;
    for (int d : kernel.reduce_dims) {
      const std::string size = static_cast<size_t>(d) < skip ? "1" : shape[d - skip];
      all_full = all_full && size == kernel.shape[d];
      all_broadcast = all_broadcast && size == "1";
    }
    if (all_broadcast) row_inputs.insert(v);
    else if (all_full) dense.insert(v);
    else mixed.insert(v);
  }
  for (int v : row_inputs) full_inputs.erase(v);
  // The unit-stride path needs dense operands at stride 1 and the others at stride 1 or 0.
  src << "  const bool unit = inner_ndim <= 1";
  for (int k = 0; k < operands; ++k) {
    const int v = k < outputs ? kernel.outputs[k] : kernel.inputs[k - outputs];
    if (k < outputs ? plan.loop.count(v) > 0 : dense.count(v) > 0) {
      src << " && (s[" << k << "] == 1 || inner_n <= 1)";
    } else if (k >= outputs && mixed.count(v)) {
      src << " && (s[" << k << "] == 0 || s[" << k << "] == 1)";
    }
  }
  src << ";\n";
  for (int v : mixed) src << "  const bool b" << operand_of(v) << " = s[" << operand_of(v) << "] == 0;\n";
  auto row_nodes_ready_at = [&](int level) {
    for (int n : kernel.nodes) {
      const Node& node = nodes[n];
      if (node.kind == NodeKind::kPointwise && !is_full(graph, kernel, node.outputs[0]) && plan.ready.at(node.outputs[0]) == level) {
        src << node_line(graph, node, "    ");
      }
    }
  };
  // The full nodes each loop computes: what its reductions and (last loop) full outputs need,
  // recomputed from the inputs; except that a costly value needed by several loops is computed
  // in the first and kept in a row-long stash, which the later loops read (softmax's exp).
  const int loops = plan.final_loop + 1;
  auto roots = [&](int loop) {
    std::vector<int> values;
    for (int n : kernel.nodes) {
      if (nodes[n].kind == NodeKind::kReduction && plan.reduction_loop.at(n) == loop) values.push_back(nodes[n].operands[0].value);
    }
    if (loop == plan.final_loop) {
      for (int out : kernel.outputs) {
        if (plan.loop.count(out)) values.push_back(out);
      }
    }
    return values;
  };
  std::map<int, int> stash_loop;  // stashed node -> the loop that computes it
  auto closure = [&](int loop, std::set<int>* from_stash) {
    std::set<int> needed;
    std::vector<int> pending = roots(loop);
    while (!pending.empty()) {
      const int v = pending.back();
      pending.pop_back();
      if (!plan.loop.count(v) || needed.count(plan.made_by.at(v))) continue;
      const int n = plan.made_by.at(v);
      const auto stashed = stash_loop.find(n);
      if (from_stash != nullptr && stashed != stash_loop.end() && stashed->second < loop) {
        from_stash->insert(n);
        continue;
      }
      needed.insert(n);
      for (const Operand& o : nodes[n].operands) {
        if (o.is_value()) pending.push_back(o.value);
      }
    }
    return needed;
  };
  std::map<int, int> loops_needing;
  for (int loop = 0; loop < loops; ++loop) {
    for (int n : closure(loop, nullptr)) {
      if (loops_needing[n]++ == 0) stash_loop[n] = loop;
    }
  }
  for (auto it = stash_loop.begin(); it != stash_loop.end();) {
    it = loops_needing[it->first] > 1 && costly(nodes[it->first].op) ? std::next(it) : stash_loop.erase(it);
  }
  for (const auto& [n, loop] : stash_loop) {
    const int v = nodes[n].outputs[0];
    src << "  std::vector<" << compute_type(values[v].dtype) << "> stash" << v << "(static_cast<size_t>(inner_n));\n";
  }
  src << "  for (int64_t row = begin; row < end; ++row) {\n";
  for (int k = 0; k < operands; ++k) {
    const int v = k < outputs ? kernel.outputs[k] : kernel.inputs[k - outputs];
    const char* type = storage_type(values[v].dtype);
    src << "    " << (k < outputs ? "" : "const ") << type << "* __restrict p" << k << " = reinterpret_cast<"
        << (k < outputs ? "" : "const ") << type << "*>(data[" << k << "]) + offset[" << k << "];\n";
  }
  for (int v : row_inputs) {
    src << "    const " << compute_type(values[v].dtype) << " v" << v << " = "
        << load_expression(values[v].dtype, "p" + std::to_string(operand_of(v)) + "[0]") << ";\n";
  }
  row_nodes_ready_at(0);
  for (int loop = 0; loop < loops; ++loop) {
    std::vector<int> reductions;
    for (int n : kernel.nodes) {
      if (nodes[n].kind == NodeKind::kReduction && plan.reduction_loop.at(n) == loop) reductions.push_back(n);
    }
    std::vector<int> stores;
    if (loop == plan.final_loop) {
      for (int out : kernel.outputs) {
        if (plan.loop.count(out)) stores.push_back(out);
      }
    }
    std::set<int> from_stash;
    const std::set<int> needed = closure(loop, &from_stash);
    std::set<int> loads;
    for (int n : needed) {
      for (const Operand& o : nodes[n].operands) {
        if (o.is_value() && full_inputs.count(o.value)) loads.insert(o.value);
      }
    }
    for (int n : reductions) {
      const int operand = nodes[n].operands[0].value;
      if (full_inputs.count(operand)) loads.insert(operand);
    }
    auto nan_flag = [&](int n) { return keeps_nan_flag(nodes[n]); };
    for (int n : reductions) {
      const std::string type = compute_type(nodes[n].compute);
      src << "    " << type << " a" << n << " = " << accumulator_init(nodes[n].op, type) << ";\n";
      if (nan_flag(n)) src << "    int nan" << n << " = 0;\n";
    }
    auto body = [&](bool unit) {
      std::ostringstream b;
      for (int v : loads) {
        const int k = operand_of(v);
        const std::string p = "p" + std::to_string(k);
        std::string at = p + "[o[" + std::to_string(k) + "]]";
        if (unit) at = mixed.count(v) ? "(b" + std::to_string(k) + " ? " + p + "[0] : " + p + "[j])" : p + "[j]";
        b << "        const " << compute_type(values[v].dtype) << " v" << v << " = " << load_expression(values[v].dtype, at) << ";\n";
      }
      for (int n : from_stash) {
        const int v = nodes[n].outputs[0];
        b << "        const " << compute_type(values[v].dtype) << " v" << v << " = stash" << v << "[j];\n";
      }
      for (int n : kernel.nodes) {
        if (!needed.count(n)) continue;
        b << node_line(graph, nodes[n], "        ");
        const auto stashed = stash_loop.find(n);
        if (stashed != stash_loop.end() && stashed->second == loop) {
          b << "        stash" << nodes[n].outputs[0] << "[j] = v" << nodes[n].outputs[0] << ";\n";
        }
      }
      for (int n : reductions) {
        const std::string acc = "a" + std::to_string(n);
        const std::string type = compute_type(nodes[n].compute);
        const std::string value = type + "(v" + std::to_string(nodes[n].operands[0].value) + ")";
        b << "        " << acc << " = " << accumulate(nodes[n].op, acc, value) << ";\n";
        if (nan_flag(n)) b << "        nan" << n << " |= " << value << " != " << value << ";\n";
      }
      for (int v : stores) {
        const int k = operand_of(v);
        b << "        p" << k << "[" << (unit ? std::string("j") : "o[" + std::to_string(k) + "]") << "] = "
          << store_expression(values[v].dtype, "v" + std::to_string(v)) << ";\n";
      }
      return b.str();
    };
    // OpenMP SIMD reductions (-fopenmp-simd, no OpenMP runtime) let the loop vectorize with its
    // accumulators in vector registers.
    std::string clauses;
    for (int n : reductions) {
      const std::string& op = nodes[n].op;
      clauses += std::string(" reduction(") + (op == "amax" ? "max" : op == "amin" ? "min" : "+") + " : a" +
                 std::to_string(n) + ")";
      if (nan_flag(n)) clauses += " reduction(| : nan" + std::to_string(n) + ")";
    }
    std::vector<int> flags;
    for (int v : mixed) flags.push_back(operand_of(v));
    const std::string unit_loop =
        "#pragma omp simd" + clauses + "\n      for (int64_t j = 0; j < inner_n; ++j) {\n" + body(true) + "      }\n";
    src << "    if (unit) {\n" << unswitch_broadcasts(unit_loop, flags, "j", "      ");
    src << "    } else {\n      for (int64_t j = 0; j < inner_n; ++j) {\n";
    src << "        int64_t o[kOperands] = {0};\n        int64_t left = j;\n";
    src << "        for (int d = ndim - 1; d >= outer_ndim; --d) {\n          const int64_t x = left % sizes[d];\n"
           "          left /= sizes[d];\n          for (int k = 0; k < kOperands; ++k) o[k] += x * strides[k * ndim + d];\n        }\n";
    src << body(false) << "      }\n    }\n";
    for (int n : reductions) {
      const Node& node = nodes[n];
      const std::string type = compute_type(node.compute);
      std::string result = "a" + std::to_string(n);
      if (node.op == "mean") result = result + " / " + type + "(inner_n)";
      if (nan_flag(n)) result = "nan" + std::to_string(n) + " ? std::numeric_limits<" + type + ">::quiet_NaN() : " + result;
      const Value& out = values[node.outputs[0]];
      src << "    const " << compute_type(out.dtype) << " v" << out.id << " = "
          << kept(graph, node, std::string(compute_type(out.dtype)) + "(" + result + ")") << ";\n";
    }
    row_nodes_ready_at(loop + 1);
  }
  for (int k = 0; k < outputs; ++k) {
    const int v = kernel.outputs[k];
    if (!plan.loop.count(v)) src << "    p" << k << "[0] = " << store_expression(values[v].dtype, "v" + std::to_string(v)) << ";\n";
  }
  src << "    if (outer_ndim == 0) break;\n";
  src << "    for (int k = 0; k < kOperands; ++k) offset[k] += strides[k * ndim + outer_ndim - 1];\n";
  src << "    ++index[outer_ndim - 1];\n";
  src << "    for (int d = outer_ndim - 1; d > 0 && index[d] == sizes[d]; --d) {\n      index[d] = 0;\n      ++index[d - 1];\n";
  src << "      for (int k = 0; k < kOperands; ++k) offset[k] += strides[k * ndim + d - 1] - sizes[d] * strides[k * ndim + d];\n";
  src << "    }\n  }\n}\n";
  return src.str();
}

}  // namespace torchneuron::compiler::codegen_detail
