// Low-precision matrix products on neuron, with CPU PyTorch's semantics: _scaled_mm (float8
// operands, tensor-wise or row-wise float32 scales, bias, out_dtype, an output scale for a float8
// result), _int_mm (int8 / uint8 times int8 into int32, exact) and _weight_int8pack_mm. _scaled_mm
// and _int_mm run kernels/gemm_lowp's kernels; the rest is composed of native device ops.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/reciprocal.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <sstream>

#include "aten/device/neuron_tensor.h"
#include "kernels/gemm_lowp.h"

namespace torchneuron::aten {
namespace lowp {
namespace {

bool is_float8(c10::ScalarType t) {
  return t == c10::kFloat8_e4m3fn || t == c10::kFloat8_e5m2 || t == c10::kFloat8_e4m3fnuz ||
         t == c10::kFloat8_e5m2fnuz;
}

bool tensorwise(const at::Tensor& a, const at::Tensor& b, const at::Tensor& sa, const at::Tensor& sb) {
  return is_float8(a.scalar_type()) && is_float8(b.scalar_type()) && sa.scalar_type() == c10::kFloat &&
         sb.scalar_type() == c10::kFloat && sa.numel() == 1 && sb.numel() == 1;
}

bool rowwise(const at::Tensor& a, const at::Tensor& b, const at::Tensor& sa, const at::Tensor& sb) {
  return is_float8(a.scalar_type()) && is_float8(b.scalar_type()) && sa.scalar_type() == c10::kFloat &&
         sb.scalar_type() == c10::kFloat && sa.dim() == 2 && sb.dim() == 2 && sa.size(0) == a.size(0) &&
         sa.size(1) == 1 && sb.size(0) == 1 && sb.size(1) == b.size(1) && sa.is_contiguous() && sb.is_contiguous();
}

void check_scaled_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& sa, const at::Tensor& sb) {
  TORCH_CHECK(a.dim() == 2, "mat1 must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "mat_a and mat_b shapes cannot be multiplied (", a.size(0), "x", a.size(1),
              " and ", b.size(0), "x", b.size(1), ")");
  if (tensorwise(a, b, sa, sb) || rowwise(a, b, sa, sb)) return;
  std::ostringstream got;
  got << "Got mat_a.dtype()=" << a.scalar_type() << ", scale_a.dtype()=" << sa.scalar_type()
      << ", scale_a.size()=" << sa.sizes() << ", scale_a.stride()=" << sa.strides()
      << ", mat_b.dtype()=" << b.scalar_type() << ", scale_b.dtype()=" << sb.scalar_type()
      << ", scale_b.size()=" << sb.sizes() << " and scale_b.stride()=" << sb.strides();
  TORCH_CHECK_VALUE(false, "Invalid scaling configuration.\n"
                    "- For TensorWise scaling, a and b should be float8, scales should be float and singletons.\n"
                    "- For RowWise scaling, a and b should be float8, scales should be float, scale_a should be (",
                    a.size(0), ", 1) and scale_b should be (1, ", b.size(1), "), and both should be contiguous.\n",
                    got.str());
}

}  // namespace

namespace {

// A float8 product our kernel takes: e4m3fn / e5m2 operands, a float32 / bfloat16 / float16
// result, no bias or one of n elements.
bool scaled_kernel_suits(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias,
                         c10::ScalarType dtype) {
  const auto kernel_float8 = [](c10::ScalarType t) { return t == c10::kFloat8_e4m3fn || t == c10::kFloat8_e5m2; };
  const bool bias_ok = !bias.has_value() || !bias->defined() || (bias->dim() == 1 && bias->size(0) == b.size(1));
  return kernel_float8(a.scalar_type()) && kernel_float8(b.scalar_type()) && bias_ok &&
         (dtype == c10::kFloat || dtype == c10::kBFloat16 || dtype == c10::kHalf);
}

kernels::LowpOperand lowp_operand(const at::Tensor& t) {
  return {t.data_ptr(), t.size(0) <= 1 ? 0 : t.stride(0), t.size(1) <= 1 ? 0 : t.stride(1)};
}

}  // namespace

// The products of the float8 values summed in float32 (kernels/gemm_lowp.h), then times the
// scales, plus the bias, rounded once to out_dtype. Float8 results and the fnuz formats take
// CPU's formula: each operand widened and multiplied by its scale, the float32 product, the bias,
// a float8 result divided by scale_result, then rounded. use_fast_accum changes nothing.
at::Tensor& scaled_mm_out(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& scale_a,
                          const at::Tensor& scale_b, const std::optional<at::Tensor>& bias,
                          const std::optional<at::Tensor>& scale_result, std::optional<c10::ScalarType> out_dtype,
                          bool /*use_fast_accum*/, at::Tensor& out) {
  check_scaled_mm(self, mat2, scale_a, scale_b);
  check_same_device("_scaled_mm", self.device(), {&mat2, &scale_a, &scale_b, &out});
  const c10::ScalarType dtype = out_dtype.value_or(self.scalar_type());
  TORCH_CHECK(out.scalar_type() == dtype, "_scaled_mm: out has dtype ", out.scalar_type(), ", expected ", dtype);
  if (!scaled_kernel_suits(self, mat2, bias, dtype)) {
    at::Tensor product = at::mm(self.to(c10::kFloat).mul_(scale_a), mat2.to(c10::kFloat).mul_(scale_b));
    if (bias.has_value() && bias->defined()) product.add_(*bias);
    if (is_float8(dtype) && scale_result.has_value() && scale_result->defined()) {
      product.mul_(at::reciprocal(scale_result->to(c10::kFloat)));
    }
    at::native::resize_output(out, {self.size(0), mat2.size(1)});
    return out.copy_(product);
  }
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  if (out.numel() == 0) return out;
  // Scales may be 0-dim CPU tensors; the kernel reads device memory.
  const at::Tensor sa = scale_a.to(self.device()).contiguous(), sb = scale_b.to(self.device()).contiguous();
  const bool has_bias = bias.has_value() && bias->defined();
  const at::Tensor bias_f = has_bias ? bias->to(self.device(), c10::kFloat).contiguous() : at::Tensor();
  const at::Tensor result = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
  kernels::ScaledGemmArgs args;
  args.m = self.size(0), args.n = mat2.size(1), args.k = self.size(1);
  args.a = lowp_operand(self), args.b = lowp_operand(mat2);
  const auto format = [](const at::Tensor& t) {
    return t.scalar_type() == c10::kFloat8_e5m2 ? kernels::Float8Format::kE5M2 : kernels::Float8Format::kE4M3FN;
  };
  args.a_format = format(self), args.b_format = format(mat2);
  args.scale_a = sa.data_ptr<float>(), args.scale_b = sb.data_ptr<float>();
  args.rowwise = rowwise(self, mat2, scale_a, scale_b) && !tensorwise(self, mat2, scale_a, scale_b);
  args.bias = has_bias ? bias_f.data_ptr<float>() : nullptr;
  args.c = result.data_ptr(), args.ldc = result.size(1) <= 1 ? 1 : result.stride(0);
  args.c_dtype = to_kernel_dtype(dtype);
  if (has_bias) {
    enqueue(result, "_scaled_mm", {&self, &mat2, &sa, &sb, &bias_f}, [args] { kernels::scaled_gemm(args); });
  } else {
    enqueue(result, "_scaled_mm", {&self, &mat2, &sa, &sb}, [args] { kernels::scaled_gemm(args); });
  }
  return result.is_same(out) ? out : out.copy_(result);
}

at::Tensor scaled_mm(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& scale_a,
                     const at::Tensor& scale_b, const std::optional<at::Tensor>& bias,
                     const std::optional<at::Tensor>& scale_result, std::optional<c10::ScalarType> out_dtype,
                     bool use_fast_accum) {
  at::Tensor out = at::empty({0}, self.options().dtype(out_dtype.value_or(self.scalar_type())));
  return scaled_mm_out(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum, out);
}

// int8 (or uint8) times int8 into int32, exactly (kernels/gemm_lowp.h: integer multiply-adds,
// wrap-around int32 sums as CPU's).
at::Tensor& int_mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  TORCH_CHECK(self.dim() == 2, "Expected self to be of dimension 2 but got ", self.dim());
  TORCH_CHECK(mat2.dim() == 2, "Expected mat2 to be of dimension 2 but got ", mat2.dim());
  TORCH_CHECK(self.size(1) == mat2.size(0), "int_mm_out: self.size(1) needs to match mat2.size(0) but got ",
              self.size(1), " and ", mat2.size(0));
  TORCH_CHECK(self.scalar_type() == c10::kChar || self.scalar_type() == c10::kByte,
              "int_mm_out: Expected self dtype to be int8 or uint8 but got ", c10::toString(self.scalar_type()));
  TORCH_CHECK(mat2.scalar_type() == c10::kChar, "int_mm_out: Expected mat2 dtype to be int8 but got ",
              c10::toString(mat2.scalar_type()));
  TORCH_CHECK(out.scalar_type() == c10::kInt, "int_mm_out: Expected result dtype to be int32 but got ",
              c10::toString(out.scalar_type()));
  check_same_device("_int_mm", self.device(), {&mat2, &out});
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  if (out.numel() == 0) return out;
  const at::Tensor result = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
  kernels::Int8GemmArgs args;
  args.m = self.size(0), args.n = mat2.size(1), args.k = self.size(1);
  args.a = lowp_operand(self), args.b = lowp_operand(mat2);
  args.a_unsigned = self.scalar_type() == c10::kByte;
  args.c = result.data_ptr<int32_t>(), args.ldc = result.size(1) <= 1 ? 1 : result.stride(0);
  enqueue(result, "_int_mm", {&self, &mat2}, [args] { kernels::int8_gemm(args); });
  return result.is_same(out) ? out : out.copy_(result);
}

at::Tensor int_mm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = at::empty({0}, self.options().dtype(c10::kInt));
  return int_mm_out(self, mat2, out);
}

