#include "compiler/passes.h"

#include <algorithm>
#include <map>
#include <set>

namespace torchneuron::compiler {
namespace {

// Replaces every use of value `from` by `to` (operands of later nodes).
void replace_uses(Graph& graph, int from, int to) {
  for (Node& node : graph.nodes()) {
    for (Operand& operand : node.operands) {
      if (operand.value == from) operand.value = to;
    }
  }
}

bool is_literal(const Operand& o, double value) { return !o.is_value() && o.literal == value; }

}  // namespace

Shape reduced_shape(const Shape& shape, const std::vector<int>& dims, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int>(d)) != dims.end();
    if (!reduced) out.push_back(shape[d]);
    else if (keepdim) out.push_back("1");
  }
  return out;
}

bool folds_outer_dims(const std::vector<int>& dims, int ndim) { return !dims.empty() && dims.back() != ndim - 1; }

int eliminate_dead_code(Graph& graph) {
  std::vector<bool> live(graph.values().size(), false);
  for (int v : graph.outputs()) live[v] = true;
  int removed = 0;
  auto& nodes = graph.nodes();
  for (size_t i = nodes.size(); i-- > 0;) {
    Node& node = nodes[i];
    if (node.removed) continue;
    bool needed = node.kind == NodeKind::kOpaque;  // eager calls may have effects: always kept
    for (int v : node.outputs) needed = needed || live[v];
    if (!needed) {
      node.removed = true;
      ++removed;
      continue;
    }
    for (const Operand& operand : node.operands) {
      if (operand.is_value()) live[operand.value] = true;
    }
  }
  return removed;
}

// x * 1, x / 1, x + 0, x - 0 become x when the result has x's dtype and shape. Values an eager
// call reads are kept: the runtime resolves eager arguments by their own FX nodes.
int fold_constants(Graph& graph) {
  std::vector<bool> read_by_eager(graph.values().size(), false);
  for (const Node& node : graph.nodes()) {
    if (node.removed || node.kind != NodeKind::kOpaque) continue;
    for (const Operand& operand : node.operands) {
      if (operand.is_value()) read_by_eager[operand.value] = true;
    }
  }
  int folded = 0;
  for (Node& node : graph.nodes()) {
    if (node.removed || node.kind != NodeKind::kPointwise || node.operands.size() != 2) continue;
    const Value& out = graph.values()[node.outputs[0]];
    if (out.graph_output || read_by_eager[out.id]) continue;  // an output must stay a fresh tensor
    const Operand &a = node.operands[0], &b = node.operands[1];
    const bool identity = (node.op == "mul" && is_literal(b, 1.0)) || (node.op == "div" && is_literal(b, 1.0)) ||
                          ((node.op == "add" || node.op == "sub") && is_literal(b, 0.0));
    if (identity && a.is_value() && graph.values()[a.value].dtype == out.dtype && graph.values()[a.value].shape == out.shape) {
      replace_uses(graph, out.id, a.value);
      node.removed = true;
      ++folded;
    }
  }
  return folded + eliminate_dead_code(graph);
}

