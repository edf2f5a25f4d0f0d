// Low-precision matrix products on neuron, with CPU PyTorch's semantics: _scaled_mm (float8
// operands, tensor-wise or row-wise float32 scales, bias, out_dtype, an output scale for a float8
// result), _int_mm (int8 / uint8 times int8 into int32, exact) and _weight_int8pack_mm. _scaled_mm
// and _int_mm run kernels/gemm_lowp's kernels, as does _scaled_grouped_mm (per group); the rest
// is composed of native device ops.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>

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


namespace {

// A dtype as Python prints it ("torch.float32"), for messages that match the meta function's.
std::string py_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "torch.float32";
    case c10::kDouble: return "torch.float64";
    case c10::kHalf: return "torch.float16";
    case c10::kInt: return "torch.int32";
    case c10::kLong: return "torch.int64";
    case c10::kShort: return "torch.int16";
    case c10::kChar: return "torch.int8";
    case c10::kByte: return "torch.uint8";
    default: break;
  }
  std::string name = c10::toString(t);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return "torch." + name;
}

// _scaled_grouped_mm's argument checks, in the order and words of PyTorch 2.13's meta function
// (torch/_meta_registrations.py, which mirrors CUDA's).
void check_scaled_grouped_strides(const char* name, const at::Tensor& mat) {
  const int64_t end = mat.dim() - 1;
  const int64_t align = 16;  // bytes, one-byte elements
  const int64_t s_inner = mat.stride(end - 1), s_outer = mat.stride(end);
  if (s_inner == 1 && s_outer >= std::max<int64_t>(1, mat.size(end - 1))) {
    TORCH_CHECK(s_outer % align == 0, "Expected ", name, " stride along ", end,
                " dim to be multiple of 16 bytes, got ", s_outer, ".");
  } else if (s_outer == 1 && s_inner >= std::max<int64_t>(1, mat.size(end))) {
    TORCH_CHECK(s_inner % align == 0, "Expected ", name, " stride along ", end - 1,
                " dim to be multiple of 16 bytes, got ", s_inner, ".");
  } else {
    std::ostringstream strides, sizes;  // as Python prints a tuple and a torch.Size
    for (int64_t i = 0; i <= end; ++i) {
      strides << (i ? ", " : "(") << mat.stride(i);
      sizes << (i ? ", " : "torch.Size([") << mat.size(i);
    }
    TORCH_CHECK(false, "Invalid strides/sizes, got ", strides.str(), ") for strides and ", sizes.str(),
                "]) for sizes.");
  }
}

void check_grouped_scale(const char* name, const at::Tensor& scale, const at::Tensor& mat, int64_t scaled_dim,
                         int64_t multiplier) {
  if (mat.dim() == 2) {
    TORCH_CHECK(scale.is_contiguous(), "Expected ", name, " to be contiguous.");
    TORCH_CHECK(scale.dim() == 1, "Expected ", name, " to be 1D tensor, but got ", scale.dim(), "D tensor.");
    TORCH_CHECK(scale.size(0) == mat.size(scaled_dim) * multiplier, "Expected ", name, " to have ",
                mat.size(scaled_dim) * multiplier, " elements, got ", scale.size(0), " elements.");
  } else {
    TORCH_CHECK(scale.stride(-1) == 1, "Expected ", name, " to be contiguous in the last dimension.");
    TORCH_CHECK(scale.size(0) == mat.size(0), "Expected ", name, " batch dimension to be ", mat.size(0), ", got ",
                scale.size(0), ".");
    TORCH_CHECK(scale.dim() == 2, "Expected ", name, " to be 2D tensor, but got ", scale.dim(), "D tensor.");
    TORCH_CHECK(scale.size(1) == mat.size(1 + scaled_dim), "Expected ", name, " non-batch dimension to be ",
                mat.size(1 + scaled_dim), ", got ", scale.size(1), ".");
  }
}

