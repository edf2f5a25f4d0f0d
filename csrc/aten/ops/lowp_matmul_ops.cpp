// Low-precision matrix products on neuron, with CPU PyTorch's semantics: _scaled_mm (float8
// operands, tensor-wise or row-wise float32 scales, bias, out_dtype, an output scale for a float8
// result), _int_mm (int8 / uint8 times int8 into int32, exact) and _weight_int8pack_mm. Each is
// composed of native device ops: the operands widened and scaled, the float32 GEMM, the epilogue.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/reciprocal.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <sstream>

#include "aten/device/neuron_tensor.h"

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

// CPU's formula: each operand widened to float32 and multiplied by its scale (a scalar, or one per
// row of a / column of b), the float32 product, the bias added, a float8 result divided by
// scale_result, then rounded to out_dtype. use_fast_accum changes nothing (float32 accumulation).
at::Tensor& scaled_mm_out(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& scale_a,
                          const at::Tensor& scale_b, const std::optional<at::Tensor>& bias,
                          const std::optional<at::Tensor>& scale_result, std::optional<c10::ScalarType> out_dtype,
                          bool /*use_fast_accum*/, at::Tensor& out) {
  check_scaled_mm(self, mat2, scale_a, scale_b);
  check_same_device("_scaled_mm", self.device(), {&mat2, &scale_a, &scale_b, &out});
  const c10::ScalarType dtype = out_dtype.value_or(self.scalar_type());
  TORCH_CHECK(out.scalar_type() == dtype, "_scaled_mm: out has dtype ", out.scalar_type(), ", expected ", dtype);
  at::Tensor product = at::mm(self.to(c10::kFloat).mul_(scale_a), mat2.to(c10::kFloat).mul_(scale_b));
  if (bias.has_value() && bias->defined()) product.add_(*bias);
  if (is_float8(dtype) && scale_result.has_value() && scale_result->defined()) {
    product.mul_(at::reciprocal(scale_result->to(c10::kFloat)));
  }
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  return out.copy_(product);
}

at::Tensor scaled_mm(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& scale_a,
                     const at::Tensor& scale_b, const std::optional<at::Tensor>& bias,
                     const std::optional<at::Tensor>& scale_result, std::optional<c10::ScalarType> out_dtype,
                     bool use_fast_accum) {
  at::Tensor out = at::empty({0}, self.options().dtype(out_dtype.value_or(self.scalar_type())));
  return scaled_mm_out(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum, out);
}

// int8 (or uint8) times int8 into int32, exactly: a product is at most 2^15 in magnitude, so float32
// sums of up to 512 of them stay below 2^24 and are exact in any order; longer contractions add
// such slices' exact sums in int32 (as CPU's int32 accumulation does).
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
  constexpr int64_t kExactSlice = 512;
  const int64_t k = self.size(1);
  const at::Tensor a = self.to(c10::kFloat), b = mat2.to(c10::kFloat);
  if (k <= kExactSlice) return out.copy_(at::mm(a, b));
  out.zero_();
  for (int64_t start = 0; start < k; start += kExactSlice) {
    const int64_t size = std::min(kExactSlice, k - start);
    out.add_(at::mm(a.narrow(1, start, size), b.narrow(0, start, size)).to(c10::kInt));
  }
  return out;
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
