// Linear algebra on neuron: triangular solves (linalg.solve_triangular) and pairwise distances
// (cdist); LU, Cholesky and QR factorizations, LU solves, inverses and determinants through
// LAPACK, linalg.lu / lu_unpack, Cholesky solves and inverses from triangular solves
// (csrc/kernels/linalg).
#include <ATen/ExpandUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_cdist_backward_ops.h>
#include <ATen/ops/_cdist_forward_ops.h>
#include <ATen/ops/_cholesky_solve_helper_ops.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/_linalg_det_ops.h>
#include <ATen/ops/_linalg_slogdet_ops.h>
#include <ATen/ops/_linalg_solve_ex_ops.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cholesky_inverse_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/linalg_cholesky_ex_ops.h>
#include <ATen/ops/linalg_inv_ex_ops.h>
#include <ATen/ops/linalg_lu_factor_ex_ops.h>
#include <ATen/ops/linalg_lu_ops.h>
#include <ATen/ops/linalg_lu_solve_ops.h>
#include <ATen/ops/linalg_qr_ops.h>
#include <ATen/ops/linalg_solve_triangular_ops.h>
#include <ATen/ops/log.h>
#include <ATen/ops/lu_unpack_ops.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "kernels/linalg.h"

namespace torchneuron::aten {
namespace matmul {

// ---- triangular solves -------------------------------------------------------------------------

namespace {

bool solvable(const at::Tensor& t) {
  return has_kernel_dtype(t.scalar_type()) && at::isFloatingType(t.scalar_type());
}

// X with A X = B (left) or X A = B, batch dimensions broadcast; the kernel substitutes on a
// contiguous copy of B. XA = B is solved as A^T X^T = B^T.
at::Tensor solve_triangular(const at::Tensor& A, const at::Tensor& B, bool upper, bool left, bool unitriangular) {
  constexpr const char* op = "linalg.solve_triangular";
  TORCH_CHECK(A.dim() >= 2, op, ": The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(B.dim() >= 2, op, ": The input tensor B must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), op, ": A must be batches of square matrices, but they are ", A.size(-2), " by ",
              A.size(-1), " matrices");
  const int64_t n = A.size(-1);
  TORCH_CHECK(left ? B.size(-2) == n : B.size(-1) == n, op, ": Incompatible shapes of A and B for the equation ",
              left ? "AX = B" : "XA = B", " (", n, "x", n, " and ", B.size(-2), "x", B.size(-1), ")");
  check_same_device("aten::linalg_solve_triangular", A.device(), {&B});
  const c10::ScalarType dtype = at::result_type(A, B);
  const at::Tensor a = left ? A : A.mT(), b = left ? B : B.mT();
  const bool solve_upper = left ? upper : !upper;
  std::vector<int64_t> batch = at::infer_size(a.sizes().slice(0, a.dim() - 2), b.sizes().slice(0, b.dim() - 2));
  std::vector<int64_t> a_sizes = batch, x_sizes = batch;
  a_sizes.insert(a_sizes.end(), {n, n});
  x_sizes.insert(x_sizes.end(), {n, b.size(-1)});
  const at::Tensor matrices = a.to(dtype).expand(a_sizes).contiguous();
  at::Tensor x = b.to(dtype).expand(x_sizes).clone(at::MemoryFormat::Contiguous);
  const int64_t k = b.size(-1);
  const int64_t count = c10::multiply_integers(batch);
  if (x.numel() > 0) {
    const kernels::DType kdtype = to_kernel_dtype(dtype);
    const void* pa = matrices.data_ptr();
    void* px = x.data_ptr();
    enqueue(x, "aten::linalg_solve_triangular", {&matrices},
            [=] { kernels::triangular_solve(kdtype, count, n, k, solve_upper, unitriangular, pa, px); });
  }
  // Batches of column-major matrices, as CPU PyTorch (LAPACK's layout) and the meta kernels give.
  return left ? x.mT().contiguous().mT() : x.mT();
}

}  // namespace

at::Tensor linalg_solve_triangular(const at::Tensor& A, const at::Tensor& B, bool upper, bool left, bool unitriangular) {
  if (!solvable(A) || !solvable(B)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(linalg_solve_triangular)>::call(A, B, upper, left,
                                                                                                      unitriangular);
  }
  return solve_triangular(A, B, upper, left, unitriangular);
}

at::Tensor& linalg_solve_triangular_out(const at::Tensor& A, const at::Tensor& B, bool upper, bool left,
                                        bool unitriangular, at::Tensor& out) {
  if (!solvable(A) || !solvable(B)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(linalg_solve_triangular, out)>::call(
        A, B, upper, left, unitriangular, out);
  }
  const at::Tensor result = solve_triangular(A, B, upper, left, unitriangular);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

// ---- pairwise distances (cdist) ----------------------------------------------------------------
// cdist checks its arguments and picks these for p != 2 or small p = 2 problems (larger ones go
// through matrix products). Batch dimensions broadcast.

namespace {

struct DistanceOperands {
  at::Tensor x1, x2;  // expanded to the common batch, contiguous
  int64_t batch;
};

DistanceOperands distance_operands(const at::Tensor& x1, const at::Tensor& x2) {
  TORCH_CHECK(x1.dim() >= 2 && x2.dim() >= 2 && x1.size(-1) == x2.size(-1), "cdist: expected matrices with the same "
              "number of columns, got ", x1.sizes(), " and ", x2.sizes());
  std::vector<int64_t> batch = at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  std::vector<int64_t> s1 = batch, s2 = batch;
  s1.insert(s1.end(), {x1.size(-2), x1.size(-1)});
  s2.insert(s2.end(), {x2.size(-2), x2.size(-1)});
  return {x1.expand(s1).contiguous(), x2.expand(s2).contiguous(), c10::multiply_integers(batch)};
}

}  // namespace

at::Tensor cdist_forward(const at::Tensor& x1, const at::Tensor& x2, double p, std::optional<int64_t> compute_mode) {
  if (!solvable(x1) || !solvable(x2) || x1.scalar_type() != x2.scalar_type()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_cdist_forward)>::call(x1, x2, p, compute_mode);
  }
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  check_same_device("aten::_cdist_forward", x1.device(), {&x2});
  const DistanceOperands d = distance_operands(x1, x2);
  std::vector<int64_t> sizes(d.x1.sizes().begin(), d.x1.sizes().end() - 1);
  sizes.push_back(x2.size(-2));
  at::Tensor out = at::empty(sizes, d.x1.options());
  if (out.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(x1.scalar_type());
    const int64_t batch = d.batch, rows1 = x1.size(-2), rows2 = x2.size(-2), dim = x1.size(-1);
    const void* pa = d.x1.data_ptr();
    const void* pb = d.x2.data_ptr();
    void* po = out.data_ptr();
    enqueue(out, "aten::_cdist_forward", {&d.x1, &d.x2},
            [=] { kernels::pairwise_distance(dtype, batch, rows1, rows2, dim, p, pa, pb, po); });
  }
  return out;
}

at::Tensor cdist_backward(const at::Tensor& grad, const at::Tensor& x1, const at::Tensor& x2, double p,
                          const at::Tensor& cdist) {
  if (!solvable(x1) || !solvable(x2) || x1.scalar_type() != x2.scalar_type()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_cdist_backward)>::call(grad, x1, x2, p, cdist);
  }
  check_same_device("aten::_cdist_backward", x1.device(), {&x2, &grad, &cdist});
  const DistanceOperands d = distance_operands(x1, x2);
  std::vector<int64_t> sizes(d.x1.sizes().begin(), d.x1.sizes().end() - 1);
  sizes.push_back(x2.size(-2));
  TORCH_CHECK(grad.sizes() == c10::IntArrayRef(sizes) && cdist.sizes() == c10::IntArrayRef(sizes),
              "_cdist_backward: expected grad and cdist of sizes ", sizes, ", got ", grad.sizes(), " and ", cdist.sizes());
  const at::Tensor g = grad.to(x1.scalar_type()).contiguous(), dist = cdist.to(x1.scalar_type()).contiguous();
  at::Tensor grad_x1 = at::empty(d.x1.sizes(), d.x1.options());
  if (grad_x1.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(x1.scalar_type());
    const int64_t batch = d.batch, rows1 = x1.size(-2), rows2 = x2.size(-2), dim = x1.size(-1);
    const void* pg = g.data_ptr();
    const void* pa = d.x1.data_ptr();
    const void* pb = d.x2.data_ptr();
    const void* pd = dist.data_ptr();
    void* pgx = grad_x1.data_ptr();
    enqueue(grad_x1, "aten::_cdist_backward", {&g, &d.x1, &d.x2, &dist},
            [=] { kernels::pairwise_distance_backward(dtype, batch, rows1, rows2, dim, p, pg, pa, pb, pd, pgx); });
  }
  return grad_x1.sizes() == x1.sizes() ? grad_x1 : at::sum_to(grad_x1, x1.sizes());
}