Program plan_program(Graph& graph) {
  Program program;
  program.removed_nodes = eliminate_dead_code(graph);
  program.removed_nodes += fold_constants(graph);
  const auto& values = graph.values();

  // Fusion: a pointwise node joins the latest kernel it fits that runs after all of its operands
  // exist (vertical fusion with its producers, horizontal with its siblings), even across eager
  // calls in between; otherwise it starts a kernel at its place in the order. A node fits a
  // kernel of its shape, or a reduction kernel whose row shape it has. A reduction fits a kernel
  // over its operand's shape that folds the same dims or none yet (it then becomes a reduction
  // kernel). A value a reduction made without keepdim is read only by later kernels: its dims
  // no longer line up with the kernel's. So is a column kernel's reduction read by a full node:
  // a column kernel makes one pass.
  std::vector<int> producer_step(values.size(), -1);  // graph inputs: -1
  std::vector<bool> squeezed(values.size(), false), column_result(values.size(), false);
  auto fits = [&](const Kernel& kernel, const Node& node) {
    if (node.kind == NodeKind::kReduction) {
      return values[node.operands[0].value].shape == kernel.shape &&
             (kernel.reduce_dims.empty() || kernel.reduce_dims == node.reduce_dims);
    }
    const Shape& shape = values[node.outputs[0]].shape;
    if (shape == kernel.shape) return true;
    if (kernel.reduce_dims.empty()) return false;
    if (shape.empty()) return kernel.reduce_dims.size() == kernel.shape.size();
    return shape == reduced_shape(kernel.shape, kernel.reduce_dims, true);
  };
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    if (node.removed) continue;
    if (node.kind == NodeKind::kOpaque) {
      program.steps.push_back(Step{false, node.external_id, {}});
      for (int v : node.outputs) producer_step[v] = static_cast<int>(program.steps.size()) - 1;
      continue;
    }
    const Shape& made = values[node.outputs[0]].shape;
    int ready = -1;
    for (const Operand& operand : node.operands) {
      if (!operand.is_value()) continue;
      const int v = operand.value;
      const bool later = squeezed[v] || (column_result[v] && (node.kind == NodeKind::kReduction || made != values[v].shape));
      ready = std::max(ready, producer_step[v] + (later ? 1 : 0));
    }
    int target = -1;
    for (int s = static_cast<int>(program.steps.size()) - 1; s >= std::max(ready, 0); --s) {
      const Step& step = program.steps[s];
      if (step.is_kernel && fits(program.kernels[step.index], node)) {
        target = s;
        break;
      }
    }
    const bool reduction = node.kind == NodeKind::kReduction;
    if (target < 0) {
      Kernel kernel;
      kernel.symbol = "tn_kernel_" + std::to_string(program.kernels.size());
      kernel.shape = reduction ? values[node.operands[0].value].shape : values[node.outputs[0]].shape;
      program.kernels.push_back(kernel);
      program.steps.push_back(Step{true, static_cast<int>(program.kernels.size()) - 1, {}});
      target = static_cast<int>(program.steps.size()) - 1;
    }
    Kernel& kernel = program.kernels[program.steps[target].index];
    if (reduction) {
      kernel.reduce_dims = node.reduce_dims;
      squeezed[node.outputs[0]] = !node.keepdim && node.reduce_dims.size() != kernel.shape.size();
      column_result[node.outputs[0]] = folds_outer_dims(node.reduce_dims, static_cast<int>(kernel.shape.size()));
    } else {
      for (const Operand& operand : node.operands) {  // derived from a result within the same pass
        if (operand.is_value() && column_result[operand.value] && producer_step[operand.value] == target) {
          column_result[node.outputs[0]] = true;
        }
      }
    }
    kernel.nodes.push_back(static_cast<int>(i));
    producer_step[node.outputs[0]] = target;
    ++program.fused_nodes;
  }

  // Kernel inputs (read from outside) and outputs (read outside, or graph outputs).
  std::vector<std::set<int>> readers(values.size());  // step indices reading each value
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const Step& step = program.steps[s];
    auto note_reads = [&](const Node& node) {
      for (const Operand& operand : node.operands) {
        if (operand.is_value()) readers[operand.value].insert(static_cast<int>(s));
      }
    };
    if (step.is_kernel) {
      for (int n : program.kernels[step.index].nodes) note_reads(graph.nodes()[n]);
    } else {
      for (const Node& node : graph.nodes()) {
        if (!node.removed && node.kind == NodeKind::kOpaque && node.external_id == step.index) note_reads(node);
      }
    }
  }
  for (size_t s = 0; s < program.steps.size(); ++s) {
    if (!program.steps[s].is_kernel) continue;
    Kernel& kernel = program.kernels[program.steps[s].index];
    std::set<int> inside;
    for (int n : kernel.nodes) inside.insert(graph.nodes()[n].outputs[0]);
    for (int n : kernel.nodes) {
      for (const Operand& operand : graph.nodes()[n].operands) {
        if (operand.is_value() && !inside.count(operand.value) &&
            std::find(kernel.inputs.begin(), kernel.inputs.end(), operand.value) == kernel.inputs.end()) {
          kernel.inputs.push_back(operand.value);
        }
      }
    }
    for (int n : kernel.nodes) {
      const int v = graph.nodes()[n].outputs[0];
      bool used_later = values[v].graph_output;
      for (int reader : readers[v]) used_later = used_later || reader != static_cast<int>(s);
      if (used_later) kernel.outputs.push_back(v);
    }
  }

  // Liveness: the last step reading each value (graph outputs live past the end).
  const int end = static_cast<int>(program.steps.size());
  std::vector<int> last_use(values.size(), -1);
  for (size_t v = 0; v < values.size(); ++v) {
    for (int reader : readers[v]) last_use[v] = std::max(last_use[v], reader);
    if (values[v].graph_output) last_use[v] = end;
  }
  for (size_t v = 0; v < values.size(); ++v) {
    if (last_use[v] >= 0 && last_use[v] < end) program.steps[last_use[v]].release.push_back(static_cast<int>(v));
  }

  // Memory planning over kernel outputs: an output takes over the buffer of a kernel input that
  // dies at this step (in place), else a free slot of the same dtype and shape, else a new slot.
  // A value an eager call reads may live on in an alias (a view) the call returns, so its
  // buffer is never handed to another value.
  std::vector<bool> escaped(values.size(), false);
  for (const Node& node : graph.nodes()) {
    if (node.removed || node.kind != NodeKind::kOpaque) continue;
    for (const Operand& operand : node.operands) {
      if (operand.is_value()) escaped[operand.value] = true;
    }
  }
  program.slot.assign(values.size(), -1);
  program.in_place.assign(values.size(), -1);
  std::vector<std::pair<int, int>> free_slots;  // (slot, example value) whose values are dead
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const Step& step = program.steps[s];
    if (step.is_kernel) {
      const Kernel& kernel = program.kernels[step.index];
      std::vector<int> dying;
      for (int in : kernel.inputs) {
        if (program.slot[in] >= 0 && !escaped[in] && last_use[in] == static_cast<int>(s)) dying.push_back(in);
      }
      for (int out : kernel.outputs) {
        auto same_layout = [&](int other) {
          return values[other].dtype == values[out].dtype && values[other].shape == values[out].shape;
        };
        auto reuse = std::find_if(dying.begin(), dying.end(), same_layout);
        if (reuse != dying.end()) {
          program.slot[out] = program.slot[*reuse];
          program.in_place[out] = *reuse;
          dying.erase(reuse);
          continue;
        }
        auto free_slot = std::find_if(free_slots.begin(), free_slots.end(),
                                      [&](const std::pair<int, int>& entry) { return same_layout(entry.second); });
        if (free_slot != free_slots.end()) {
          program.slot[out] = free_slot->first;
          free_slots.erase(free_slot);
        } else {
          program.slot[out] = program.num_slots++;
        }
      }
      // Inputs that died here without being overwritten free their slots for later kernels.
      for (int in : dying) free_slots.emplace_back(program.slot[in], in);
    }
  }
  return program;
}

}  // namespace torchneuron::compiler
