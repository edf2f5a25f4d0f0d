// Matrix products on neuron (mm, addmm, addmv, dot, bmm, baddbmm; matmul and linear reach
// these): shape and dtype checks on the host, operands made BLAS-friendly, csrc/kernels/gemm on
// the queue. Also product_with_row_hooks, the product that compiled programs fuse kernels into.
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/addmv_ops.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/dot_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/mm_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "aten/ops/unsigned_dtypes.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/native_ops.h"
#include "kernels/gemm.h"

namespace torchneuron::aten {
namespace {

// A matrix's strides with those of size-1 dimensions (arbitrary in PyTorch, 0 included) made
// the dense ones, as the GEMM kernel reads them: {row stride, column stride}.
std::pair<int64_t, int64_t> matrix_strides(const at::Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t cs = cols <= 1 ? 1 : t.stride(-1);
  const int64_t rs = rows <= 1 ? (cs == 1 ? std::max<int64_t>(cols, 1) : 1) : t.stride(-2);
  return {rs, cs};
}

// BLAS takes a matrix whose rows or columns are contiguous runs (a stride-0 expanded dimension
// is neither); anything else is copied. A contiguous tensor always qualifies.
at::Tensor blas_ready(const at::Tensor& t) {
  const auto [rs, cs] = matrix_strides(t);
  const bool row_major = cs == 1 && rs >= std::max<int64_t>(t.size(-1), 1);
  const bool col_major = rs == 1 && cs >= std::max<int64_t>(t.size(-2), 1);
  return row_major || col_major ? t : t.contiguous();
}

kernels::MatrixOperand operand(const at::Tensor& t) {
  kernels::MatrixOperand op;
  op.data = static_cast<char*>(t.data_ptr());
  op.batch_stride = t.dim() == 3 ? t.stride(0) : 0;
  op.row_stride = t.stride(-2);
  op.col_stride = t.stride(-1);
  return op;
}

bool kernel_dtype_ok(const at::Tensor& t) {
  return has_kernel_dtype(t.scalar_type()) && kernels::gemm_supported(to_kernel_dtype(t.scalar_type()));
}

// What the kernel takes besides the dtype: a result that is not a lazy conjugate, and real alpha
// and beta (complex ones take the fallback).
bool kernel_form_ok(const at::Tensor& result, const c10::Scalar& beta = 0, const c10::Scalar& alpha = 1) {
  return !result.is_conj() && !beta.isComplex() && !alpha.isComplex();
}

// result = beta * result + alpha * a @ b, with result already shaped and row-major.
void launch_gemm(const at::Tensor& result, const at::Tensor& a_in, const at::Tensor& b_in, double beta,
                 double alpha, const char* name) {
  if (result.numel() == 0) return;
  // Lazily conjugated operands (complex backward passes) are conjugated on the device first.
  const at::Tensor a = blas_ready(a_in.resolve_conj());
  const at::Tensor b = blas_ready(b_in.resolve_conj());
  kernels::GemmArgs args;
  args.dtype = to_kernel_dtype(result.scalar_type());
  args.batch = result.dim() == 3 ? result.size(0) : 1;
  args.m = result.size(-2);
  args.n = result.size(-1);
  args.k = a.size(-1);
  args.a = operand(a);
  args.b = operand(b);
  args.c = operand(result);
  args.alpha = alpha;
  args.beta = beta;
  enqueue(result, name, {&a, &b}, [args] { kernels::gemm(args); });
}

void check_matrices(const at::Tensor& a, const at::Tensor& b, const char* name, int64_t dims) {
  check_same_device(name, a.device(), {&b});
  TORCH_CHECK(a.dim() == dims, name, ": self must be a ", dims, "D tensor, got ", a.dim(), "D");
  TORCH_CHECK(b.dim() == dims, name, ": mat2 must be a ", dims, "D tensor, got ", b.dim(), "D");
  TORCH_CHECK(a.size(-1) == b.size(-2), "mat1 and mat2 shapes cannot be multiplied (", a.size(-2), "x",
              a.size(-1), " and ", b.size(-2), "x", b.size(-1), ")");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
              a.scalar_type(), " != ", b.scalar_type());
  if (dims == 3) {
    TORCH_CHECK(a.size(0) == b.size(0), "batch1 and batch2 must have same number of batches, got ",
                a.size(0), " and ", b.size(0));
  }
}

// Writes into `result` through a row-major temporary when `result` itself is not row-major.
template <typename Body>
void with_row_major(at::Tensor& result, Body body) {
  const auto [rs, cs] = matrix_strides(result);
  if (cs == 1 && rs >= std::max<int64_t>(result.size(-1), 1) &&
      (result.dim() < 3 || result.size(0) <= 1 || result.stride(0) >= result.size(1) * rs)) {
    body(result);
    return;
  }
  at::Tensor staging = result.clone(at::MemoryFormat::Contiguous);
  body(staging);
  result.copy_(staging);
}

}  // namespace

