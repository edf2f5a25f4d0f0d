#include "compiler/codegen.h"

#include "compiler/vector_math_source.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace torchneuron::compiler {
namespace {

struct Template {
  int arity;
  const char* expression;  // {0} to {3}: operands in the compute type; {T}: that type
};

// Each formula matches the eager kernel of the same op, so fused and eager results agree.
const std::map<std::string, Template>& templates() {
  static const auto* table = new std::map<std::string, Template>{
      {"identity", {1, "{0}"}},
      {"add", {2, "{0} + {1}"}},
      {"sub", {2, "{0} - {1}"}},
      {"mul", {2, "{0} * {1}"}},
      {"div", {2, "{0} / {1}"}},
      {"neg", {1, "-{0}"}},
      {"abs", {1, "tn_abs({0})"}},
      {"reciprocal", {1, "{T}(1) / {0}"}},
      {"sqrt", {1, "std::sqrt({0})"}},
      {"rsqrt", {1, "{T}(1) / std::sqrt({0})"}},
      {"exp", {1, "tn_exp({0})"}},
      {"exp2", {1, "std::exp2({0})"}},
      {"expm1", {1, "std::expm1({0})"}},
      {"log", {1, "tn_log({0})"}},
      {"log1p", {1, "tn_log1p({0})"}},
      {"log2", {1, "std::log2({0})"}},
      {"log10", {1, "std::log10({0})"}},
      {"sin", {1, "std::sin({0})"}},
      {"cos", {1, "std::cos({0})"}},
      {"tan", {1, "std::tan({0})"}},
      {"tanh", {1, "tn_tanh({0})"}},
      {"sinh", {1, "std::sinh({0})"}},
      {"cosh", {1, "std::cosh({0})"}},
      {"asin", {1, "std::asin({0})"}},
      {"acos", {1, "std::acos({0})"}},
      {"atan", {1, "std::atan({0})"}},
      {"erf", {1, "tn_erf({0})"}},
      {"erfc", {1, "std::erfc({0})"}},
      {"floor", {1, "std::floor({0})"}},
      {"ceil", {1, "std::ceil({0})"}},
      {"trunc", {1, "std::trunc({0})"}},
      {"round", {1, "std::nearbyint({0})"}},
      {"sign", {1, "{T}(({T}(0) < {0}) - ({0} < {T}(0)))"}},
      {"sigmoid", {1, "{T}(1) / ({T}(1) + tn_exp(-{0}))"}},
      {"relu", {1, "tn_relu({0})"}},
      {"silu", {1, "{0} * ({T}(1) / ({T}(1) + tn_exp(-{0})))"}},
      {"gelu", {1, "{0} * tn_gelu_cdf({0})"}},
      // As eager mode computes it: x sigmoid(2y) for 0.5 x (1 + tanh(y)).
      {"gelu_tanh", {1, "{0} / ({T}(1) + tn_exp({T}(-2) * ({T}(0.79788456080286535588) * ({0} + {T}(0.044715) * {0} * {0} * {0}))))"}},
      {"pow", {2, "tn_pow({0}, {1})"}},
      {"maximum", {2, "tn_maximum({0}, {1})"}},
      {"minimum", {2, "tn_minimum({0}, {1})"}},
      {"clamp_min", {2, "tn_clamp_min({0}, {1})"}},
      {"clamp_max", {2, "tn_clamp_max({0}, {1})"}},
      {"eq", {2, "{0} == {1}"}},
      {"ne", {2, "{0} != {1}"}},
      {"lt", {2, "{0} < {1}"}},
      {"le", {2, "{0} <= {1}"}},
      {"gt", {2, "{0} > {1}"}},
      {"ge", {2, "{0} >= {1}"}},
      {"logical_not", {1, "!({0} != {T}(0))"}},
      {"logical_and", {2, "({0} != {T}(0)) && ({1} != {T}(0))"}},
      {"logical_or", {2, "({0} != {T}(0)) || ({1} != {T}(0))"}},
      {"where", {3, "({0} != {T}(0) ? {1} : {2})"}},
      // Whole, with the value as a literal {3}: eager mode's formula in its order of operations
      // (the decompositions compute value * (t1 / t2), and under emulate_precision_casts would
      // round each of three steps where eager rounds once).
      {"addcmul", {4, "{0} + {3} * {1} * {2}"}},
      {"addcdiv", {4, "{0} + {3} * {1} / {2}"}},
      {"threshold_backward", {3, "({1} <= {2} ? {T}(0) : {0})"}},
      {"sigmoid_backward", {2, "{0} * ({T}(1) - {1}) * {1}"}},
      {"tanh_backward", {2, "{0} * ({T}(1) - {1} * {1})"}},
      {"silu_backward", {2, "tn_silu_backward({0}, {1})"}},
      {"gelu_backward", {2, "tn_gelu_backward({0}, {1})"}},
  };
  return *table;
}

const char* kPrelude = R"PRELUDE(
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

inline float tn_bits_float(uint32_t bits) { float f; std::memcpy(&f, &bits, 4); return f; }
inline uint32_t tn_float_bits(float f) { uint32_t bits; std::memcpy(&bits, &f, 4); return bits; }

inline float tn_load_bf16(uint16_t h) { return tn_bits_float(static_cast<uint32_t>(h) << 16); }
inline uint16_t tn_store_bf16(float value) {
  const uint32_t raw = tn_float_bits(value);
  if ((raw & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return static_cast<uint16_t>((raw + 0x7fffu + ((raw >> 16) & 1u)) >> 16);
}

inline float tn_load_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return tn_bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return tn_bits_float(sign);
    const float value = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign != 0u ? -value : value;
  }
  return tn_bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}
inline uint16_t tn_store_f16(float value) {
  const uint32_t raw = tn_float_bits(value);
  const uint32_t sign = (raw >> 16) & 0x8000u;
  uint32_t magnitude = raw & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (magnitude >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {
    const float shifted = tn_bits_float(magnitude) + 0.5f;
    return static_cast<uint16_t>(sign | (tn_float_bits(shifted) - 0x3f000000u));
  }
  magnitude += 0xc8000fffu + ((magnitude >> 13) & 1u);
  return static_cast<uint16_t>(sign | (magnitude >> 13));
}
// Rounds a float through a half type, as an eager op storing its result would.
inline float tn_round_bf16(float value) { return tn_load_bf16(tn_store_bf16(value)); }
inline float tn_round_f16(float value) { return tn_load_f16(tn_store_f16(value)); }

template <typename T> inline T tn_abs(T x) { if constexpr (std::is_floating_point_v<T>) return std::fabs(x); else return x < 0 ? -x : x; }
// As eager relu: NaN and -0.0 pass through.
template <typename T> inline T tn_relu(T x) { return x < T(0) ? T(0) : x; }
// NaN-propagating, as selects (no branches) so that loops over them vectorize.
template <typename T> inline T tn_maximum(T a, T b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); }
template <typename T> inline T tn_minimum(T a, T b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }
// The identities of max and min (infinities where the type has them), typed by an argument.
template <typename T> inline T tn_lowest(T) {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
}
template <typename T> inline T tn_highest(T) {
  return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
}
template <typename T> inline T tn_clamp_min(T x, T lo) {
  if constexpr (std::is_floating_point_v<T>) { if (std::isnan(x)) return x; }
  return x < lo ? lo : x;
}
template <typename T> inline T tn_clamp_max(T x, T hi) {
  if constexpr (std::is_floating_point_v<T>) { if (std::isnan(x)) return x; }
  return x > hi ? hi : x;
}
// Integer powers as CPU PyTorch computes them: by repeated squaring, wrapping on overflow (in
// unsigned arithmetic, at least int wide); a negative exponent gives 1 for a base of 1, -1 or 1
// for -1 by the exponent's parity, and 0 otherwise. std::pow went through double: 0 ** -1 came
// out as the lowest int64, and powers past 2^53 lost their low digits.
template <typename A, typename B> inline auto tn_pow(A base, B exponent) {
  if constexpr (std::is_floating_point_v<A> || std::is_floating_point_v<B>) {
    return std::pow(base, exponent);
  } else {
    using T = std::common_type_t<A, B>;
    if constexpr (std::is_signed_v<T>) {
      if (exponent < 0) return base == 1 ? T(1) : base == -1 ? T(exponent % 2 == 0 ? 1 : -1) : T(0);
    }
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    U result = 1, square = static_cast<U>(static_cast<T>(base));
    for (U e = static_cast<U>(static_cast<T>(exponent)); e != 0; e >>= 1) {
      if (e & 1u) result *= square;
      square *= square;
    }
    return static_cast<T>(result);
  }
}
inline float tn_exp(float x) { return torchneuron::kernels::vector_exp(x); }
inline double tn_exp(double x) { return std::exp(x); }
inline float tn_erf(float x) { return torchneuron::kernels::vector_erf(x); }
inline double tn_erf(double x) { return std::erf(x); }
template <typename T> inline T tn_log(T x) { return torchneuron::kernels::log_of(x); }
template <typename T> inline T tn_log1p(T x) { return torchneuron::kernels::log1p_of(x); }
template <typename T> inline T tn_gelu_cdf(T x) { return torchneuron::kernels::gelu_cdf_of(x); }
template <typename T> inline T tn_tanh(T x) { return torchneuron::kernels::tanh_of(x); }

template <typename T> inline T tn_silu_backward(T grad, T x) {
  const T s = T(1) / (T(1) + tn_exp(-x));
  return grad * s * (T(1) + x * (T(1) - s));
}
template <typename T> inline T tn_gelu_backward(T grad, T x) { return torchneuron::kernels::gelu_backward_of(grad, x); }

}  // namespace
)PRELUDE";