// ---- LU and Cholesky factorizations, solves, inverses, determinants (LAPACK) ----------------
// LAPACK works on column-major matrices: a matrix's column-major data is its transpose made
// contiguous, and results are read back through the same transpose. float32 and float64; other
// dtypes (and complex ones) take the fallback.

bool lapack_input(const at::Tensor& t) {
  return (t.scalar_type() == c10::kFloat || t.scalar_type() == c10::kDouble) && t.layout() == c10::kStrided;
}

std::vector<int64_t> batch_shape(const at::Tensor& t) { return {t.sizes().begin(), t.sizes().end() - 2}; }

int64_t count_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

void check_square(const at::Tensor& A, const char* api) {
  TORCH_CHECK(A.dim() >= 2, api, ": The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), api, ": A must be batches of square matrices, but they are ", A.size(-2), " by ",
              A.size(-1), " matrices");
}

// The LU factors (column-major, in `work`), pivots and info of every matrix of A.
struct Factored {
  at::Tensor work, pivots, info;
};

Factored lu_factor_on_device(const at::Tensor& A, const char* op, bool invert = false) {
  const int64_t m = A.size(-2), n = A.size(-1);
  std::vector<int64_t> shape = batch_shape(A);
  const int64_t batch = count_of(shape);
  Factored f;
  f.work = A.mT().clone(at::MemoryFormat::Contiguous);  // factored in place: never the caller's memory
  f.info = at::zeros(shape, A.options().dtype(c10::kInt));
  shape.push_back(std::min(m, n));
  f.pivots = at::empty(shape, A.options().dtype(c10::kInt));
  if (batch == 0 || m == 0 || n == 0) return f;
  const kernels::DType dtype = to_kernel_dtype(A.scalar_type());
  void* data = f.work.data_ptr();
  auto* pivots = static_cast<int32_t*>(f.pivots.data_ptr());
  auto* info = static_cast<int32_t*>(f.info.data_ptr());
  enqueue(f.work, op, {&f.pivots, &f.info}, [=] {
    kernels::lu_factor(dtype, batch, m, n, data, pivots, info);
    if (invert) kernels::lu_inverse(dtype, batch, n, data, pivots, info);
  });
  return f;
}

