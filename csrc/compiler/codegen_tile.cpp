// Code generation for tile programs: each op becomes a loop nest over its tile with the sizes and
// strides as literals (so the compiler unrolls and vectorizes the unit-stride inner loop), loops
// become C++ loops, and on-chip buffers are slices of one scratch array of floats.
#include <cctype>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "compiler/codegen.h"
#include "compiler/codegen_common.h"
#include "compiler/tile_program.h"

namespace torchneuron::compiler {
namespace {

using codegen_detail::load_expression;
using codegen_detail::storage_type;
using codegen_detail::store_expression;

std::string number(double value) {
  if (std::isnan(value)) return "std::numeric_limits<float>::quiet_NaN()";
  if (std::isinf(value)) return value > 0 ? "std::numeric_limits<float>::infinity()" : "-std::numeric_limits<float>::infinity()";
  std::ostringstream text;
  text.precision(9);
  text << value;
  return "float(" + text.str() + ")";
}

class TileEmitter {
 public:
  explicit TileEmitter(const TileProgram& program) : program_(program) {}

  std::string functions(const std::string& symbol) {
    const auto& ops = program_.ops();
    if (program_.segments() == 1) return function(symbol, 0, ops.size());
    if (program_.external_scratch() < 0) throw std::invalid_argument("a tile program in segments needs external scratch");
    std::string text;
    size_t begin = 0;
    int segment = 0;
    for (size_t i = 0; i <= ops.size(); ++i) {
      if (i == ops.size() || ops[i].kind == TileOpKind::kCut) {
        text += function(symbol + "_s" + std::to_string(segment++), begin, i);
        begin = i + 1;
      }
    }
    return text;
  }

 private:
  // The entry point `symbol` running ops [first, last) (a segment) for programs [begin, end).
  std::string function(const std::string& symbol, size_t first, size_t last) {
    const std::vector<std::vector<size_t>> parts = split_into_parts(first, last);
    std::ostringstream text;
    if (parts.size() > 1) {
      for (size_t k = 0; k < parts.size(); ++k) text << part(symbol + "_part" + std::to_string(k), parts[k]);
    }
    text << "extern \"C\" void " << symbol << "(char* const* tensors, int64_t begin, int64_t end, int64_t* fault) {\n";
    text << "  (void)fault;\n";
    const int external = program_.external_scratch();
    if (external >= 0) {
      if (program_.programs() != 1) throw std::invalid_argument("a tile program with external scratch has one program");
      text << "  float* const scratch_store = reinterpret_cast<float*>(tensors[" << external << "]);\n";
    } else {
      text << "  std::vector<float> scratch_vector(" << program_.scratch_floats() + 16
           << ", std::numeric_limits<float>::quiet_NaN());\n";
      text << "  float* const scratch_store = scratch_vector.data();\n";
    }
    text << "  float* const scratch = scratch_store + (16 - reinterpret_cast<uintptr_t>(scratch_store) / 4 % 16) % 16;\n";
    text << "  (void)scratch;\n";
    if (parts.size() > 1) {
      text << "  for (int64_t program = begin; program < end; ++program) {\n";
      for (size_t k = 0; k < parts.size(); ++k) text << "    " << symbol << "_part" << k << "(tensors, scratch, program, fault);\n";
      text << "  }\n}\n";
      return text.str();
    }
    const auto& buffers = program_.buffers();
    for (size_t b = 0; b < buffers.size(); ++b) text << "  " << declaration(b) << "\n  (void)" << name_of(b) << ";\n";
    text << "  for (int64_t program = begin; program < end; ++program) {\n" << program_ids("    ");
    indent_ = "    ";
    out_.str("");
    for (size_t i = first; i < last; ++i) emit(program_.ops()[i]);
    text << out_.str() << "  }\n}\n";
    return text.str();
  }

  // A long program is cut, between its top-level statements, into functions of about kPartOps ops
  // each: the C++ compiler's time grows faster than linearly with a function's size.
  static constexpr size_t kPartOps = 256;