const char* compute_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16: return "float";
    case DType::kFloat64: return "double";
    case DType::kBool: return "bool";
    default: return "int64_t";
  }
}

// Bools are stored as bytes (0 or 1) and read back with != 0: GCC does not vectorize loops
// that load the C++ bool type.
const char* storage_type(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "uint8_t";
    case DType::kUInt8: return "uint8_t";
    case DType::kInt8: return "int8_t";
    case DType::kInt32: return "int32_t";
    case DType::kInt64: return "int64_t";
    case DType::kFloat16:
    case DType::kBFloat16: return "uint16_t";
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
  }
  return "float";
}

std::string load_expression(DType dtype, const std::string& element) {
  if (dtype == DType::kBFloat16) return "tn_load_bf16(" + element + ")";
  if (dtype == DType::kFloat16) return "tn_load_f16(" + element + ")";
  if (dtype == DType::kBool) return "(" + element + " != 0)";
  return std::string(compute_type(dtype)) + "(" + element + ")";
}

std::string store_expression(DType dtype, const std::string& value) {
  if (dtype == DType::kBFloat16) return "tn_store_bf16(" + value + ")";
  if (dtype == DType::kFloat16) return "tn_store_f16(" + value + ")";
  return std::string(storage_type(dtype)) + "(" + value + ")";
}