void copy_into(at::Tensor& out, const at::Tensor& value) {
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_lu_factor_ex_out(const at::Tensor& A, bool pivot,
                                                                         bool check_errors, at::Tensor& LU,
                                                                         at::Tensor& pivots, at::Tensor& info) {
  TORCH_CHECK(A.dim() >= 2, "torch.linalg.lu_factor: Expected tensor with 2 or more dimensions. Got size: ", A.sizes(),
              " instead");
  if (!lapack_input(A) || !pivot) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(linalg_lu_factor_ex, out)>::call(
        A, pivot, check_errors, LU, pivots, info);
  }
  const Factored f = lu_factor_on_device(A, "aten::linalg_lu_factor_ex");
  copy_into(LU, f.work.mT());
  copy_into(pivots, f.pivots);
  copy_into(info, f.info);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.lu_factor_ex", A.dim() == 2);
  return {LU, pivots, info};
}

// X from A's factors: A X = B (left) or X A = B, with A^T for `adjoint`; batch dims broadcast.
at::Tensor lu_solve_on_device(const at::Tensor& LU, const at::Tensor& pivots, const at::Tensor& B, bool left,
                              bool adjoint) {
  const int64_t n = LU.size(-1);
  std::vector<int64_t> batch = at::infer_size(batch_shape(LU), batch_shape(B));
  const int64_t count = count_of(batch);
  std::vector<int64_t> lu_shape = batch, pivots_shape = batch, b_shape = batch;
  lu_shape.insert(lu_shape.end(), {n, n});
  pivots_shape.push_back(n);
  b_shape.insert(b_shape.end(), {B.size(-2), B.size(-1)});
  const at::Tensor factors = LU.expand(lu_shape).mT().contiguous();
  const at::Tensor rows = pivots.expand(pivots_shape).contiguous();
  // Left: the columns of B are the systems, B^T's rows in memory. Right: X A = B is
  // A^T X^T = B^T, whose column-major right-hand side is B itself.
  at::Tensor rhs = (left ? B.expand(b_shape).mT() : B.expand(b_shape)).clone(at::MemoryFormat::Contiguous);
  const int64_t k = left ? B.size(-1) : B.size(-2);
  const bool transpose = left ? adjoint : !adjoint;
  if (count > 0 && n > 0 && k > 0) {
    const kernels::DType dtype = to_kernel_dtype(B.scalar_type());
    const void* lu = factors.data_ptr();
    const auto* piv = static_cast<const int32_t*>(rows.data_ptr());
    void* data = rhs.data_ptr();
    enqueue(rhs, "aten::linalg_lu_solve", {&factors, &rows},
            [=] { kernels::lu_solve(dtype, count, count, n, k, lu, piv, transpose, data); });
  }
  return left ? rhs.mT() : rhs;
}