void check_scaled_grouped_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& sa, const at::Tensor& sb,
                             const std::optional<at::Tensor>& offs, const std::optional<at::Tensor>& bias,
                             const std::optional<at::Tensor>& scale_result, std::optional<c10::ScalarType> out_dtype) {
  TORCH_CHECK(a.scalar_type() == c10::kFloat8_e4m3fn && b.scalar_type() == c10::kFloat8_e4m3fn,
              "Expected inputs of E4M3 FP8 type but got mat_a.dtype=", py_dtype(a.scalar_type()),
              " and mat_b.dtype=", py_dtype(b.scalar_type()), ".");
  TORCH_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3),
              "Multiplicands must be 2D or 3D but got mat_a.dim()=", a.dim(), " and mat_b.dim()=", b.dim());
  const bool a2 = a.dim() == 2, b2 = b.dim() == 2;
  if (!a2 || !b2) {
    TORCH_CHECK(a.size(-1) == b.size(-2), "contraction dimension of mat_a and mat_b must match");
  }
  TORCH_CHECK(a.stride(-2) > 1 && a.stride(-1) == 1,
              "Expected mat_a tensor to be row major in the last two dimensions, got strides (", a.stride(-2), ", ",
              a.stride(-1), ")");
  TORCH_CHECK(b.stride(-2) == 1 && b.stride(-1) > 1,
              "Expected mat_b tensor to be column major in the last two dimensions, got strides (", b.stride(-2),
              ", ", b.stride(-1), ")");
  check_scaled_grouped_strides("mat_a", a);
  check_scaled_grouped_strides("mat_b", b);
  const bool mx = sa.scalar_type() == c10::kFloat8_e8m0fnu && sb.scalar_type() == c10::kFloat8_e8m0fnu;
  TORCH_CHECK((sa.scalar_type() == c10::kFloat && sb.scalar_type() == c10::kFloat) || mx,
              "For FP8 scales must both be float32, or for MXFP8 both scales must be float8_e8m0fnu. Got "
              "scale_a.dtype=", py_dtype(sa.scalar_type()), " and scale_b.dtype=", py_dtype(sb.scalar_type()), ".");
  TORCH_CHECK_NOT_IMPLEMENTED(!mx, "_scaled_grouped_mm on neuron: MXFP8 block scales (float8_e8m0fnu) are not "
                              "supported; use float32 row-wise scales");
  const bool grouped = a2 || b2;
  const int64_t multiplier = grouped && a2 && b2 && offs.has_value() ? offs->size(0) : 1;
  check_grouped_scale("scale_a", sa, a, 0, multiplier);
  check_grouped_scale("scale_b", sb, b, 1, multiplier);
  TORCH_CHECK(!scale_result.has_value(), "Scale result tensor provided, but it is not supported yet.");
  if (grouped) {
    TORCH_CHECK(offs.has_value(), "Offsets tensor not provided, but is needed for ", a.dim(), "D/", b.dim(),
                "D multiplicand layouts.");
    TORCH_CHECK(offs->dim() == 1, "Offsets tensor must be 1D, but got offs.dim()=", offs->dim(), ".");
    TORCH_CHECK(offs->scalar_type() == c10::kInt, "Offsets tensor must be integer (int32) tensor, but got ",
                py_dtype(offs->scalar_type()), ".");
  } else {
    TORCH_CHECK(!offs.has_value(), "Offsets tensor provided, but is not needed for 3D/3D multiplicand layouts.");
  }
  TORCH_CHECK(!bias.has_value(), "Bias tensor provided, but it is not supported yet.");
  TORCH_CHECK(!out_dtype.has_value() || *out_dtype == c10::kBFloat16,
              "If output dtype provided, it must be torch.bfloat16.");
  if (a2 && !b2) TORCH_CHECK(offs->size(0) == b.size(0), "matrix batch sizes have to match");
  if (!a2 && b2) TORCH_CHECK(offs->size(0) == a.size(0), "matrix batch sizes have to match");
  if (!a2 && !b2) TORCH_CHECK(a.size(0) == b.size(0), "batched dimension has to match");
}

const char* element(const at::Tensor& t, int64_t offset) {
  return static_cast<const char*>(t.data_ptr()) + offset * static_cast<int64_t>(t.element_size());
}

}  // namespace