std::string literal(double value, DType compute) {
  const std::string type = compute_type(compute);
  if (std::isnan(value)) return "std::numeric_limits<" + type + ">::quiet_NaN()";
  if (std::isinf(value)) return std::string(value > 0 ? "" : "-") + "std::numeric_limits<" + type + ">::infinity()";
  std::ostringstream text;
  text.precision(17);
  text << value;
  return type + "(" + text.str() + ")";
}

// A value computed in float for a half-precision dtype, rounded as an eager op's stored result is.
std::string rounded(DType dtype, const std::string& value) {
  if (dtype == DType::kBFloat16) return "tn_round_bf16(" + value + ")";
  if (dtype == DType::kFloat16) return "tn_round_f16(" + value + ")";
  return value;
}

// A node's value as a kernel keeps it: rounded to a half-precision dtype when the graph rounds
// intermediates, when the node converts to that dtype from another, or when it is a graph
// output. A graph output (an activation saved for the backward) is used rounded here too, so
// that the backward, recomputing from its saved copy, gets the values the forward computed.
std::string kept(const Graph& graph, const Node& node, const std::string& value) {
  const Value& out = graph.values()[node.outputs[0]];
  const DType dtype = out.dtype;
  bool round = graph.round_intermediates() || out.graph_output;
  if (!round && node.op == "identity" && node.operands[0].is_value()) {
    round = graph.values()[node.operands[0].value].dtype != dtype;
  }
  return round ? rounded(dtype, value) : value;
}