  std::vector<std::vector<size_t>> split_into_parts(size_t first, size_t last) const {
    std::vector<std::vector<size_t>> parts(1);
    int depth = 0;
    const auto& ops = program_.ops();
    for (size_t i = first; i < last; ++i) {
      if (depth == 0 && parts.back().size() >= kPartOps) parts.emplace_back();
      parts.back().push_back(i);
      if (ops[i].kind == TileOpKind::kLoop) ++depth;
      if (ops[i].kind == TileOpKind::kEndLoop) --depth;
    }
    return parts;
  }

  std::string name_of(size_t b) const {
    return (program_.buffers()[b].space == MemorySpace::kHbm ? "h" : "s") + std::to_string(b);
  }

  std::string declaration(size_t b) const {
    const TileBuffer& buffer = program_.buffers()[b];
    if (buffer.space == MemorySpace::kHbm) {
      const std::string type = storage_type(buffer.dtype);
      return type + "* const " + name_of(b) + " = reinterpret_cast<" + type + "*>(tensors[" +
             std::to_string(buffer.argument) + "]);";
    }
    return "float* const " + name_of(b) + " = scratch + " + std::to_string(buffer.scratch_offset) + ";";
  }

  std::string program_ids(const std::string& indent) const {
    std::ostringstream text;
    const auto& grid = program_.grid();
    int64_t inner = 1;
    for (int d = static_cast<int>(grid.size()) - 1; d >= 0; --d) {
      text << indent << "const int64_t p" << d << " = program / " << inner << " % " << grid[d] << ";\n";
      text << indent << "(void)p" << d << ";\n";
      inner *= grid[d];
    }
    return text.str();
  }

  // One part: its ops, with declarations of just the buffers its text names (s<k>, h<k>).
  std::string part(const std::string& name, const std::vector<size_t>& ops) {
    out_.str("");
    indent_ = "  ";
    for (size_t i : ops) emit(program_.ops()[i]);
    const std::string body = out_.str();
    std::vector<bool> used(program_.buffers().size(), false);
    for (size_t i = 0; i + 1 < body.size(); ++i) {
      if ((body[i] != 's' && body[i] != 'h') || (i > 0 && (std::isalnum(static_cast<unsigned char>(body[i - 1])) ||
                                                           body[i - 1] == '_'))) {
        continue;
      }
      size_t j = i + 1;
      while (j < body.size() && std::isdigit(static_cast<unsigned char>(body[j]))) ++j;
      if (j == i + 1 || (j < body.size() && (std::isalnum(static_cast<unsigned char>(body[j])) || body[j] == '_'))) continue;
      const size_t b = std::stoul(body.substr(i + 1, j - i - 1));
      if (b < used.size() && name_of(b)[0] == body[i]) used[b] = true;
    }
    std::ostringstream text;
    text << "static __attribute__((noinline)) void " << name
         << "(char* const* tensors, float* const scratch, int64_t program, int64_t* fault) {\n";
    text << "  (void)tensors;\n  (void)scratch;\n  (void)program;\n  (void)fault;\n";
    for (size_t b = 0; b < used.size(); ++b) {
      if (used[b]) text << "  " << declaration(b) << "\n";
    }
    text << program_ids("  ") << body << "}\n";
    return text.str();
  }

 private:
  void line(const std::string& text) { out_ << indent_ << text << "\n"; }
  void open(const std::string& text) {
    line(text + " {");
    indent_ += "  ";
  }
  void close() {
    indent_.resize(indent_.size() - 2);
    line("}");
  }

  const TileBuffer& buffer(const TileAccess& a) const { return program_.buffers()[a.buffer]; }

  // The element index of access `name` (whose offset is the local o_<name>) at the tile index t.
  std::string element(const TileAccess& a, const std::string& name, const std::vector<std::string>& index) const {
    std::string text = "o_" + name;
    for (size_t d = 0; d < a.sizes.size(); ++d) {
      if (a.strides[d] == 0 || a.sizes[d] == 1) continue;
      text += " + " + index[d] + (a.strides[d] == 1 ? "" : " * " + std::to_string(a.strides[d]));
    }
    return text;
  }

  std::string pointer(const TileAccess& a) const {
    return (buffer(a).space == MemorySpace::kHbm ? "h" : "s") + std::to_string(a.buffer);
  }

