// C++ code generation for fused kernels: each Kernel of a Program becomes an extern "C" loop
// nest over a runtime shape (so one artifact serves every size), with a self-contained prelude
// for half-precision loads and stores. The caller compiles the source into the artifact.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir.h"
#include "compiler/passes.h"

namespace torchneuron::compiler {

// Whether the code generator has a template for `op` with `arity` operands.
bool supports_pointwise(const std::string& op, int arity);

// The kernel entry point every generated kernel has:
//   void kernel(char* const* data, const int64_t* strides, const int64_t* sizes, int ndim,
//               int64_t begin, int64_t end)
// data: the kernel's outputs then its inputs; strides: [operand][ndim] in elements (0 for a
// broadcast dim); elements [begin, end) of the row-major index space over `sizes`.
using KernelEntry = void (*)(char* const*, const int64_t*, const int64_t*, int, int64_t, int64_t);

// The entry point of a reduction kernel:
//   void kernel(char* const* data, const int64_t* strides, const int64_t* sizes, int ndim,
//               int inner_ndim, int64_t begin, int64_t end)
// as above, except that the last `inner_ndim` dims are the folded ones and [begin, end) counts
// rows: indices of the other dims. Row-shaped operands have stride 0 along the folded dims.
using ReductionEntry = void (*)(char* const*, const int64_t*, const int64_t*, int, int, int64_t, int64_t);

std::string generate_source(const Graph& graph, const Program& program);

// What every generated source starts with: the vector math and the prelude (half-precision
// loads and stores, tn_* helpers). Tile programs (tile_program.h) share it.
std::string generated_prelude();

// The C++ expression of pointwise `op` over `operands` (expressions of C++ type `type`).
// Throws std::out_of_range for an op the generator lacks.
std::string pointwise_expression(const std::string& op, const std::vector<std::string>& operands, const std::string& type);

}  // namespace torchneuron::compiler