at::Tensor& linalg_lu_solve_out(const at::Tensor& LU, const at::Tensor& pivots, const at::Tensor& B, bool left,
                                bool adjoint, at::Tensor& out) {
  TORCH_CHECK(LU.dim() >= 2, "linalg.lu_solve: Expected LU to have at least 2 dimensions, but it has ", LU.dim());
  TORCH_CHECK(LU.size(-1) == LU.size(-2), "torch.linalg.lu_solve: Expected LU to be square, got ", LU.sizes());
  TORCH_CHECK(B.dim() >= 2, "linalg.lu_solve: Expected B to have at least 2 dimensions, but it has ", B.dim());
  TORCH_CHECK(LU.size(-1) == (left ? B.size(-2) : B.size(-1)), "torch.linalg.lu_solve: Incompatible shapes of A and B ",
              "for the equation ", left ? "AX = B" : "XA = B", " (", LU.size(-2), "x", LU.size(-1), " and ", B.size(-2), "x",
              B.size(-1), ")");
  TORCH_CHECK(pivots.scalar_type() == c10::kInt, "torch.linalg.lu_solve: pivots should be a Tensor of scalar type int32");
  if (!lapack_input(LU) || LU.scalar_type() != B.scalar_type()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(linalg_lu_solve, out)>::call(LU, pivots, B, left,
                                                                                                    adjoint, out);
  }
  copy_into(out, lu_solve_on_device(LU, pivots, B, left, adjoint));
  return out;
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> linalg_solve_ex_out(
    const at::Tensor& A, const at::Tensor& B, bool left, bool check_errors, at::Tensor& result, at::Tensor& LU,
    at::Tensor& pivots, at::Tensor& info) {
  check_square(A, "linalg.solve");
  if (!lapack_input(A) || A.scalar_type() != B.scalar_type()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_linalg_solve_ex, result)>::call(
        A, B, left, check_errors, result, LU, pivots, info);
  }
  // A vector right-hand side: B of A's shape without its last dim (or a 1-D B).
  const bool vector_case = B.dim() == 1 || (A.dim() - 1 == B.dim() && B.sizes() == A.sizes().slice(0, A.dim() - 1));
  const at::Tensor rhs = vector_case ? B.unsqueeze(left ? -1 : -2) : B;
  TORCH_CHECK(A.size(-1) == (left ? rhs.size(-2) : rhs.size(-1)), "linalg.solve: Incompatible shapes of A and B for the ",
              "equation ", left ? "AX = B" : "XA = B", " (", A.size(-2), "x", A.size(-1), " and ", rhs.size(-2), "x",
              rhs.size(-1), ")");
  const Factored f = lu_factor_on_device(A, "aten::_linalg_solve_ex");
  const at::Tensor factors = f.work.mT();
  const at::Tensor x = lu_solve_on_device(factors, f.pivots, rhs, left, false);
  copy_into(result, vector_case ? x.squeeze(left ? -1 : -2) : x);
  copy_into(LU, factors);
  copy_into(pivots, f.pivots);
  copy_into(info, f.info);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.solve_ex", A.dim() == 2);
  return {result, LU, pivots, info};
}