// The float8 grouped product (e4m3fn, float32 row-wise scales, bfloat16 result) in the layouts
// of _grouped_mm: 2D x 3D (rows of mat_a grouped by offs, group g times mat_b[g]), 3D x 2D
// (columns of mat_b grouped), 2D x 2D (the contraction grouped: out[g], scales of group g at
// g * M and g * N), 3D x 3D (a batch). One queue command reads offs on the device and runs
// kernels::scaled_gemm per group: float8 products summed in float32, times scale_a[i] *
// scale_b[j], rounded once. Rows or columns no group covers, and empty contractions, are zeros.
at::Tensor scaled_grouped_mm(const at::Tensor& mat_a, const at::Tensor& mat_b, const at::Tensor& scale_a,
                             const at::Tensor& scale_b, const std::optional<at::Tensor>& offs,
                             const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& scale_result,
                             std::optional<c10::ScalarType> out_dtype, bool /*use_fast_accum*/) {
  const std::optional<at::Tensor> o_opt = offs.has_value() && offs->defined() ? offs : std::nullopt;
  const std::optional<at::Tensor> bias_opt = bias.has_value() && bias->defined() ? bias : std::nullopt;
  const std::optional<at::Tensor> sr_opt = scale_result.has_value() && scale_result->defined() ? scale_result
                                                                                                : std::nullopt;
  check_scaled_grouped_mm(mat_a, mat_b, scale_a, scale_b, o_opt, bias_opt, sr_opt, out_dtype);
  check_same_device("_scaled_grouped_mm", mat_a.device(), {&mat_b, &scale_a, &scale_b});
  const bool a2 = mat_a.dim() == 2, b2 = mat_b.dim() == 2;
  const int mode = a2 && !b2 ? 0 : (!a2 && b2 ? 1 : (a2 ? 2 : 3));
  const int64_t groups = mode == 3 ? mat_a.size(0) : o_opt->size(0);
  at::Tensor out;
  if (mode == 0) {
    out = at::zeros({mat_a.size(0), mat_b.size(2)}, mat_a.options().dtype(c10::kBFloat16));
  } else if (mode == 1) {
    out = at::zeros({mat_a.size(1), mat_b.size(1)}, mat_a.options().dtype(c10::kBFloat16));
  } else {
    out = at::zeros({groups, mat_a.size(-2), mat_b.size(-1)}, mat_a.options().dtype(c10::kBFloat16));
  }
  if (out.numel() == 0 || groups == 0) return out;
  const at::Tensor o = mode == 3 ? at::zeros({1}, mat_a.options().dtype(c10::kInt)) : o_opt->contiguous();
  check_same_device("_scaled_grouped_mm", mat_a.device(), {&o});
  // What offs splits: rows of mat_a, columns of mat_b, or the contraction.
  const int64_t extent = mode == 0 ? mat_a.size(0) : (mode == 1 ? mat_b.size(1) : mat_a.size(-1));
  const at::Tensor a = mat_a, b = mat_b, sa = scale_a, sb = scale_b;
  const int64_t sa_group = sa.dim() == 2 ? sa.stride(0) : (mode == 2 ? mat_a.size(0) : 0);
  const int64_t sb_group = sb.dim() == 2 ? sb.stride(0) : (mode == 2 ? mat_b.size(1) : 0);
  const int64_t m_all = out.size(-2), n_all = out.size(-1);
  const int32_t* po = o.data_ptr<int32_t>();
  const float* psa = sa.data_ptr<float>();
  const float* psb = sb.data_ptr<float>();
  char* pc = static_cast<char*>(out.data_ptr());
  const int64_t as0 = a.stride(0), as1 = a.stride(1), as2 = a.dim() == 3 ? a.stride(2) : 0;
  const int64_t bs0 = b.stride(0), bs1 = b.stride(1), bs2 = b.dim() == 3 ? b.stride(2) : 0;
  const int64_t k_all = a.size(-1);
  const char* pa = element(a, 0);
  const char* pb = element(b, 0);
  enqueue(out, "aten::_scaled_grouped_mm", {&a, &b, &sa, &sb, &o}, [=] {
    int64_t start = 0;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t end = mode == 3 ? 0 : po[g];
      if (mode != 3 && (end < start || end > extent)) {
        throw runtime::KernelError("_scaled_grouped_mm: offs must be non-decreasing and at most " +
                                   std::to_string(extent) + ", got offs[" + std::to_string(g) +
                                   "] = " + std::to_string(end));
      }
      const int64_t size = end - start;
      kernels::ScaledGemmArgs args;
      args.rowwise = true;
      args.c_dtype = kernels::DType::kBFloat16;
      args.ldc = n_all;
      if (mode == 0) {  // rows start..end of mat_a (and out) times mat_b[g]
        args.m = size, args.k = k_all, args.n = n_all;
        args.a = {pa + start * as0, as0, as1};
        args.b = {pb + g * bs0, bs1, bs2};
        args.scale_a = psa + start, args.scale_b = psb + g * sb_group;
        args.c = pc + start * n_all * 2;
      } else if (mode == 1) {  // mat_a[g] times columns start..end of mat_b (and out)
        args.m = m_all, args.k = k_all, args.n = size;
        args.a = {pa + g * as0, as1, as2};
        args.b = {pb + start * bs1, bs0, bs1};
        args.scale_a = psa + g * sa_group, args.scale_b = psb + start;
        args.c = pc + start * 2;
      } else if (mode == 2) {  // columns start..end of mat_a times rows start..end of mat_b, into out[g]
        args.m = m_all, args.k = size, args.n = n_all;
        args.a = {pa + start * as1, as0, as1};
        args.b = {pb + start * bs0, bs0, bs1};
        args.scale_a = psa + g * sa_group, args.scale_b = psb + g * sb_group;
        args.c = pc + g * m_all * n_all * 2;
      } else {  // a batch: mat_a[g] times mat_b[g]
        args.m = m_all, args.k = k_all, args.n = n_all;
        args.a = {pa + g * as0, as1, as2};
        args.b = {pb + g * bs0, bs1, bs2};
        args.scale_a = psa + g * sa_group, args.scale_b = psb + g * sb_group;
        args.c = pc + g * m_all * n_all * 2;
      }
      if (args.m > 0 && args.n > 0 && args.k > 0) kernels::scaled_gemm(args);
      start = end;
    }
  });
  return out;
}

}  // namespace lowp

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_mm", TORCH_FN(lowp::scaled_mm));
  m.impl("_scaled_mm.out", TORCH_FN(lowp::scaled_mm_out));
  m.impl("_int_mm", TORCH_FN(lowp::int_mm));
  m.impl("_int_mm.out", TORCH_FN(lowp::int_mm_out));
  m.impl("_weight_int8pack_mm", TORCH_FN(lowp::weight_int8pack_mm));
  m.impl("_scaled_grouped_mm", TORCH_FN(lowp::scaled_grouped_mm));
}

}  // namespace torchneuron::aten