  std::string load(const TileAccess& a, const std::string& name, const std::vector<std::string>& index) const {
    const std::string at = pointer(a) + "[" + element(a, name, index) + "]";
    return buffer(a).space == MemorySpace::kHbm ? "float(" + load_expression(buffer(a).dtype, at) + ")" : at;
  }

  // A float value as the destination holds it: stored in its dtype in HBM, rounded to it on chip.
  std::string store(const TileAccess& a, const std::string& name, const std::vector<std::string>& index,
                    const std::string& value) const {
    const std::string at = pointer(a) + "[" + element(a, name, index) + "]";
    const DType dtype = buffer(a).dtype;
    if (buffer(a).space == MemorySpace::kHbm) return at + " = " + store_expression(dtype, value) + ";";
    if (dtype == DType::kBFloat16) return at + " = tn_round_bf16(" + value + ");";
    if (dtype == DType::kFloat16) return at + " = tn_round_f16(" + value + ");";
    if (dtype == DType::kBool) return at + " = float((" + value + ") != 0.0f);";
    if (dtype != DType::kFloat32 && dtype != DType::kFloat64) return at + " = std::trunc(" + value + ");";
    return at + " = " + value + ";";
  }

  void declare_offsets(const TileOp& op) {
    if (op.kind != TileOpKind::kPrint) line("const int64_t o_d = " + op.destination.offset + ";");
    for (size_t k = 0; k < op.sources.size(); ++k) line("const int64_t o_" + std::to_string(k) + " = " + op.sources[k].offset + ";");
  }

  static std::vector<std::string> tile_index(size_t rank) {
    std::vector<std::string> index;
    for (size_t d = 0; d < rank; ++d) index.push_back("t" + std::to_string(d));
    return index;
  }

  // Opens the loops over dims [first, last) of `bounds`' tile; returns how many it opened.
  int open_loops(const TileAccess& bounds, size_t first, size_t last, const std::string& innermost_pragma) {
    int opened = 0;
    for (size_t d = first; d < last; ++d) {
      const std::string t = "t" + std::to_string(d);
      std::string lo = "0", hi = std::to_string(bounds.sizes[d]);
      if (!bounds.lower.empty() && !bounds.lower[d].empty()) lo = "std::max<int64_t>(0, " + bounds.lower[d] + ")";
      if (!bounds.upper.empty() && !bounds.upper[d].empty()) hi = "std::min<int64_t>(" + hi + ", " + bounds.upper[d] + ")";
      if (d + 1 == last && !innermost_pragma.empty()) line(innermost_pragma);
      open("for (int64_t " + t + " = " + lo + "; " + t + " < " + hi + "; ++" + t + ")");
      ++opened;
    }
    return opened;
  }

  // Statements computing the op's expression at the tile index; returns the value's name.
  std::string expression(const TileOp& op, const std::vector<std::string>& index, const std::string& carry = "") {
    for (size_t n = 0; n < op.expression.size(); ++n) {
      const ExpressionNode& node = op.expression[n];
      std::string value;
      if (node.op == "source") {
        value = load(op.sources[node.source], std::to_string(node.source), index);
      } else if (node.op == "literal") {
        value = number(node.literal);
      } else if (node.op == "index") {
        value = "float(" + index.at(node.dim) + ")";
      } else if (node.op == "expression") {
        value = "float(" + node.text + ")";
      } else if (node.op == "carry") {
        value = carry;
      } else {
        std::vector<std::string> arguments;
        for (int a : node.arguments) arguments.push_back("y" + std::to_string(a));
        value = "float(" + pointwise_expression(node.op, arguments, "float") + ")";
      }
      line("const float y" + std::to_string(n) + " = " + value + ";");
    }
    return "y" + std::to_string(op.expression.size() - 1);
  }

  void emit(const TileOp& op) {
    switch (op.kind) {
      case TileOpKind::kLoop:
        open("for (int64_t i" + std::to_string(op.loop_var) + " = 0; i" + std::to_string(op.loop_var) + " < (" +
             op.extent + "); ++i" + std::to_string(op.loop_var) + ")");
        return;
      case TileOpKind::kEndLoop: close(); return;
      default: break;
    }
    open("");
    declare_offsets(op);
    switch (op.kind) {
      case TileOpKind::kPointwise: pointwise(op); break;
      case TileOpKind::kReduce: reduce(op); break;
      case TileOpKind::kMatmul: matmul(op); break;
      case TileOpKind::kScan: scan(op); break;
      case TileOpKind::kMax8: max8(op); break;
      case TileOpKind::kFindIndex8: find_index8(op); break;
      case TileOpKind::kPrint: print(op); break;
      default: break;
    }
    close();
  }