std::tuple<at::Tensor&, at::Tensor&> linalg_inv_ex_out(const at::Tensor& A, bool check_errors, at::Tensor& inverse,
                                                       at::Tensor& info) {
  check_square(A, "linalg.inv");
  if (!lapack_input(A)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(linalg_inv_ex, inverse)>::call(A, check_errors,
                                                                                                      inverse, info);
  }
  const Factored f = lu_factor_on_device(A, "aten::linalg_inv_ex", /*invert=*/true);
  copy_into(inverse, f.work.mT());
  copy_into(info, f.info);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.inv_ex", A.dim() == 2);
  return {inverse, info};
}

// (-1)^(rows the factorization swapped), from 1-based pivots.
at::Tensor permutation_sign(const at::Tensor& pivots, c10::ScalarType dtype) {
  const at::Tensor identity = at::arange(1, pivots.size(-1) + 1, pivots.options());
  const at::Tensor swaps = at::ne(pivots, identity).sum(-1);
  return at::rsub(at::mul(at::remainder(swaps, 2), 2), 1).to(dtype);  // 1 - 2 (swaps mod 2)
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_det_out(const at::Tensor& A, at::Tensor& result, at::Tensor& LU,
                                                                 at::Tensor& pivots) {
  check_square(A, "linalg.det");
  if (!lapack_input(A)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_linalg_det, result)>::call(A, result, LU, pivots);
  }
  // As on CPU, a contiguous A is factored transposed (det A^T = det A): the backward reads LU
  // and pivots that way.
  const Factored f = lu_factor_on_device(A.is_contiguous() ? A.mT() : A, "aten::_linalg_det");
  const at::Tensor factors = f.work.mT();
  const at::Tensor det = at::mul(factors.diagonal(0, -2, -1).prod(-1), permutation_sign(f.pivots, A.scalar_type()));
  copy_into(result, det);
  copy_into(LU, factors);
  copy_into(pivots, f.pivots);
  return {result, LU, pivots};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> linalg_slogdet_out(const at::Tensor& A, at::Tensor& sign,
                                                                                  at::Tensor& logabsdet, at::Tensor& LU,
                                                                                  at::Tensor& pivots) {
  check_square(A, "linalg.slogdet");
  if (!lapack_input(A)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_linalg_slogdet, sign)>::call(A, sign, logabsdet,
                                                                                                     LU, pivots);
  }
  const Factored f = lu_factor_on_device(A.is_contiguous() ? A.mT() : A, "aten::_linalg_slogdet");  // as _linalg_det
  const at::Tensor factors = f.work.mT();
  const at::Tensor diagonal = factors.diagonal(0, -2, -1);
  copy_into(sign, at::mul(at::sign(diagonal).prod(-1), permutation_sign(f.pivots, A.scalar_type())));
  copy_into(logabsdet, at::log(at::abs(diagonal)).sum(-1));
  copy_into(LU, factors);
  copy_into(pivots, f.pivots);
  return {sign, logabsdet, LU, pivots};
}

std::tuple<at::Tensor&, at::Tensor&> linalg_cholesky_ex_out(const at::Tensor& A, bool upper, bool check_errors,
                                                            at::Tensor& L, at::Tensor& info) {
  check_square(A, "linalg.cholesky");
  if (!lapack_input(A)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(linalg_cholesky_ex, L)>::call(A, upper,
                                                                                                     check_errors, L, info);
  }
  const int64_t n = A.size(-1);
  const std::vector<int64_t> shape = batch_shape(A);
  const int64_t batch = count_of(shape);
  const at::Tensor work = A.mT().clone(at::MemoryFormat::Contiguous);
  const at::Tensor status = at::zeros(shape, A.options().dtype(c10::kInt));
  if (batch > 0 && n > 0) {
    const kernels::DType dtype = to_kernel_dtype(A.scalar_type());
    void* data = work.data_ptr();
    auto* status_data = static_cast<int32_t*>(status.data_ptr());
    enqueue(work, "aten::linalg_cholesky_ex", {&status}, [=] { kernels::cholesky(dtype, batch, n, upper, data, status_data); });
  }
  copy_into(L, work.mT());
  copy_into(info, status);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.cholesky_ex", A.dim() == 2);
  return {L, info};
}