bool product_with_row_hooks(const at::Tensor& result, const at::Tensor& a_in, const at::Tensor& b_in,
                            std::function<void(int64_t, int64_t)> prologue,
                            std::function<void(int64_t, int64_t)> epilogue) {
  const int64_t dims = result.dim();
  if ((dims != 2 && dims != 3) || a_in.dim() != dims || b_in.dim() != dims || a_in.size(-1) != b_in.size(-2) ||
      a_in.device() != result.device() || b_in.device() != result.device() || a_in.scalar_type() != b_in.scalar_type() ||
      result.scalar_type() != a_in.scalar_type() || !kernel_dtype_ok(a_in) || a_in.is_complex() || result.size(-2) != a_in.size(-2) ||
      result.size(-1) != b_in.size(-1) || !result.is_contiguous() || (prologue && !a_in.is_contiguous()) ||
      (dims == 3 && (a_in.size(0) != result.size(0) || b_in.size(0) != result.size(0)))) {
    return false;
  }
  if (result.numel() == 0 && !prologue) return true;
  const at::Tensor a = blas_ready(a_in);  // itself when contiguous: a prologue writes into it
  const at::Tensor b = blas_ready(b_in);
  kernels::GemmArgs args;
  args.dtype = to_kernel_dtype(result.scalar_type());
  args.batch = dims == 3 ? result.size(0) : 1;
  args.m = result.size(-2);
  args.n = result.size(-1);
  args.k = a.size(-1);
  args.a = operand(a);
  args.b = operand(b);
  args.c = operand(result);
  const char* name = dims == 3 ? "torchneuron::bmm_with_fused_kernels" : "torchneuron::mm_with_fused_kernels";
  enqueue(result, name, {&a, &b}, [args, prologue = std::move(prologue), epilogue = std::move(epilogue)] {
    kernels::gemm_with_row_hooks(args, prologue ? &prologue : nullptr, epilogue ? &epilogue : nullptr);
  });
  return true;
}