  void pointwise(const TileOp& op) {
    const size_t rank = op.destination.sizes.size();
    const auto index = tile_index(rank);
    const int opened = open_loops(op.destination, 0, rank, "#pragma omp simd");
    const std::string value = expression(op, index);
    line(store(op.destination, "d", index, value));
    for (int k = 0; k < opened; ++k) close();
  }

  static std::string combine(const std::string& reduce_op, const std::string& acc, const std::string& value) {
    if (reduce_op == "add") return acc + " + " + value;
    if (reduce_op == "mul") return acc + " * " + value;
    if (reduce_op == "max") return "(" + acc + " > " + value + " ? " + acc + " : " + value + ")";
    return "(" + acc + " < " + value + " ? " + acc + " : " + value + ")";
  }

  static std::string identity(const std::string& reduce_op) {
    if (reduce_op == "add") return "0.0f";
    if (reduce_op == "mul") return "1.0f";
    return reduce_op == "max" ? "-std::numeric_limits<float>::infinity()" : "std::numeric_limits<float>::infinity()";
  }

  void reduce(const TileOp& op) {
    const TileAccess& source = op.sources[0];
    const size_t rank = source.sizes.size();
    std::vector<bool> folded(rank, false);
    for (int d : op.reduce_dims) folded[d] = true;
    size_t first_folded = rank;
    while (first_folded > 0 && folded[first_folded - 1]) --first_folded;
    bool suffix = true;
    for (size_t d = 0; d < first_folded; ++d) suffix = suffix && !folded[d];
    auto index = tile_index(rank);
    std::vector<std::string> kept_index = index;
    for (size_t d = 0; d < rank; ++d) if (folded[d]) kept_index[d] = "0";
    const std::string at = pointer(op.destination) + "[" + element(op.destination, "d", kept_index) + "]";
    const std::string scaled = op.scale == 1.0 ? "acc" : "acc * " + number(op.scale);
    if (suffix) {
      int opened = open_loops(source, 0, first_folded, "");
      line("float acc = " + identity(op.reduce_op) + ";");
      const char* pragma = op.reduce_op == "add" ? "#pragma omp simd reduction(+:acc)"
                           : op.reduce_op == "mul" ? "#pragma omp simd reduction(*:acc)"
                           : op.reduce_op == "max" ? "#pragma omp simd reduction(max:acc)" : "#pragma omp simd reduction(min:acc)";
      const int inner = open_loops(source, first_folded, rank, pragma);
      const std::string value = expression(op, index);
      line("acc = " + combine(op.reduce_op, "acc", value) + ";");
      for (int k = 0; k < inner; ++k) close();
      const std::string result = op.accumulate ? "float(" + load(op.destination, "d", kept_index) + ") + " + scaled : scaled;
      line(store(op.destination, "d", kept_index, result));
      for (int k = 0; k < opened; ++k) close();
      return;
    }
    // Folded dims in the middle: accumulate in the destination (held as float on chip).
    if (!op.accumulate) {
      TileAccess init = op.destination;
      init.lower.clear();
      init.upper.clear();
      const int opened = open_loops(init, 0, rank, "");
      line(store(op.destination, "d", index, identity(op.reduce_op)));
      for (int k = 0; k < opened; ++k) close();
    }
    const int opened = open_loops(source, 0, rank, "");
    const std::string value = expression(op, index);
    const std::string scaled_value = op.scale == 1.0 ? value : value + " * " + number(op.scale);
    line(store(op.destination, "d", kept_index, combine(op.reduce_op, "float(" + load(op.destination, "d", kept_index) + ")", scaled_value)));
    for (int k = 0; k < opened; ++k) close();
  }