// cholesky_solve's helper: L L^T X = B (A = L lower) or U^T U X = B (A = U upper), as two
// triangular solves; inputs arrive broadcast.
at::Tensor cholesky_solve_helper(const at::Tensor& self, const at::Tensor& A, bool upper) {
  if (!lapack_input(A) || A.scalar_type() != self.scalar_type()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(_cholesky_solve_helper)>::call(self, A, upper);
  }
  const at::Tensor lower = upper ? A.mT() : A;
  const at::Tensor y = matmul::linalg_solve_triangular(lower, self, /*upper=*/false, /*left=*/true, /*unitriangular=*/false);
  return matmul::linalg_solve_triangular(lower.mT(), y, /*upper=*/true, /*left=*/true, /*unitriangular=*/false);
}

// (L L^T)^-1 from its Cholesky factor: the identity solved against it.
at::Tensor cholesky_inverse(const at::Tensor& L, bool upper) {
  TORCH_CHECK(L.dim() >= 2, "cholesky_inverse: The input tensor must have at least 2 dimensions.");
  TORCH_CHECK(L.size(-1) == L.size(-2), "cholesky_inverse: A must be batches of square matrices, but they are ",
              L.size(-2), " by ", L.size(-1), " matrices");
  if (!lapack_input(L)) return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(cholesky_inverse)>::call(L, upper);
  const at::Tensor identity = at::eye(L.size(-1), L.options()).expand(L.sizes()).contiguous();
  return cholesky_solve_helper(identity, L, upper);
}

at::Tensor& cholesky_inverse_out(const at::Tensor& L, bool upper, at::Tensor& out) {
  copy_into(out, matmul::cholesky_inverse(L, upper));
  return out;
}

// lu_unpack: L (unit lower, m x k) and U (upper, k x n) from the LU factors, and the
// permutation matrix P (A = P L U) from the pivots.
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> lu_unpack_out(const at::Tensor& LU, const at::Tensor& pivots,
                                                               bool unpack_data, bool unpack_pivots, at::Tensor& P,
                                                               at::Tensor& L, at::Tensor& U) {
  TORCH_CHECK(LU.dim() >= 2, "torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: ", LU.sizes(),
              " instead");
  if (unpack_pivots) {
    TORCH_CHECK(pivots.scalar_type() == c10::kInt, "torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of ",
                "torch.int32 dtype.\nNote: this function is intended to be used with the output produced by ",
                "torch.linalg.lu_factor");
  }
  if (LU.is_complex() || !at::isFloatingType(LU.scalar_type())) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(lu_unpack, out)>::call(
        LU, pivots, unpack_data, unpack_pivots, P, L, U);
  }
  const int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  if (unpack_data) {
    copy_into(L, at::add(LU.narrow(-1, 0, k).tril(-1), at::eye(m, k, LU.options())));
    copy_into(U, LU.narrow(-2, 0, k).triu());
  } else {
    L.resize_({0});
    U.resize_({0});
  }
  if (!unpack_pivots) {
    P.resize_({0});
    return {P, L, U};
  }
  std::vector<int64_t> shape = batch_shape(LU);
  const int64_t batch = count_of(shape);
  TORCH_CHECK(pivots.dim() >= 1 && pivots.size(-1) == k && pivots.numel() == batch * k,
              "torch.lu_unpack: expected LU_pivots of shape ", c10::IntArrayRef(shape), " + [", k, "], got ", pivots.sizes());
  shape.push_back(m);
  const at::Tensor rows = pivots.contiguous();
  at::Tensor permutation = at::empty(shape, LU.options().dtype(c10::kLong));
  if (batch > 0 && m > 0) {
    const auto* piv = static_cast<const int32_t*>(rows.data_ptr());
    auto* perm = static_cast<int64_t*>(permutation.data_ptr());
    enqueue(permutation, "aten::lu_unpack", {&rows}, [=] { kernels::lu_permutation(batch, m, k, piv, perm); });
  }
  shape.push_back(m);
  at::Tensor matrix = at::zeros(shape, LU.options());
  matrix.scatter_(-2, permutation.unsqueeze(-2), 1);
  copy_into(P, matrix);
  return {P, L, U};
}

