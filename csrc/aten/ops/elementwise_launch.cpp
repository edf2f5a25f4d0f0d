#include "aten/ops/elementwise_launch.h"

#include <ATen/Dispatch.h>
#include <ATen/ScalarOps.h>
#include <c10/util/TypeCast.h>

#include <cstring>

#include "aten/ops/unsigned_dtypes.h"
#include "kernels/activation.h"

namespace torchneuron::aten {

using kernels::BinaryOp;
using kernels::OpScalar;
using kernels::TernaryOp;
using kernels::UnaryOp;

namespace {

// Writes a host scalar into `bytes` as `dtype`; TensorIterator leaves CPU scalars unpromoted.
// The conversion is the unchecked cast CPU PyTorch applies to a wrapped number: 100000 in
// float16 is inf and 1000 in uint8 is 232, where Scalar::to would raise.
void store_scalar(const c10::Scalar& value, c10::ScalarType dtype, unsigned char* bytes) {
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(c10::kHalf, c10::kBFloat16, c10::kBool, dtype, "store_scalar", [&] {
    const scalar_t typed = value.isComplex()         ? c10::convert<scalar_t>(value.toComplexDouble())
                           : value.isFloatingPoint() ? c10::convert<scalar_t>(value.toDouble())
                           : value.isBoolean()       ? c10::convert<scalar_t>(value.toBool())
                                                     : c10::convert<scalar_t>(value.toLong());
    std::memcpy(bytes, &typed, sizeof(scalar_t));
  });
}

// The value of a CPU scalar tensor, read from its memory (Tensor::item() goes through the
// dispatcher, which costs more than a small op's whole launch).
c10::Scalar host_scalar_value(const at::TensorBase& tensor) {
  c10::Scalar value;
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(c10::kHalf, c10::kBFloat16, c10::kBool, tensor.scalar_type(), "host_scalar_value", [&] {
    value = c10::Scalar(*static_cast<const scalar_t*>(tensor.const_data_ptr()));
  });
  return value;
}

kernels::DType real_dtype(kernels::DType complex) {
  return complex == kernels::DType::kComplex128 ? kernels::DType::kFloat64 : kernels::DType::kFloat32;
}

}  // namespace

namespace {

// to_args, with uint16/32/64 operands taken when `allow_unsigned` (the caller converts them or
// maps them onto their signed twin before any kernel computes on them).
bool to_args_impl(const at::TensorIteratorBase& iter, kernels::ElementwiseArgs& args, c10::ScalarType scalar_dtype,
                  bool allow_complex, bool allow_unsigned) {
  const int ndim = iter.ndim();
  const int ntensors = iter.ntensors();
  if (ndim > kernels::kMaxDims || ntensors > kernels::kMaxOperands) return false;
  args.ndim = ndim;
  args.num_operands = ntensors;
  const at::IntArrayRef shape = iter.shape();  // innermost first
  for (int d = 0; d < ndim; ++d) args.sizes[d] = shape[ndim - 1 - d];
  for (int k = 0; k < ntensors; ++k) {
    const bool host_scalar = iter.device(k).type() != c10::DeviceType::PrivateUse1 && iter.is_cpu_scalar(k);
    const c10::ScalarType dtype = host_scalar && scalar_dtype != c10::ScalarType::Undefined ? scalar_dtype : iter.dtype(k);
    const bool unsigned_ok = allow_unsigned && !host_scalar && is_wide_unsigned(dtype);
    if (!(has_kernel_dtype(dtype) || unsigned_ok) ||
        (!allow_complex && (c10::isComplexType(dtype) || c10::isComplexType(iter.dtype(k))))) {
      return false;
    }
    args.dtypes[k] = to_kernel_dtype(dtype);
    const at::IntArrayRef strides = iter.strides(k);
    for (int d = 0; d < ndim; ++d) args.strides[k][d] = strides[ndim - 1 - d];
    if (iter.device(k).type() == c10::DeviceType::PrivateUse1) {
      args.data[k] = static_cast<char*>(iter.data_ptr(k));
    } else if (host_scalar) {
      // The host scalar is read now; its memory may be gone when the kernel runs.
      args.is_scalar[k] = true;
      store_scalar(host_scalar_value(iter.tensor_base(k)), dtype, args.scalar_bytes[k].data());
      for (int d = 0; d < ndim; ++d) args.strides[k][d] = 0;
    } else {
      return false;
    }
  }
  return true;
}

// Ops whose results are the same bits on an unsigned type and on its signed twin.
bool bits_agnostic(UnaryOp op) {
  switch (op) {
    case UnaryOp::kFloor:
    case UnaryOp::kCeil:
    case UnaryOp::kRound:
    case UnaryOp::kTrunc:
    case UnaryOp::kBitwiseNot:
    case UnaryOp::kLogicalNot:
    case UnaryOp::kIsNan:
    case UnaryOp::kIsInf:
    case UnaryOp::kIsFinite:
      return true;
    default:
      return false;
  }
}

// Not add and sub: CPU PyTorch has no uint16/32/64 kernel for them (launch_binary raises its
// NotImplementedError).
bool bits_agnostic(BinaryOp op) {
  switch (op) {
    case BinaryOp::kMul:
    case BinaryOp::kEq:
    case BinaryOp::kNe:
    case BinaryOp::kLogicalAnd:
    case BinaryOp::kLogicalOr:
    case BinaryOp::kLogicalXor:
    case BinaryOp::kBitwiseAnd:
    case BinaryOp::kBitwiseOr:
    case BinaryOp::kBitwiseXor:
      return true;
    default:
      return false;
  }
}

// Where an op computes in an unsigned dtype, its operands of that dtype become the signed
// twin's (two's complement: the same bits for the ops above). Operands of another dtype stay,
// for with_dtypes to convert by value.
kernels::DType as_twin(kernels::ElementwiseArgs& args, c10::ScalarType unsigned_type) {
  const kernels::DType from = to_kernel_dtype(unsigned_type);
  const kernels::DType twin = to_kernel_dtype(signed_twin(unsigned_type));
  for (int k = 0; k < args.num_operands; ++k) {
    if (args.dtypes[k] == from) args.dtypes[k] = twin;
  }
  return twin;
}

}  // namespace

bool to_args(const at::TensorIteratorBase& iter, kernels::ElementwiseArgs& args, c10::ScalarType scalar_dtype,
             bool allow_complex) {
  return to_args_impl(iter, args, scalar_dtype, allow_complex, false);
}

bool to_args_converting(const at::TensorIteratorBase& iter, kernels::ElementwiseArgs& args,
                        c10::ScalarType scalar_dtype) {
  return to_args_impl(iter, args, scalar_dtype, false, true);
}

OpScalar to_op_scalar(const c10::Scalar& value) {
  OpScalar scalar;
  scalar.real = value.toDouble();
  scalar.integer = value.isFloatingPoint() ? static_cast<int64_t>(scalar.real) : value.toLong();
  return scalar;
}

bool launch_unary(at::TensorIteratorBase& iter, UnaryOp requested, const char* name, bool bool_output) {
  // An unsigned value's sign bit is never set: signbit is then isinf's constant false.
  const UnaryOp op = requested == UnaryOp::kSignbit && is_wide_unsigned(iter.dtype(1)) ? UnaryOp::kIsInf : requested;
  kernels::ElementwiseArgs args;
  if (!to_args_impl(iter, args, c10::ScalarType::Undefined, true, true)) return false;
  const bool to_real = kernels::is_complex(args.dtypes[1]) && kernels::complex_to_real(op);
  const c10::ScalarType compute = bool_output ? iter.dtype(1) : iter.dtype(0);
  if (is_wide_unsigned(compute)) {
    // An unsigned input is converted where the op computes in another dtype (acos of uint16
    // in float32); in its own dtype only the ops that do not see the sign bit run.
    if (!bits_agnostic(op) || (!bool_output && iter.dtype(1) != compute)) return false;
    as_twin(args, compute);
  }
  const kernels::DType input = bool_output || to_real ? args.dtypes[1] : args.dtypes[0];
  const kernels::DType output = bool_output ? kernels::DType::kBool : to_real ? real_dtype(input) : input;
  if (!kernels::unary_supported(op, input)) return false;
  launch(iter, name, args, [op, input, output](const kernels::ElementwiseArgs& a) {
    kernels::with_dtypes(a, input, output, 1, [op](const kernels::ElementwiseArgs& b) { kernels::unary(op, b); });
  });
  return true;
}

namespace {

// CPU PyTorch multiplies and divides a half-precision tensor by a Python scalar in float,
// without rounding the scalar to the tensor's dtype first (add and sub do round it).
bool launch_half_scaling(at::TensorIteratorBase& iter, BinaryOp op, const char* name, const kernels::ElementwiseArgs& args,
                         kernels::DType dtype) {
  if ((op != BinaryOp::kMul && op != BinaryOp::kDiv) ||
      (dtype != kernels::DType::kBFloat16 && dtype != kernels::DType::kFloat16)) {
    return false;
  }
  const int scalar = args.is_scalar[2] ? 2 : (op == BinaryOp::kMul && args.is_scalar[1] ? 1 : -1);
  if (scalar < 0 || args.is_scalar[3 - scalar]) return false;
  const double value = host_scalar_value(iter.tensor_base(scalar)).toDouble();
  kernels::ElementwiseArgs unary = args;
  unary.num_operands = 2;
  const int tensor = 3 - scalar;
  unary.data[1] = args.data[tensor];
  unary.strides[1] = args.strides[tensor];
  unary.dtypes[1] = args.dtypes[tensor];
  unary.is_scalar[1] = false;
  const kernels::ActivationOp kind = op == BinaryOp::kMul ? kernels::ActivationOp::kScale : kernels::ActivationOp::kDivideBy;
  launch(iter, name, unary, [kind, value, dtype](const kernels::ElementwiseArgs& a) {
    kernels::with_dtypes(a, dtype, dtype, 1, [&](const kernels::ElementwiseArgs& b) {
      kernels::activation(kind, b, kernels::ActivationParams{value});
    });
  });
  return true;
}

}  // namespace

bool launch_binary(at::TensorIteratorBase& iter, BinaryOp op, const char* name, bool bool_output, OpScalar alpha) {
  kernels::ElementwiseArgs args;
  const c10::ScalarType common = iter.common_dtype();
  kernels::DType input;
  if (is_wide_unsigned(common)) {
    TORCH_CHECK_NOT_IMPLEMENTED(op != BinaryOp::kAdd && op != BinaryOp::kSub, "\"add_stub\" not implemented for '",
                                common, "'");  // as on CPU
    // In the unsigned dtype itself: the ops whose bits agree on the signed twin, written to a
    // result of that dtype (a wider one would need zero extension, not the twin's sign).
    if (!bits_agnostic(op) || (!bool_output && iter.dtype(0) != common) ||
        !to_args_impl(iter, args, signed_twin(common), true, true)) {
      return false;
    }
    input = as_twin(args, common);
  } else {
    if (!has_kernel_dtype(common) || !to_args_impl(iter, args, common, true, true)) return false;
    input = to_kernel_dtype(common);
  }
  const kernels::DType output = bool_output ? kernels::DType::kBool : input;
  if (!kernels::binary_supported(op, input)) return false;
  if (!bool_output && launch_half_scaling(iter, op, name, args, input)) return true;
  launch(iter, name, args, [op, alpha, input, output](const kernels::ElementwiseArgs& a) {
    kernels::with_dtypes(a, input, output, 1, [op, alpha](const kernels::ElementwiseArgs& b) { kernels::binary(op, b, alpha); });
  });
  return true;
}

bool launch_ternary(at::TensorIteratorBase& iter, TernaryOp op, const char* name, OpScalar alpha) {
  kernels::ElementwiseArgs args;
  const bool where = op == TernaryOp::kWhere;
  const c10::ScalarType type = iter.dtype(0);
  if (is_wide_unsigned(type)) {
    // where moves elements: an unsigned result and its like operands as the signed twin.
    if (!where || iter.dtype(2) != type || iter.dtype(3) != type ||
        !to_args_impl(iter, args, signed_twin(type), true, true)) {
      return false;
    }
    as_twin(args, type);
  } else if (!to_args(iter, args, type, where)) {
    return false;
  }
  if (where && args.dtypes[1] != kernels::DType::kBool) return false;
  const kernels::DType dtype = args.dtypes[0];
  if (!kernels::ternary_supported(op, dtype)) return false;
  launch(iter, name, args, [op, alpha, dtype, where](const kernels::ElementwiseArgs& a) {
    kernels::with_dtypes(a, dtype, dtype, where ? 2 : 1,
                         [op, alpha](const kernels::ElementwiseArgs& b) { kernels::ternary(op, b, alpha); });
  });
  return true;
}

at::Tensor wrapped(const c10::Scalar& value) {
  at::Tensor tensor = c10::scalar_to_tensor(value);
  tensor.unsafeGetTensorImpl()->set_wrapped_number(true);
  return tensor;
}

}  // namespace torchneuron::aten
