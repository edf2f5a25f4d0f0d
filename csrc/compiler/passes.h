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
// Folding the innermost dims makes a row kernel: loops over each row, several if a full node
// needs a reduction's result. Folding outer dims only makes a column kernel: one pass that
// accumulates a block of kept elements ("columns") across every folded index.
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
// Whether folding `dims` (ascending) of a shape of `ndim` dims leaves the innermost dim: a
// column kernel rather than a row kernel.
bool folds_outer_dims(const std::vector<int>& dims, int ndim);

int eliminate_dead_code(Graph& graph);
int fold_constants(Graph& graph);
Program plan_program(Graph& graph);  // runs the passes above, then fusion and memory planning

}  // namespace torchneuron::compiler