  // The product in register blocks: `rows` rows of the result by `cols` unit-stride columns,
  // accumulated over k in local arrays the compiler keeps in vector registers (fused
  // multiply-adds where the target has them: PSUM accumulates in fp32 either way).
  void matmul(const TileOp& op) {
    const TileAccess &stationary = op.sources[0], &moving = op.sources[1], &dst = op.destination;
    if (buffer(stationary).space == MemorySpace::kHbm || buffer(moving).space == MemorySpace::kHbm ||
        buffer(dst).space == MemorySpace::kHbm) {
      throw std::invalid_argument("tile program: matmul operands must be on chip");
    }
    const int64_t k_size = stationary.sizes[0], m_size = stationary.sizes[1], n_size = moving.sizes[1];
    const std::string d = pointer(dst), s = pointer(stationary), m = pointer(moving);
    const std::string ds0 = std::to_string(dst.strides[0]), ds1 = std::to_string(dst.strides[1]);
    const std::string ss0 = std::to_string(stationary.strides[0]), ss1 = std::to_string(stationary.strides[1]);
    const std::string ms0 = std::to_string(moving.strides[0]), ms1 = std::to_string(moving.strides[1]);
    if (moving.strides[1] == 1 && dst.strides[1] == 1 && m_size % 4 == 0 && n_size % 32 == 0) {
      matmul_microkernel(op, k_size, m_size, n_size);
      return;
    }
    const int64_t rows = m_size % 4 == 0 ? 4 : m_size % 2 == 0 ? 2 : 1;
    int64_t cols = 1;
    for (int64_t c : {64, 32, 16, 8}) {
      if (n_size % c == 0) {
        cols = c;
        break;
      }
    }
    const std::string R = std::to_string(rows), C = std::to_string(cols);
    open("for (int64_t m0 = 0; m0 < " + std::to_string(m_size) + "; m0 += " + R + ")");
    open("for (int64_t n0 = 0; n0 < " + std::to_string(n_size) + "; n0 += " + C + ")");
    line("float acc[" + R + "][" + C + "];");
    open("for (int64_t i = 0; i < " + R + "; ++i)");
    line("#pragma omp simd");
    line("for (int64_t j = 0; j < " + C + "; ++j) acc[i][j] = " +
         (op.accumulate ? d + "[o_d + (m0 + i) * " + ds0 + " + (n0 + j) * " + ds1 + "]" : std::string("0.0f")) + ";");
    close();
    open("for (int64_t k = 0; k < " + std::to_string(k_size) + "; ++k)");
    line("const float* const b = " + m + " + o_1 + k * " + ms0 + " + n0 * " + ms1 + ";");
    open("for (int64_t i = 0; i < " + R + "; ++i)");
    line("const float a = " + s + "[o_0 + k * " + ss0 + " + (m0 + i) * " + ss1 + "];");
    line("#pragma omp simd");
    line("for (int64_t j = 0; j < " + C + "; ++j) acc[i][j] = tn_mac(acc[i][j], a, b[j * " + ms1 + "]);");
    close();
    close();
    open("for (int64_t i = 0; i < " + R + "; ++i)");
    line("#pragma omp simd");
    line("for (int64_t j = 0; j < " + C + "; ++j) " + d + "[o_d + (m0 + i) * " + ds0 + " + (n0 + j) * " + ds1 +
         "] = acc[i][j];");
    close();
    close();
    close();
  }