std::string expand(const std::string& pattern, const std::vector<std::string>& operands, const std::string& type) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '{' && i + 2 < pattern.size() && pattern[i + 2] == '}') {
      const char key = pattern[i + 1];
      out += key == 'T' ? type : "(" + operands.at(key - '0') + ")";
      i += 2;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// Whether operand k of a pointwise op is compared (its value decides a boolean).
bool compares_operand(const std::string& op, size_t k) {
  static const std::set<std::string> comparisons{"eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and",
                                                 "logical_or"};
  return comparisons.count(op) > 0 || (op == "threshold_backward" && k == 1);
}

// The statement computing a pointwise node's value v<id>, kept as kept() decides.
std::string node_line(const Graph& graph, const Node& node, const std::string& indent) {
  const Template& t = templates().at(node.op);
  const std::string type = compute_type(node.compute);
  std::vector<std::string> operands;
  // As in eager mode, add and sub round a literal to a half-precision compute dtype first;
  // mul and div use it in float.
  const bool round_literal = (node.op == "add" || node.op == "sub") &&
                             (node.compute == DType::kBFloat16 || node.compute == DType::kFloat16);
  for (size_t k = 0; k < node.operands.size(); ++k) {
    const Operand& o = node.operands[k];
    std::string text = o.is_value() ? type + "(v" + std::to_string(o.value) + ")" : literal(o.literal, node.compute);
    // A comparison sees half-precision values as stored: a value recomputed here in float must
    // still equal its rounded copy read from memory (amax's backward compares x with max(x)).
    if (o.is_value() && !graph.round_intermediates() && compares_operand(node.op, k)) {
      text = rounded(graph.values()[o.value].dtype, text);
    }
    if (!o.is_value() && round_literal) {
      text = std::string(node.compute == DType::kBFloat16 ? "tn_round_bf16(" : "tn_round_f16(") + text + ")";
    }
    operands.push_back(text);
  }
  const Value& out = graph.values()[node.outputs[0]];
  return indent + "const " + compute_type(out.dtype) + " v" + std::to_string(out.id) + " = " +
         kept(graph, node, std::string(compute_type(out.dtype)) + "(" + expand(t.expression, operands, type) + ")") + ";\n";
}

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

// `loop` (a unit-stride loop over `index` reading operand k, for k in `flags`, as
// "(b<k> ? p<k>[0] : p<k>[index])") once per combination of those broadcast flags, each with its
// reads fixed: a select between the two addresses inside the loop keeps the compiler from
// vectorizing it (a bias add ran 5-10x slower than eager mode's). Up to 3 flags (8 copies);
// beyond, the loop keeps its selects.
std::string unswitch_broadcasts(const std::string& loop, const std::vector<int>& flags, const std::string& index,
                                const std::string& indent) {
  if (flags.empty() || flags.size() > 3) return loop;
  std::string out;
  for (int mask = 0; mask < (1 << flags.size()); ++mask) {
    std::string condition, copy = loop;
    for (size_t i = 0; i < flags.size(); ++i) {
      const std::string k = std::to_string(flags[i]);
      const bool broadcast = (mask >> i) & 1;
      condition += (i == 0 ? "" : " && ") + std::string(broadcast ? "b" : "!b") + k;
      const std::string select = "(b" + k + " ? p" + k + "[0] : p" + k + "[" + index + "])";
      const std::string read = "p" + k + "[" + (broadcast ? std::string("0") : index) + "]";
      for (size_t at = copy.find(select); at != std::string::npos; at = copy.find(select, at + read.size())) {
        copy.replace(at, select.size(), read);
      }
    }
    out += indent + (mask == 0 ? "if (" : "} else if (") + condition + ") {\n" + copy;
  }
  return out + indent + "}\n";
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

// A reduction kernel's plan: which loop over the row computes each full node, when each row
// value becomes known, and which operands are read per element ("full") or once per row.
struct RowPlan {
  std::map<int, int> made_by;  // value made in the kernel -> node index
  std::map<int, int> loop;     // full value -> the first loop over the row that can compute it
  std::map<int, int> reduction_loop;  // reduction node -> the loop that accumulates it
  std::map<int, int> ready;    // row value -> loops finished before it is known
  int final_loop = 0;          // the last loop, which also stores the full outputs
};

bool is_full(const Graph& graph, const Kernel& kernel, int value) {
  return graph.values()[value].shape == kernel.shape && graph.values()[value].producer >= 0 &&
         graph.nodes()[graph.values()[value].producer].kind != NodeKind::kReduction;
}

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

// Ops worth computing once per element and keeping rather than recomputing in a later loop.
bool costly(const std::string& op) {
  static const std::set<std::string> ops{"exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos",
                                         "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "erf", "erfc",
                                         "sigmoid", "silu", "gelu", "gelu_tanh", "pow", "silu_backward", "gelu_backward"};
  return ops.count(op) > 0;
}

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

constexpr int kRowBlock = 8;  // rows a column kernel's float sums add before a double fold

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

}  // namespace

bool supports_pointwise(const std::string& op, int arity) {
  const auto it = templates().find(op);
  return it != templates().end() && it->second.arity == arity;
}

std::string generate_source(const Graph& graph, const Program& program) {
  std::ostringstream src;
  src << "// Generated by the torchneuron compiler.\n" << kVectorMathSource << kPrelude << "\n// Graph:\n";
  std::istringstream text(graph.to_string());
  for (std::string line; std::getline(text, line);) src << "//   " << line << "\n";
  for (const Kernel& kernel : program.kernels) {
    if (kernel.reduce_dims.empty()) {
      src << "\n" << kernel_source(graph, kernel);
    } else if (folds_outer_dims(kernel.reduce_dims, static_cast<int>(kernel.shape.size()))) {
      src << "\n" << column_kernel_source(graph, kernel);
    } else {
      src << "\n" << reduction_kernel_source(graph, kernel);
    }
  }
  return src.str();
}

}  // namespace torchneuron::compiler
