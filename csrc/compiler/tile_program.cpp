#include "compiler/tile_program.h"

#include <sstream>
#include <stdexcept>

namespace torchneuron::compiler {
namespace {

void check(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("tile program: " + message);
}

std::string shape_text(const std::vector<int64_t>& sizes) {
  std::string text = "[";
  for (size_t d = 0; d < sizes.size(); ++d) text += (d ? ", " : "") + std::to_string(sizes[d]);
  return text + "]";
}

const char* space_name(MemorySpace space) {
  return space == MemorySpace::kHbm ? "hbm" : space == MemorySpace::kSbuf ? "sbuf" : "psum";
}

const char* kind_name(TileOpKind kind) {
  switch (kind) {
    case TileOpKind::kPointwise: return "pointwise";
    case TileOpKind::kReduce: return "reduce";
    case TileOpKind::kMatmul: return "matmul";
    case TileOpKind::kScan: return "scan";
    case TileOpKind::kMax8: return "max8";
    case TileOpKind::kFindIndex8: return "find_index8";
    case TileOpKind::kPrint: return "print";
    case TileOpKind::kLoop: return "loop";
    case TileOpKind::kEndLoop: return "end_loop";
    case TileOpKind::kCut: return "cut";
  }
  return "?";
}

std::string access_text(const TileAccess& a) {
  return "b" + std::to_string(a.buffer) + "[" + a.offset + "; sizes " + shape_text(a.sizes) + " strides " +
         shape_text(a.strides) + "]";
}

}  // namespace

int TileProgram::add_buffer(const std::string& name, MemorySpace space, DType dtype, int64_t elements, int argument) {
  check(elements >= 0, "buffer " + name + " has a negative size");
  TileBuffer buffer{name, space, dtype, elements, argument, 0};
  if (space == MemorySpace::kHbm) {
    check(argument >= 0, "HBM buffer " + name + " needs a tensor argument");
  } else {
    buffer.scratch_offset = scratch_floats_;
    scratch_floats_ += (elements + 15) / 16 * 16;  // 64-byte aligned starts
  }
  buffers_.push_back(buffer);
  return static_cast<int>(buffers_.size()) - 1;
}

int TileProgram::begin_loop(const IndexExpression& extent) {
  TileOp op;
  op.kind = TileOpKind::kLoop;
  op.loop_var = loops_++;
  op.extent = extent;
  ops_.push_back(op);
  ++open_loops_;
  return op.loop_var;
}

void TileProgram::end_loop() {
  check(open_loops_ > 0, "end_loop without a loop");
  --open_loops_;
  TileOp op;
  op.kind = TileOpKind::kEndLoop;
  ops_.push_back(op);
}

void TileProgram::cut() {
  check(open_loops_ == 0, "a program is cut only outside loops");
  TileOp op;
  op.kind = TileOpKind::kCut;
  ops_.push_back(op);
}

int TileProgram::segments() const {
  int count = 1;
  for (const TileOp& op : ops_) count += op.kind == TileOpKind::kCut;
  return count;
}

void TileProgram::add(TileOp op) {
  auto check_access = [&](const TileAccess& a, const char* role) {
    check(a.buffer >= 0 && a.buffer < static_cast<int>(buffers_.size()), std::string(role) + " names no buffer");
    check(a.sizes.size() == a.strides.size(), std::string(role) + " has sizes and strides of different lengths");
    check(a.lower.empty() || a.lower.size() == a.sizes.size(), std::string(role) + " has bounds of the wrong rank");
    check(a.upper.size() == a.lower.size(), std::string(role) + " has unpaired bounds");
  };
  const bool has_destination = op.kind != TileOpKind::kPrint;
  if (has_destination) check_access(op.destination, "the destination");
  for (const TileAccess& s : op.sources) check_access(s, "a source");
  for (size_t n = 0; n < op.expression.size(); ++n) {
    const ExpressionNode& node = op.expression[n];
    for (int a : node.arguments) check(a >= 0 && a < static_cast<int>(n), "an expression node reads a later node");
    if (node.op == "source") check(node.source >= 0 && node.source < static_cast<int>(op.sources.size()), "a bad source");
  }
  const size_t rank = op.destination.sizes.size();
  switch (op.kind) {
    case TileOpKind::kPointwise:
      check(!op.expression.empty(), "a pointwise op without an expression");
      for (const TileAccess& s : op.sources) check(s.sizes == op.destination.sizes, "a source's sizes differ from the destination's");
      break;
    case TileOpKind::kReduce:
      check(!op.sources.empty() && !op.expression.empty(), "a reduce without a source");
      check(op.reduce_op == "add" || op.reduce_op == "mul" || op.reduce_op == "max" || op.reduce_op == "min",
            "unknown reduce op " + op.reduce_op);
      for (const TileAccess& s : op.sources) check(s.sizes == op.sources[0].sizes, "reduce sources of different sizes");
      check(op.sources[0].sizes.size() == rank, "a reduce keeps its folded dims as size 1");
      for (int d : op.reduce_dims) {
        check(d > 0 && d < static_cast<int>(rank), "a reduce over dim " + std::to_string(d));
        check(op.destination.sizes[d] == 1, "a reduce's destination keeps folded dims as size 1");
      }
      break;
    case TileOpKind::kMatmul:
      check(op.sources.size() == 2 && rank == 2 && op.sources[0].sizes.size() == 2 && op.sources[1].sizes.size() == 2,
            "a matmul takes 2-D stationary, moving and destination tiles");
      check(op.sources[0].sizes[0] == op.sources[1].sizes[0] && op.destination.sizes[0] == op.sources[0].sizes[1] &&
                op.destination.sizes[1] == op.sources[1].sizes[1],
            "matmul sizes " + shape_text(op.sources[0].sizes) + "^T @ " + shape_text(op.sources[1].sizes) + " -> " +
                shape_text(op.destination.sizes));
      break;
    case TileOpKind::kScan:
      check(rank == 2 && (op.sources.size() == 2 || op.sources.size() == 3),
            "a scan takes two 2-D sources (and an initial value per partition)");
      for (const TileAccess& s : op.sources) check(s.sizes == op.destination.sizes, "scan sources differ in size");
      break;
    case TileOpKind::kMax8:
    case TileOpKind::kFindIndex8:
      check(rank == 2 && op.destination.sizes[1] == 8, "max8 and find_index8 write 8 values per partition");
      check(!op.sources.empty() && op.sources[0].sizes.size() == 2 && op.sources[0].sizes[0] == op.destination.sizes[0],
            "max8 and find_index8 read a 2-D tile of the same partitions");
      break;
    case TileOpKind::kPrint:
      check(op.sources.size() == 1, "print takes one tile");
      break;
    case TileOpKind::kLoop:
    case TileOpKind::kEndLoop:
    case TileOpKind::kCut:
      check(false, "loops and cuts are added with begin_loop, end_loop and cut");
  }
  ops_.push_back(std::move(op));
}

int64_t TileProgram::programs() const {
  int64_t count = 1;
  for (int64_t g : grid_) count *= g;
  return count;
}

std::string TileProgram::to_string() const {
  std::ostringstream out;
  out << "grid " << shape_text(grid_) << "\n";
  for (size_t b = 0; b < buffers_.size(); ++b) {
    out << "b" << b << " " << buffers_[b].name << ": " << space_name(buffers_[b].space) << " "
        << dtype_name(buffers_[b].dtype) << " x" << buffers_[b].elements << "\n";
  }
  for (const TileOp& op : ops_) {
    out << kind_name(op.kind);
    if (op.kind == TileOpKind::kLoop) out << " i" << op.loop_var << " < " << op.extent;
    if (op.kind != TileOpKind::kLoop && op.kind != TileOpKind::kEndLoop && op.kind != TileOpKind::kPrint &&
        op.kind != TileOpKind::kCut) {
      out << " " << access_text(op.destination);
    }
    for (const TileAccess& s : op.sources) out << " " << access_text(s);
    for (const ExpressionNode& n : op.expression) out << " " << n.op;
    if (!op.reduce_op.empty()) out << " " << op.reduce_op;
    out << "\n";
  }
  return out.str();
}

}  // namespace torchneuron::compiler
