// Passes over the IR and the program they produce: dead-code elimination, identity folding,
// fusion of pointwise nodes into loop-nest kernels, and memory planning (buffer reuse and
// in-place writes), ending in the step list the runtime executes.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir.h"

namespace torchneuron::compiler {

// One fused loop nest: pointwise nodes over one shape, reading `inputs` (values made outside
// it, broadcast to the shape) and writing `outputs` (values needed after it). Values used only
// inside never reach memory. A reduction kernel folds `reduce_dims` of its shape: it runs row
// by row (a row is one index of the other dims), with "full" nodes over the whole shape,
// reductions, and "row" nodes over the reduced shape (keepdim, or rank 0 when every dim folds).
struct Kernel {
  std::string symbol;
  Shape shape;
  std::vector<int> reduce_dims;  // empty: a pointwise kernel
  std::vector<int> nodes;
  std::vector<int> inputs;
  std::vector<int> outputs;
};

struct Step {
  bool is_kernel = false;
  int index = -1;            // kernel index, or the opaque node's external id
  std::vector<int> release;  // values whose last use is this step
};

struct Program {
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
  // Memory plan for kernel outputs: the buffer slot each value lives in (-1: not planned), and
  // the number of slots. Values sharing a slot have disjoint lifetimes, one dtype and one shape.
  std::vector<int> slot;
  int num_slots = 0;
  std::vector<int> in_place;  // per value: the dying kernel input whose buffer it overwrites, or -1
  int removed_nodes = 0;      // by dead-code elimination and folding
  int fused_nodes = 0;        // pointwise nodes placed in kernels
};

// `shape` with `dims` dropped, or kept as size 1.
Shape reduced_shape(const Shape& shape, const std::vector<int>& dims, bool keepdim);

int eliminate_dead_code(Graph& graph);
int fold_constants(Graph& graph);
Program plan_program(Graph& graph);  // runs the passes above, then fusion and memory planning

}  // namespace torchneuron::compiler
