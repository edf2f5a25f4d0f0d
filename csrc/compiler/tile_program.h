// The tile-program IR that NKI kernels are traced into: buffers in HBM, SBUF and PSUM, loops,
// and tile instructions over strided accesses; and its code generation into one C++ function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir.h"

namespace torchneuron::compiler {

enum class MemorySpace : uint8_t { kHbm, kSbuf, kPsum };

// Index expressions are C++ integer expressions over the program ids p0, p1, p2 and the loop
// variables i<k> (all non-negative), written by the tracer, which checked their ranges.
using IndexExpression = std::string;

struct TileBuffer {
  std::string name;
  MemorySpace space = MemorySpace::kSbuf;
  DType dtype = DType::kFloat32;  // HBM: the storage type; on chip values are held as float
  int64_t elements = 0;
  int argument = -1;              // HBM: the index of its pointer among the kernel's tensors
  int64_t scratch_offset = 0;     // on chip: where it starts in the program's scratch (floats)
};

// Elements offset + sum(t[d] * strides[d]) of a buffer for tile index t, 0 <= t[d] < sizes[d];
// an instruction touches only t[d] in [lower[d], upper[d]) where those are given (masks).
struct TileAccess {
  int buffer = -1;
  IndexExpression offset = "0";
  std::vector<int64_t> sizes, strides;
  std::vector<IndexExpression> lower, upper;  // empty or one per dim; "" for no bound
};

// A node of an instruction's elementwise expression; nodes refer to earlier nodes, the last
// is the value. op: "source" (the access `source` at the tile index), "literal", "index" (the
// tile index along `dim`), "expression" (an IndexExpression `text`), or a pointwise op of the
// code generator's table over `arguments`.
struct ExpressionNode {
  std::string op;
  std::vector<int> arguments;
  int source = -1;
  double literal = 0.0;
  int dim = -1;
  std::string text;
};

enum class TileOpKind : uint8_t { kPointwise, kReduce, kMatmul, kScan, kMax8, kFindIndex8, kPrint, kLoop, kEndLoop, kCut };

struct TileOp {
  TileOpKind kind = TileOpKind::kPointwise;
  TileAccess destination;
  std::vector<TileAccess> sources;
  std::vector<ExpressionNode> expression;  // pointwise, reduce (before folding), scan (op0, op1)
  std::string reduce_op;                   // reduce: "add", "max" or "min"
  std::vector<int> reduce_dims;            // reduce: the sources' dims folded (kept as size 1 in the destination)
  double scale = 1.0;                      // reduce: multiplies the folded value (a mean)
  bool accumulate = false;                 // matmul, reduce: add to the destination instead of overwriting
  double initial = 0.0;                    // scan: the value before the first element
  int loop_var = -1;                       // loop: its variable i<loop_var>
  IndexExpression extent;                  // loop: the trip count
  std::string label;                       // print
};

// A kernel as a sequence of tile ops run once per program of a grid (up to 3 dims).
class TileProgram {
 public:
  int add_buffer(const std::string& name, MemorySpace space, DType dtype, int64_t elements, int argument);
  int begin_loop(const IndexExpression& extent);  // returns the loop variable's number
  void end_loop();
  // Ends a segment (outside loops): each segment is an entry point of its own, symbol_s<k>, and the
  // host runs something (a collective) between two of them. Needs external scratch.
  void cut();
  int segments() const;
  // Checks the op's shape (operands' ranks, reduce dims, matmul sizes) and appends it.
  void add(TileOp op);
  void set_grid(std::vector<int64_t> grid) { grid_ = std::move(grid); }
  // On-chip memory in the kernel's tensor `argument` (float32, NaN-filled by the launcher) instead
  // of a scratch of the call's own, so a kernel cut into segments keeps its tiles from one to the
  // next. One program only.
  void set_external_scratch(int argument) { external_scratch_ = argument; }
  int external_scratch() const { return external_scratch_; }

  const std::vector<TileBuffer>& buffers() const { return buffers_; }
  const std::vector<TileOp>& ops() const { return ops_; }
  const std::vector<int64_t>& grid() const { return grid_; }
  int64_t scratch_floats() const { return scratch_floats_; }
  int64_t programs() const;

  std::string to_string() const;

 private:
  std::vector<TileBuffer> buffers_;
  std::vector<TileOp> ops_;
  std::vector<int64_t> grid_{1};
  int64_t scratch_floats_ = 0;
  int external_scratch_ = -1;
  int loops_ = 0, open_loops_ = 0;
};

// The entry point of a generated tile program:
//   void kernel(char* const* tensors, int64_t begin, int64_t end, int64_t* fault)
// runs programs [begin, end) of the grid (row-major over its dims) with one scratch of on-chip
// memory, filled with NaN first, for the whole range. A dynamic index (read from a tile at run
// time: tn_checked(value, limit, fault)) out of [0, limit) sets *fault to 1 + the value's
// distance past the range and is clamped, so the program finishes and the launcher raises.
using TileProgramEntry = void (*)(char* const*, int64_t, int64_t, int64_t*);

// The C++ source of `program` as the function `symbol` (a program of several segments: the
// functions symbol_s0, symbol_s1, ...), with the prelude.
std::string generate_tile_source(const TileProgram& program, const std::string& symbol);

}  // namespace torchneuron::compiler
