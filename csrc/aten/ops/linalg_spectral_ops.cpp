// The singular value decomposition (`_linalg_svd`: linalg.svd, svdvals, pinv, matrix_rank, the
// nuclear and spectral norms, ...) and the symmetric / Hermitian eigendecomposition
// (`_linalg_eigh`: linalg.eigh, eigvalsh) on neuron, through csrc/kernels/linalg's LAPACK drivers.
// Results have CPU PyTorch's column-major layout. Singular vectors and eigenvectors are unique only
// up to sign (phase, for complex): ours are LAPACK's (OpenBLAS's), which may differ from CPU's
// (MKL's) in that choice.
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_eigh_ops.h>
#include <ATen/ops/_linalg_svd_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "kernels/linalg.h"
#include "runtime/errors.h"

namespace torchneuron::aten {
namespace {

bool spectral_input(const at::Tensor& t) {
  const c10::ScalarType type = t.scalar_type();
  return (type == c10::kFloat || type == c10::kDouble || type == c10::kComplexFloat || type == c10::kComplexDouble) &&
         t.layout() == c10::kStrided;
}

std::vector<int64_t> with_matrix(const at::Tensor& t, std::initializer_list<int64_t> matrix) {
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end() - 2);
  sizes.insert(sizes.end(), matrix);
  return sizes;
}

int64_t batch_count(const at::Tensor& t) {
  int64_t count = 1;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) count *= t.size(d);
  return count;
}

void copy_into(at::Tensor& out, const at::Tensor& value) {
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
}

// CPU PyTorch's message for a decomposition that failed, raised on the queue (a device error at
// the next synchronization).
void raise_failures(const char* name, const char* repeated, const int32_t* info, int64_t batch, bool batched) {
  for (int64_t i = 0; i < batch; ++i) {
    if (info[i] == 0) continue;
    const std::string where = batched ? "(Batch element " + std::to_string(i) + "): " : "";
    if (info[i] == -4) {
      throw runtime::KernelError(std::string(name) + ": " + where +
                                 "The algorithm failed to converge because the input matrix contained non-finite values.");
    }
    throw runtime::KernelError(std::string(name) + ": " + where +
                               "The algorithm failed to converge because the input matrix is ill-conditioned or has too "
                               "many repeated " + repeated + " (error code: " + std::to_string(info[i]) + ").");
  }
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> linalg_svd_out(const at::Tensor& A, bool full_matrices, bool compute_uv,
                                                                 std::optional<c10::string_view> driver, at::Tensor& U,
                                                                 at::Tensor& S, at::Tensor& Vh) {
  TORCH_CHECK(A.dim() >= 2, "linalg.svd: The input tensor A must have at least 2 dimensions.");
  if (!spectral_input(A)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_linalg_svd, U)>::call(A, full_matrices, compute_uv,
                                                                                              driver, U, S, Vh);
  }
  TORCH_CHECK(!driver.has_value(), "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
              "cuSOLVER backend.");
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), batch = batch_count(A);
  const bool full = compute_uv && full_matrices;
  const int64_t u_cols = full ? m : k, vt_rows = full ? n : k;
  const at::Tensor work = A.mT().clone(at::MemoryFormat::Contiguous);  // column-major
  std::vector<int64_t> value_sizes(A.sizes().begin(), A.sizes().end() - 2);
  value_sizes.push_back(k);
  const at::Tensor values = at::empty(value_sizes, A.options().dtype(c10::toRealValueType(A.scalar_type())));
  // Column-major m x u_cols and vt_rows x n matrices, as row-major [u_cols, m] and [n, vt_rows].
  at::Tensor u_work = compute_uv ? at::zeros(with_matrix(A, {u_cols, m}), A.options()) : at::Tensor();
  at::Tensor vt_work = compute_uv ? at::zeros(with_matrix(A, {n, vt_rows}), A.options()) : at::Tensor();
  if (batch > 0 && k > 0) {
    const kernels::DType dtype = to_kernel_dtype(A.scalar_type());
    const kernels::SvdVectors vectors =
        !compute_uv ? kernels::SvdVectors::kNone : full ? kernels::SvdVectors::kFull : kernels::SvdVectors::kReduced;
    void *pa = work.data_ptr(), *ps = values.data_ptr();
    void* pu = compute_uv ? u_work.data_ptr() : nullptr;
    void* pvt = compute_uv ? vt_work.data_ptr() : nullptr;
    const bool batched = A.dim() > 2;
    enqueue(values, "aten::_linalg_svd", {&work, &u_work, &vt_work}, [=] {
      std::vector<int32_t> info(static_cast<size_t>(batch));
      kernels::svd(dtype, batch, m, n, vectors, pa, ps, pu, pvt, info.data());
      raise_failures("linalg.svd", "singular values", info.data(), batch, batched);
    });
  } else if (full) {
    // No singular values: the full U and Vh are identities (CPU's choice).
    u_work.copy_(at::eye(m, A.options()).expand(u_work.sizes()));
    vt_work.copy_(at::eye(n, A.options()).expand(vt_work.sizes()));
  }
  const at::Tensor nothing = at::empty({0}, A.options());
  copy_into(U, compute_uv ? u_work.mT() : nothing);
  copy_into(S, values);
  copy_into(Vh, compute_uv ? vt_work.mT() : nothing);
  return {U, S, Vh};
}

std::tuple<at::Tensor&, at::Tensor&> linalg_eigh_out(const at::Tensor& A, c10::string_view uplo, bool compute_v,
                                                    at::Tensor& eigenvalues, at::Tensor& eigenvectors) {
  TORCH_CHECK(A.dim() >= 2, "linalg.eigh: The input tensor A must have at least 2 dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2), "linalg.eigh: A must be batches of square matrices, but they are ", A.size(-2),
              " by ", A.size(-1), " matrices");
  TORCH_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u",
              "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  if (!spectral_input(A)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_linalg_eigh, eigenvalues)>::call(
        A, uplo, compute_v, eigenvalues, eigenvectors);
  }
  const int64_t n = A.size(-1), batch = batch_count(A);
  const at::Tensor work = A.mT().clone(at::MemoryFormat::Contiguous);  // column-major A
  std::vector<int64_t> value_sizes(A.sizes().begin(), A.sizes().end() - 1);
  const at::Tensor values = at::empty(value_sizes, A.options().dtype(c10::toRealValueType(A.scalar_type())));
  if (batch > 0 && n > 0) {
    const kernels::DType dtype = to_kernel_dtype(A.scalar_type());
    const bool upper = uplo == "U" || uplo == "u", batched = A.dim() > 2;
    void *pa = work.data_ptr(), *pw = values.data_ptr();
    enqueue(values, "aten::_linalg_eigh", {&work}, [=] {
      std::vector<int32_t> info(static_cast<size_t>(batch));
      kernels::eigh(dtype, batch, n, upper, compute_v, pa, pw, info.data());
      raise_failures("linalg.eigh", "eigenvalues", info.data(), batch, batched);
    });
  }
  copy_into(eigenvalues, values);
  copy_into(eigenvectors, compute_v ? work.mT() : at::empty({0}, A.options()));
  return {eigenvalues, eigenvectors};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_linalg_svd.U", TORCH_FN(linalg_svd_out));
  m.impl("_linalg_eigh.eigenvalues", TORCH_FN(linalg_eigh_out));
}

}  // namespace torchneuron::aten