  // 4 rows by 32 unit-stride columns held in eight 16-lane vectors (tn_v16: AVX-512, AVX2 or
  // plain arrays, by the target) for the whole contraction: each k loads 2 vectors of the moving
  // row and 4 stationary scalars for 8 fused multiply-adds.
  void matmul_microkernel(const TileOp& op, int64_t k_size, int64_t m_size, int64_t n_size) {
    const TileAccess &stationary = op.sources[0], &moving = op.sources[1], &dst = op.destination;
    const std::string d = pointer(dst), s = pointer(stationary), m = pointer(moving);
    const std::string ds0 = std::to_string(dst.strides[0]), ss0 = std::to_string(stationary.strides[0]);
    const std::string ss1 = std::to_string(stationary.strides[1]), ms0 = std::to_string(moving.strides[0]);
    open("for (int64_t m0 = 0; m0 < " + std::to_string(m_size) + "; m0 += 4)");
    open("for (int64_t n0 = 0; n0 < " + std::to_string(n_size) + "; n0 += 32)");
    for (int i = 0; i < 4; ++i) {
      const std::string row = d + " + o_d + (m0 + " + std::to_string(i) + ") * " + ds0 + " + n0";
      for (int j = 0; j < 2; ++j) {
        line("tn_v16 c" + std::to_string(i) + std::to_string(j) + " = " +
             (op.accumulate ? "tn_ld(" + row + " + " + std::to_string(16 * j) + ")" : std::string("tn_zero()")) + ";");
      }
    }
    open("for (int64_t k = 0; k < " + std::to_string(k_size) + "; ++k)");
    line("const float* const b = " + m + " + o_1 + k * " + ms0 + " + n0;");
    line("const tn_v16 b0 = tn_ld(b), b1 = tn_ld(b + 16);");
    line("const float* const a = " + s + " + o_0 + k * " + ss0 + " + m0 * " + ss1 + ";");
    for (int i = 0; i < 4; ++i) {
      const std::string is = std::to_string(i);
      line("{ const tn_v16 a" + is + " = tn_bc(a[" + std::to_string(i) + " * " + ss1 + "]); c" + is + "0 = tn_fma(a" + is +
           ", b0, c" + is + "0); c" + is + "1 = tn_fma(a" + is + ", b1, c" + is + "1); }");
    }
    close();
    for (int i = 0; i < 4; ++i) {
      const std::string row = d + " + o_d + (m0 + " + std::to_string(i) + ") * " + ds0 + " + n0";
      line("tn_st(" + row + ", c" + std::to_string(i) + "0); tn_st(" + row + " + 16, c" + std::to_string(i) + "1);");
    }
    close();
    close();
  }

  void scan(const TileOp& op) {
    const auto index = tile_index(2);
    const int outer = open_loops(op.destination, 0, 1, "");
    line("float carry = " + number(op.initial) + ";");
    const int inner = open_loops(op.destination, 1, 2, "");
    line("carry = " + expression(op, index, "carry") + ";");
    line(store(op.destination, "d", index, "carry"));
    for (int k = 0; k < inner + outer; ++k) close();
  }

  void max8(const TileOp& op) {
    const auto index = tile_index(2);
    const int outer = open_loops(op.destination, 0, 1, "");
    line("float best[8];");
    line("for (int j = 0; j < 8; ++j) best[j] = -std::numeric_limits<float>::infinity();");
    const int inner = open_loops(op.sources[0], 1, 2, "");
    line("float v = " + load(op.sources[0], "0", index) + ";");
    open("if (v > best[7])");
    line("int j = 7;");
    line("for (; j > 0 && best[j - 1] < v; --j) best[j] = best[j - 1];");
    line("best[j] = v;");
    close();
    for (int k = 0; k < inner; ++k) close();
    open("for (int64_t t1 = 0; t1 < 8; ++t1)");
    line(store(op.destination, "d", index, "best[t1]"));
    close();
    for (int k = 0; k < outer; ++k) close();
  }

  void find_index8(const TileOp& op) {
    const auto index = tile_index(2);
    const std::string f = std::to_string(op.sources[0].sizes[1]);
    const int outer = open_loops(op.destination, 0, 1, "");
    line("int64_t chosen[8];");
    open("for (int64_t t1 = 0; t1 < 8; ++t1)");
    line("const float want = " + load(op.sources[1], "1", index) + ";");
    line("int64_t found = -1;");
    open("for (int64_t f = 0; f < " + f + " && found < 0; ++f)");
    line("bool taken = false;");
    line("for (int64_t j = 0; j < t1; ++j) taken = taken || chosen[j] == f;");
    line("if (!taken && " + load(op.sources[0], "0", {"t0", "f"}) + " == want) found = f;");
    close();
    line("chosen[t1] = found;");
    line(store(op.destination, "d", index, "float(found)"));
    close();
    for (int k = 0; k < outer; ++k) close();
  }