// x [M, K] (float32 / bfloat16 / float16) times the int8 weight [N, K] transposed, each output
// column times its scale, in float32, rounded to x's dtype.
at::Tensor weight_int8pack_mm(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& scales) {
  TORCH_CHECK(self.dim() == 2, "weight_int8pack_mm: expect A to be 2D tensor.");
  TORCH_CHECK(mat2.dim() == 2 && mat2.scalar_type() == c10::kChar,
              "weight_int8pack_mm: expect B to be 2D int8 tensor.");
  TORCH_CHECK(self.size(1) == mat2.size(1), "weight_int8pack_mm: expect B.size(1) == ", self.size(1));
  TORCH_CHECK(scales.dim() == 1 && scales.size(0) == mat2.size(0),
              "weight_int8pack_mm: expect scales to be 1d tensor with size ", mat2.size(0));
  TORCH_CHECK(self.scalar_type() == c10::kFloat || self.scalar_type() == c10::kBFloat16 ||
                  self.scalar_type() == c10::kHalf,
              "weight_int8pack_mm: expect A to be either 32-bit or 16-bit float tensor.");
  check_same_device("_weight_int8pack_mm", self.device(), {&mat2, &scales});
  at::Tensor product = at::mm(self.to(c10::kFloat), mat2.to(c10::kFloat).t());
  return product.mul_(scales.to(c10::kFloat)).to(self.scalar_type());
}

}  // namespace lowp

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_mm", TORCH_FN(lowp::scaled_mm));
  m.impl("_scaled_mm.out", TORCH_FN(lowp::scaled_mm_out));
  m.impl("_int_mm", TORCH_FN(lowp::int_mm));
  m.impl("_int_mm.out", TORCH_FN(lowp::int_mm_out));
  m.impl("_weight_int8pack_mm", TORCH_FN(lowp::weight_int8pack_mm));
}

}  // namespace torchneuron::aten