namespace matmul {

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& result) {
  check_matrices(self, mat2, "mm", 2);
  check_same_device("mm", self.device(), {&result});
  const c10::ScalarType type = self.scalar_type();
  if (is_wide_unsigned(type) && mat2.scalar_type() == type && result.scalar_type() == type) {
    // Wrap-around products and sums have the same bits on the signed twin.
    at::native::resize_output(result, {self.size(0), mat2.size(1)});
    at::Tensor twin = result.view(signed_twin(type));
    matmul::mm_out(self.view(signed_twin(type)), mat2.view(signed_twin(type)), twin);
    return result;
  }
  if (!kernel_dtype_ok(self) || result.scalar_type() != self.scalar_type() || !kernel_form_ok(result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(mm, out)>::call(self, mat2, result);
  }
  at::native::resize_output(result, {self.size(0), mat2.size(1)});
  with_row_major(result, [&](at::Tensor& out) { launch_gemm(out, self, mat2, 0.0, 1.0, "aten::mm"); });
  return result;
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor result = at::empty({0}, self.options());
  return matmul::mm_out(self, mat2, result);
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& result) {
  check_matrices(mat1, mat2, "addmm", 2);
  check_same_device("addmm", mat1.device(), {&self, &result});
  const c10::ScalarType type = mat1.scalar_type();
  if (is_wide_unsigned(type) && mat2.scalar_type() == type && self.scalar_type() == type &&
      result.scalar_type() == type && beta.isIntegral(false) && alpha.isIntegral(false)) {
    // As mm: the signed twin's bits, with integer beta and alpha.
    if (!result.is_same(self)) at::native::resize_output(result, {mat1.size(0), mat2.size(1)});
    at::Tensor twin = result.view(signed_twin(type));
    const at::Tensor bias = result.is_same(self) ? twin : self.view(signed_twin(type));
    matmul::addmm_out(bias, mat1.view(signed_twin(type)), mat2.view(signed_twin(type)), beta, alpha, twin);
    return result;
  }
  if (!kernel_dtype_ok(mat1) || result.scalar_type() != mat1.scalar_type() ||
      self.scalar_type() != mat1.scalar_type() || !kernel_form_ok(result, beta, alpha)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(addmm, out)>::call(self, mat1, mat2, beta,
                                                                                          alpha, result);
  }
  const std::vector<int64_t> shape{mat1.size(0), mat2.size(1)};
  const double beta_value = beta.toDouble();
  if (!result.is_same(self)) {
    at::native::resize_output(result, shape);
    if (beta_value != 0.0) result.copy_(self.expand(shape));
  } else {
    TORCH_CHECK(self.sizes() == at::IntArrayRef(shape), "addmm_: self has shape ", self.sizes(),
                " but the product has shape ", at::IntArrayRef(shape));
  }
  with_row_major(result, [&](at::Tensor& out) {
    launch_gemm(out, mat1, mat2, beta_value, alpha.toDouble(), "aten::addmm");
  });
  return result;
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  at::Tensor result = at::empty({0}, mat1.options());
  return matmul::addmm_out(self, mat1, mat2, beta, alpha, result);
}

at::Tensor& addmm_(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                   const c10::Scalar& alpha) {
  return matmul::addmm_out(self, mat1, mat2, beta, alpha, self);
}

// Matrix-vector and vector-vector products run as GEMMs with one column.
at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& result) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ", self.dim(), ", ", mat.dim(),
              ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) && (self.numel() == 1 || (self.dim() == 1 && self.size(0) == mat.size(0)) ||
                                             self.dim() == 0),
              "size mismatch, got input (", self.sizes(), "), mat (", mat.sizes(), "), vec (", vec.sizes(), ")");
  if (!kernel_dtype_ok(mat) || vec.scalar_type() != mat.scalar_type() || self.scalar_type() != mat.scalar_type() ||
      result.scalar_type() != mat.scalar_type()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(addmv, out)>::call(self, mat, vec, beta, alpha, result);
  }
  at::Tensor column = at::empty({mat.size(0), 1}, mat.options());
  matmul::addmm_out(self.expand({mat.size(0)}).unsqueeze(1), mat, vec.unsqueeze(1), beta, alpha, column);
  at::native::resize_output(result, {mat.size(0)});
  return result.copy_(column.squeeze(1));
}

at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  at::Tensor result = at::empty({0}, mat.options());
  return matmul::addmv_out(self, mat, vec, beta, alpha, result);
}

at::Tensor& addmv_(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                   const c10::Scalar& alpha) {
  return matmul::addmv_out(self, mat, vec, beta, alpha, self);
}

at::Tensor dot(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ", other.dim(),
              "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [", self.numel(),
              "] and src [", other.numel(), "] to have the same number of elements, but got ", self.numel(), " and ",
              other.numel(), " elements respectively");
  if (!kernel_dtype_ok(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(dot)>::call(self, other);
  }
  return matmul::mm(self.unsqueeze(0), other.unsqueeze(1)).reshape({});
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& result) {
  check_matrices(self, mat2, "bmm", 3);
  check_same_device("bmm", self.device(), {&result});
  if (!kernel_dtype_ok(self) || result.scalar_type() != self.scalar_type() || !kernel_form_ok(result)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(bmm, out)>::call(self, mat2, result);
  }
  at::native::resize_output(result, {self.size(0), self.size(1), mat2.size(2)});
  with_row_major(result, [&](at::Tensor& out) { launch_gemm(out, self, mat2, 0.0, 1.0, "aten::bmm"); });
  return result;
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor result = at::empty({0}, self.options());
  return matmul::bmm_out(self, mat2, result);
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& result) {
  check_matrices(batch1, batch2, "baddbmm", 3);
  check_same_device("baddbmm", batch1.device(), {&self, &result});
  if (!kernel_dtype_ok(batch1) || result.scalar_type() != batch1.scalar_type() ||
      self.scalar_type() != batch1.scalar_type() || !kernel_form_ok(result, beta, alpha)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(baddbmm, out)>::call(self, batch1, batch2,
                                                                                            beta, alpha, result);
  }
  const std::vector<int64_t> shape{batch1.size(0), batch1.size(1), batch2.size(2)};
  const double beta_value = beta.toDouble();
  if (!result.is_same(self)) {
    at::native::resize_output(result, shape);
    if (beta_value != 0.0) result.copy_(self.expand(shape));
  }
  with_row_major(result, [&](at::Tensor& out) {
    launch_gemm(out, batch1, batch2, beta_value, alpha.toDouble(), "aten::baddbmm");
  });
  return result;
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  at::Tensor result = at::empty({0}, batch1.options());
  return matmul::baddbmm_out(self, batch1, batch2, beta, alpha, result);
}

