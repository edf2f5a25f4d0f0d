// Discrete Fourier transforms on neuron: torch.fft's _fft_c2c / _fft_r2c / _fft_c2r (and their
// out= forms) over float and double, complex or real, in any set of dims (csrc/kernels/fft).
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_fft_c2c_ops.h>
#include <ATen/ops/_fft_c2r_ops.h>
#include <ATen/ops/_fft_r2c_ops.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <cmath>
#include <utility>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "kernels/fft.h"

namespace torchneuron::aten {
namespace matmul {

// ---- discrete Fourier transforms (torch.fft) -----------------------------------------------

// ATen's fft_norm_mode: 0 none, 1 by 1 / sqrt(n), 2 by 1 / n, n the signal's element count.
double fft_scale(int64_t normalization, const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims) {
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(sizes[d]);
  if (normalization == 1) return 1.0 / std::sqrt(n);
  if (normalization == 2) return 1.0 / n;
  return 1.0;
}

std::vector<int64_t> fft_dims(c10::IntArrayRef dim, int64_t ndim) {
  std::vector<int64_t> dims;
  for (int64_t d : dim) dims.push_back(at::maybe_wrap_dim(d, ndim));
  return dims;
}

bool fft_complex_ok(const at::Tensor& t) {
  return t.scalar_type() == c10::kComplexFloat || t.scalar_type() == c10::kComplexDouble;
}

at::Tensor& fft_c2c_out(const at::Tensor& self, c10::SymIntArrayRef dim, int64_t normalization, bool forward,
                        at::Tensor& out) {
  if (!fft_complex_ok(self)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_fft_c2c, out)>::call(
        self, C10_AS_INTARRAYREF_SLOW(dim), normalization, forward, out);
  }
  const std::vector<int64_t> dims = fft_dims(C10_AS_INTARRAYREF_SLOW(dim), self.dim());
  const std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  at::native::resize_output(out, self.sizes());
  at::Tensor work = out.is_contiguous() ? out : at::empty(self.sizes(), self.options());
  work.copy_(self.resolve_conj());
  const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
  const double scale = fft_scale(normalization, sizes, dims);
  void* data = work.data_ptr();
  enqueue(work, "aten::_fft_c2c", {}, [=] { kernels::fft_c2c(dtype, sizes, dims, forward, scale, data); });
  if (!work.is_same(out)) out.copy_(work);
  return out;
}

at::Tensor fft_c2c(const at::Tensor& self, c10::SymIntArrayRef dim, int64_t normalization, bool forward) {
  at::Tensor out = at::empty({0}, self.options());
  return fft_c2c_out(self, dim, normalization, forward, out);
}

at::Tensor& fft_r2c_out(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization, bool onesided,
                        at::Tensor& out) {
  if ((self.scalar_type() != c10::kFloat && self.scalar_type() != c10::kDouble) || dim.empty()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_fft_r2c, out)>::call(self, dim, normalization,
                                                                                              onesided, out);
  }
  const std::vector<int64_t> dims = fft_dims(dim, self.dim());
  const std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  const at::Tensor input = self.contiguous();
  at::Tensor full = at::empty(self.sizes(), self.options().dtype(c10::toComplexType(self.scalar_type())));
  const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
  const double scale = fft_scale(normalization, sizes, dims);
  const void* in = input.data_ptr();
  void* data = full.data_ptr();
  enqueue(full, "aten::_fft_r2c", {&input}, [=] { kernels::fft_r2c(dtype, sizes, dims, scale, in, data); });
  const int64_t last = dims.back();
  const at::Tensor result = onesided ? full.narrow(last, 0, sizes[last] / 2 + 1) : full;
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

at::Tensor fft_r2c(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization, bool onesided) {
  at::Tensor out = at::empty({0}, self.options().dtype(c10::toComplexType(self.scalar_type())));
  return fft_r2c_out(self, dim, normalization, onesided, out);
}

at::Tensor& fft_c2r_out(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization, c10::SymInt last_dim_size,
                        at::Tensor& out) {
  if (!fft_complex_ok(self) || dim.empty()) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(_fft_c2r, out)>::call(
        self, dim, normalization, last_dim_size.expect_int(), out);
  }
  const int64_t n = last_dim_size.expect_int();
  TORCH_CHECK(n >= 1, "Invalid number of data points (", n, ") specified");
  const std::vector<int64_t> dims = fft_dims(dim, self.dim());
  const std::vector<int64_t> in_sizes(self.sizes().begin(), self.sizes().end());
  std::vector<int64_t> out_sizes = in_sizes;
  out_sizes[dims.back()] = n;
  const at::Tensor input = self.resolve_conj().contiguous();
  at::native::resize_output(out, out_sizes);
  at::Tensor result = out.is_contiguous() ? out : at::empty(out_sizes, out.options());
  const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
  const double scale = fft_scale(normalization, out_sizes, dims);
  const void* in = input.data_ptr();
  void* data = result.data_ptr();
  enqueue(result, "aten::_fft_c2r", {&input}, [=] { kernels::fft_c2r(dtype, in_sizes, dims, n, scale, in, data); });
  if (!result.is_same(out)) out.copy_(result);
  return out;
}

at::Tensor fft_c2r(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization, c10::SymInt last_dim_size) {
  at::Tensor out = at::empty({0}, self.options().dtype(c10::toRealValueType(self.scalar_type())));
  return fft_c2r_out(self, dim, normalization, std::move(last_dim_size), out);
}

}  // namespace matmul

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fft_c2c", TORCH_FN(matmul::fft_c2c));
  m.impl("_fft_c2c.out", TORCH_FN(matmul::fft_c2c_out));
  m.impl("_fft_r2c", TORCH_FN(matmul::fft_r2c));
  m.impl("_fft_r2c.out", TORCH_FN(matmul::fft_r2c_out));
  m.impl("_fft_c2r", TORCH_FN(matmul::fft_c2r));
  m.impl("_fft_c2r.out", TORCH_FN(matmul::fft_c2r_out));
}

}  // namespace torchneuron::aten