  void print(const TileOp& op) {
    const TileAccess& a = op.sources[0];
    const size_t rank = a.sizes.size();
    const auto index = tile_index(rank);
    std::string label;
    for (char c : op.label) label += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    line("std::printf(\"%s\\n\", \"" + label + "\");");
    TileAccess rows = a;
    const int opened = open_loops(rows, 0, rank == 0 ? 0 : rank - 1, "");
    if (rank > 0) {
      open("for (int64_t t" + std::to_string(rank - 1) + " = 0; t" + std::to_string(rank - 1) + " < " +
           std::to_string(a.sizes[rank - 1]) + "; ++t" + std::to_string(rank - 1) + ")");
      line("std::printf(\"%g \", double(" + load(a, "0", index) + "));");
      close();
    }
    line("std::printf(\"\\n\");");
    for (int k = 0; k < opened; ++k) close();
    line("std::fflush(stdout);");
  }

  const TileProgram& program_;
  std::ostringstream out_;
  std::string indent_;
};

}  // namespace

std::string generate_tile_source(const TileProgram& program, const std::string& symbol) {
  std::ostringstream src;
  src << "// Generated by the torchneuron compiler from an NKI kernel.\n#include <cstdio>\n" << generated_prelude();
  src << "#ifdef __FMA__\nstatic inline float tn_mac(float acc, float a, float b) { return __builtin_fmaf(a, b, acc); }\n"
         "#else\nstatic inline float tn_mac(float acc, float a, float b) { return acc + a * b; }\n#endif\n"
         "#if defined(__AVX512F__)\n#include <immintrin.h>\n"
         "struct tn_v16 { __m512 v; };\n"
         "static inline tn_v16 tn_ld(const float* p) { return {_mm512_loadu_ps(p)}; }\n"
         "static inline void tn_st(float* p, tn_v16 x) { _mm512_storeu_ps(p, x.v); }\n"
         "static inline tn_v16 tn_bc(float a) { return {_mm512_set1_ps(a)}; }\n"
         "static inline tn_v16 tn_zero() { return {_mm512_setzero_ps()}; }\n"
         "static inline tn_v16 tn_fma(tn_v16 a, tn_v16 b, tn_v16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }\n"
         "#elif defined(__AVX2__) && defined(__FMA__)\n#include <immintrin.h>\n"
         "struct tn_v16 { __m256 lo, hi; };\n"
         "static inline tn_v16 tn_ld(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }\n"
         "static inline void tn_st(float* p, tn_v16 x) { _mm256_storeu_ps(p, x.lo); _mm256_storeu_ps(p + 8, x.hi); }\n"
         "static inline tn_v16 tn_bc(float a) { return {_mm256_set1_ps(a), _mm256_set1_ps(a)}; }\n"
         "static inline tn_v16 tn_zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }\n"
         "static inline tn_v16 tn_fma(tn_v16 a, tn_v16 b, tn_v16 c) {\n"
         "  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};\n}\n"
         "#else\n"
         "struct tn_v16 { float x[16]; };\n"
         "static inline tn_v16 tn_ld(const float* p) { tn_v16 r; std::memcpy(r.x, p, 64); return r; }\n"
         "static inline void tn_st(float* p, tn_v16 x) { std::memcpy(p, x.x, 64); }\n"
         "static inline tn_v16 tn_bc(float a) { tn_v16 r; for (float& v : r.x) v = a; return r; }\n"
         "static inline tn_v16 tn_zero() { return tn_bc(0.0f); }\n"
         "static inline tn_v16 tn_fma(tn_v16 a, tn_v16 b, tn_v16 c) {\n"
         "  for (int i = 0; i < 16; ++i) c.x[i] = tn_mac(c.x[i], a.x[i], b.x[i]);\n  return c;\n}\n"
         "#endif\n"
         "static inline int64_t tn_checked(float value, int64_t limit, int64_t* fault) {\n"
         "  const int64_t index = static_cast<int64_t>(value);\n"
         "  if (index >= 0 && index < limit) return index;\n"
         "  if (*fault == 0) *fault = index < 0 ? -index : index - limit + 1;\n"
         "  return index < 0 ? 0 : limit - 1;\n}\n";
  src << "\n// Tile program:\n";
  std::istringstream text(program.to_string());
  for (std::string text_line; std::getline(text, text_line);) src << "//   " << text_line << "\n";
  src << "\n" << TileEmitter(program).functions(symbol);
  return src.str();
}

}  // namespace torchneuron::compiler
