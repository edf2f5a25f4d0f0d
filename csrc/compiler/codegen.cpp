#include "compiler/codegen.h"

#include "compiler/vector_math_source.h"

#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/codegen_common.h"

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
      // NKI's bitwise ops on integer values held as floats: their 32-bit two's-complement pattern
      // (through int64: uint32 values pass 2^31). Inline, so the prelude of other kernels is unchanged.
      {"bits_and", {2, "{T}(static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>({0})) & static_cast<uint32_t>(static_cast<int64_t>({1}))))"}},
      {"bits_or", {2, "{T}(static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>({0})) | static_cast<uint32_t>(static_cast<int64_t>({1}))))"}},
      {"bits_xor", {2, "{T}(static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>({0})) ^ static_cast<uint32_t>(static_cast<int64_t>({1}))))"}},
      {"bits_not", {1, "{T}(static_cast<int32_t>(~static_cast<uint32_t>(static_cast<int64_t>({0}))))"}},
      {"bits_shl", {2, "{T}(static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>({0})) << (static_cast<int32_t>({1}) & 31)))"}},
      {"bits_shr", {2, "{T}(static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>({0}))) >> (static_cast<int32_t>({1}) & 31))"}},
      {"bits_shr_logical", {2, "{T}(static_cast<uint32_t>(static_cast<int64_t>({0})) >> (static_cast<int32_t>({1}) & 31))"}},
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

}  // namespace

namespace codegen_detail {

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

namespace {

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

}  // namespace

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

std::string expand_template(const std::string& pattern, const std::vector<std::string>& operands, const std::string& type) {
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

namespace {

// Whether operand k of a pointwise op is compared (its value decides a boolean).
bool compares_operand(const std::string& op, size_t k) {
  static const std::set<std::string> comparisons{"eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and",
                                                 "logical_or"};
  return comparisons.count(op) > 0 || (op == "threshold_backward" && k == 1);
}

}  // namespace

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
         kept(graph, node, std::string(compute_type(out.dtype)) + "(" + expand_template(t.expression, operands, type) + ")") + ";\n";
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

}  // namespace codegen_detail

using codegen_detail::column_kernel_source;
using codegen_detail::kernel_source;
using codegen_detail::reduction_kernel_source;

bool supports_pointwise(const std::string& op, int arity) {
  const auto it = templates().find(op);
  return it != templates().end() && it->second.arity == arity;
}

std::string generated_prelude() { return std::string(kVectorMathSource) + kPrelude; }

std::string pointwise_expression(const std::string& op, const std::vector<std::string>& operands, const std::string& type) {
  const Template& t = templates().at(op);
  if (static_cast<int>(operands.size()) != t.arity) {
    throw std::out_of_range("pointwise op " + op + " takes " + std::to_string(t.arity) + " operands");
  }
  return codegen_detail::expand_template(t.expression, operands, type);
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