at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const c10::Scalar& beta,
                     const c10::Scalar& alpha) {
  return matmul::baddbmm_out(self, batch1, batch2, beta, alpha, self);
}

// _grouped_mm, as CPU PyTorch computes it: groups of one product along offs (int32 running ends),
// each a GEMM of the operands' dtype with float32 accumulation. 2D x 3D: rows of a in groups, one
// matrix of b each ([T, K] x [G, K, N] -> [T, N]); 3D x 2D: columns of b in groups; 2D x 2D: the
// contraction in groups ([M, T] x [T, N] -> [G, M, N]); 3D x 3D: a batch. One queue command reads
// offs on the device and runs the groups, so nothing waits for the host.
at::Tensor grouped_mm(const at::Tensor& a_in, const at::Tensor& b_in, const std::optional<at::Tensor>& offs,
                      const std::optional<at::Tensor>& bias, std::optional<c10::ScalarType> out_dtype) {
  const int64_t da = a_in.dim(), db = b_in.dim();
  TORCH_CHECK((da == 2 || da == 3) && (db == 2 || db == 3), "grouped gemm: mat_a and mat_b must be 2D or 3D, got ",
              da, "D and ", db, "D");
  TORCH_CHECK(a_in.scalar_type() == b_in.scalar_type(), "grouped gemm: mat_a and mat_b must have one dtype, got ",
              a_in.scalar_type(), " and ", b_in.scalar_type());
  TORCH_CHECK(out_dtype.value_or(a_in.scalar_type()) == a_in.scalar_type(),
              "grouped gemm: out_dtype must be the operands' dtype ", a_in.scalar_type());
  TORCH_CHECK(!bias.has_value() || !bias->defined(), "grouped gemm: bias is not supported yet");
  TORCH_CHECK(kernel_dtype_ok(a_in), "grouped gemm: ", a_in.scalar_type(), " is not supported on neuron");
  const bool grouped = da == 2 || db == 2;
  TORCH_CHECK(grouped == (offs.has_value() && offs->defined()),
              grouped ? "grouped gemm: offs is required when mat_a or mat_b is 2D"
                      : "grouped gemm: offs must not be given for 3D x 3D");
  TORCH_CHECK(a_in.size(-1) == b_in.size(-2) || (da == 2 && db == 2),
              "grouped gemm: contraction dims differ: mat_a ", a_in.sizes(), ", mat_b ", b_in.sizes());
  check_same_device("_grouped_mm", a_in.device(), {&b_in});
  if (!grouped) return matmul::bmm(a_in, b_in);
  const at::Tensor& offsets = *offs;
  TORCH_CHECK(offsets.dim() == 1 && offsets.scalar_type() == c10::kInt, "grouped gemm: offs must be a 1D int32 tensor");
  check_same_device("_grouped_mm", a_in.device(), {&offsets});
  const int64_t groups = offsets.size(0);
  const at::Tensor a = a_in.contiguous(), b = b_in.contiguous(), o = offsets.contiguous();
  at::Tensor out;
  if (da == 2 && db == 3) {
    TORCH_CHECK(b.size(0) == groups, "grouped gemm: mat_b has ", b.size(0), " groups, offs ", groups);
    out = at::zeros({a.size(0), b.size(2)}, a.options());
  } else if (da == 3 && db == 2) {
    TORCH_CHECK(a.size(0) == groups, "grouped gemm: mat_a has ", a.size(0), " groups, offs ", groups);
    out = at::zeros({a.size(1), b.size(1)}, a.options());
  } else {
    TORCH_CHECK(a.size(1) == b.size(0), "grouped gemm: contraction dims differ: mat_a ", a.sizes(), ", mat_b ",
                b.sizes());
    out = at::zeros({groups, a.size(0), b.size(1)}, a.options());
  }
  if (out.numel() == 0 || groups == 0) return out;
  const kernels::DType dtype = to_kernel_dtype(a.scalar_type());
  const int64_t item = static_cast<int64_t>(a.element_size());
  const int64_t extent = da == 2 && db == 3 ? a.size(0) : (da == 3 ? b.size(1) : a.size(1));  // what offs splits
  char* pa = static_cast<char*>(a.data_ptr());
  char* pb = static_cast<char*>(b.data_ptr());
  char* pc = static_cast<char*>(out.data_ptr());
  const int32_t* po = o.data_ptr<int32_t>();
  const std::vector<int64_t> as = a.sizes().vec(), bs = b.sizes().vec();
  const int mode = da == 2 && db == 3 ? 0 : (da == 3 ? 1 : 2);
  enqueue(out, "aten::_grouped_mm", {&a, &b, &o}, [=] {
    int64_t start = 0;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t end = po[g];
      if (end < start || end > extent) {
        throw runtime::KernelError("grouped gemm: offs must be non-decreasing and at most " + std::to_string(extent) +
                                   ", got offs[" + std::to_string(g) + "] = " + std::to_string(end));
      }
      const int64_t size = end - start;
      kernels::GemmArgs args;
      args.dtype = dtype;
      if (mode == 0) {  // rows start..end of a (and out) times b[g]
        args.m = size, args.k = as[1], args.n = bs[2];
        args.a = {pa + start * as[1] * item, 0, as[1], 1};
        args.b = {pb + g * bs[1] * bs[2] * item, 0, bs[2], 1};
        args.c = {pc + start * bs[2] * item, 0, bs[2], 1};
      } else if (mode == 1) {  // a[g] times columns start..end of b (and out)
        args.m = as[1], args.k = as[2], args.n = size;
        args.a = {pa + g * as[1] * as[2] * item, 0, as[2], 1};
        args.b = {pb + start * item, 0, bs[1], 1};
        args.c = {pc + start * item, 0, bs[1], 1};
      } else {  // columns start..end of a times rows start..end of b, into out[g]
        args.m = as[0], args.k = size, args.n = bs[1];
        args.a = {pa + start * item, 0, as[1], 1};
        args.b = {pb + start * bs[1] * item, 0, bs[1], 1};
        args.c = {pc + g * as[0] * bs[1] * item, 0, bs[1], 1};
      }
      if (args.m > 0 && args.n > 0 && args.k > 0) kernels::gemm(args);
      start = end;
    }
  });
  return out;
}

}  // namespace matmul

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_grouped_mm", TORCH_FN(matmul::grouped_mm));
  m.impl("mm", TORCH_FN(matmul::mm));
  m.impl("mm.out", TORCH_FN(matmul::mm_out));
  m.impl("addmm", TORCH_FN(matmul::addmm));
  m.impl("addmm.out", TORCH_FN(matmul::addmm_out));
  m.impl("addmm_", TORCH_FN(matmul::addmm_));
  m.impl("addmv", TORCH_FN(matmul::addmv));
  m.impl("addmv.out", TORCH_FN(matmul::addmv_out));
  m.impl("addmv_", TORCH_FN(matmul::addmv_));
  m.impl("dot", TORCH_FN(matmul::dot));
  m.impl("bmm", TORCH_FN(matmul::bmm));
  m.impl("bmm.out", TORCH_FN(matmul::bmm_out));
  m.impl("baddbmm", TORCH_FN(matmul::baddbmm));
  m.impl("baddbmm.out", TORCH_FN(matmul::baddbmm_out));
  m.impl("baddbmm_", TORCH_FN(matmul::baddbmm_));
}

}  // namespace torchneuron::aten