// linalg.lu: the factorization, unpacked.
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_lu_out(const at::Tensor& A, bool pivot, at::Tensor& P,
                                                               at::Tensor& L, at::Tensor& U) {
  TORCH_CHECK(A.dim() >= 2, "linalg.lu: Expected tensor with 2 or more dimensions. Got size: ", A.sizes(), " instead");
  if (!lapack_input(A) || !pivot) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(linalg_lu, out)>::call(A, pivot, P, L, U);
  }
  const Factored f = lu_factor_on_device(A, "aten::linalg_lu");
  return matmul::lu_unpack_out(f.work.mT(), f.pivots, true, true, P, L, U);
}

// linalg.qr in its three modes (reduced, complete, r), by Householder reflections.
std::tuple<at::Tensor&, at::Tensor&> linalg_qr_out(const at::Tensor& A, c10::string_view mode, at::Tensor& Q,
                                                   at::Tensor& R) {
  TORCH_CHECK(A.dim() >= 2, "linalg.qr: The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(mode == "reduced" || mode == "complete" || mode == "r", "qr received unrecognized mode '", mode,
              "' but expected one of 'reduced' (default), 'r', or 'complete'");
  if (!lapack_input(A)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(linalg_qr, out)>::call(A, mode, Q, R);
  }
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const bool compute_q = mode != "r", complete = mode == "complete";
  const int64_t q_cols = complete ? m : k;
  std::vector<int64_t> shape = batch_shape(A);
  const int64_t batch = count_of(shape);
  const at::Tensor work = A.mT().clone(at::MemoryFormat::Contiguous);
  shape.insert(shape.end(), {q_cols, m});
  const at::Tensor q_work = compute_q ? at::zeros(shape, A.options()) : at::Tensor();
  if (batch > 0 && m > 0 && n > 0) {
    const kernels::DType dtype = to_kernel_dtype(A.scalar_type());
    void* data = work.data_ptr();
    void* q_data = compute_q ? q_work.data_ptr() : nullptr;
    enqueue(work, "aten::linalg_qr", {}, [=] { kernels::qr(dtype, batch, m, n, data, q_data, q_cols); });
  } else if (compute_q && batch > 0 && m > 0) {
    q_work.copy_(at::eye(m, q_cols, A.options()).mT().expand(q_work.sizes()));  // no reflectors: Q = I
  }
  copy_into(R, work.mT().narrow(-2, 0, complete ? m : k).triu());
  copy_into(Q, compute_q ? q_work.mT() : at::empty({0}, A.options()));
  return {Q, R};
}

}  // namespace matmul

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_lu_factor_ex.out", TORCH_FN(matmul::linalg_lu_factor_ex_out));
  m.impl("linalg_lu_solve.out", TORCH_FN(matmul::linalg_lu_solve_out));
  m.impl("_linalg_solve_ex.result", TORCH_FN(matmul::linalg_solve_ex_out));
  m.impl("linalg_inv_ex.inverse", TORCH_FN(matmul::linalg_inv_ex_out));
  m.impl("_linalg_det.result", TORCH_FN(matmul::linalg_det_out));
  m.impl("_linalg_slogdet.sign", TORCH_FN(matmul::linalg_slogdet_out));
  m.impl("linalg_cholesky_ex.L", TORCH_FN(matmul::linalg_cholesky_ex_out));
  m.impl("lu_unpack.out", TORCH_FN(matmul::lu_unpack_out));
  m.impl("linalg_lu.out", TORCH_FN(matmul::linalg_lu_out));
  m.impl("linalg_qr.out", TORCH_FN(matmul::linalg_qr_out));
  m.impl("_cholesky_solve_helper", TORCH_FN(matmul::cholesky_solve_helper));
  m.impl("cholesky_inverse", TORCH_FN(matmul::cholesky_inverse));
  m.impl("cholesky_inverse.out", TORCH_FN(matmul::cholesky_inverse_out));
  m.impl("_cdist_forward", TORCH_FN(matmul::cdist_forward));
  m.impl("_cdist_backward", TORCH_FN(matmul::cdist_backward));
  m.impl("linalg_solve_triangular", TORCH_FN(matmul::linalg_solve_triangular));
  m.impl("linalg_solve_triangular.out", TORCH_FN(matmul::linalg_solve_triangular_out));
}

}  // namespace torchneuron::aten
