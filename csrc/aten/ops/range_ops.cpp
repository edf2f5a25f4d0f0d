// Range factories on neuron: linspace composed on the host from native ops, logspace through
// csrc/kernels/sequence, both with CPU PyTorch's arithmetic (the first half of the values counted
// from start, the second from end).
#include <ATen/Dispatch.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/where.h>
#include <c10/util/complex.h>
#include <torch/library.h>

#include <cmath>
#include <type_traits>

#include "aten/device/neuron_tensor.h"
#include "kernels/sequence.h"

namespace torchneuron::aten {
namespace ranges {
namespace {

// end - start as CPU's logspace computes it in the dtype: narrow integers promote to int, int32 /
// int64 wrap around (written here without the overflow C++ leaves undefined), half types round.
template <typename T>
auto span(T end, T start) {
  if constexpr (std::is_integral_v<T> && sizeof(T) >= sizeof(int)) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(end) - static_cast<U>(start));
  } else {
    return end - start;
  }
}

// The kernel's arguments for steps >= 2: start and end converted to the dtype as CPU converts
// Scalars (its range errors included), and the step. A dtype CPU has no logspace for raises its
// error here.
kernels::LogspaceArgs logspace_args(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, double base,
                                    c10::ScalarType type) {
  kernels::LogspaceArgs args;
  args.steps = steps;
  args.base = base;
  if (c10::isComplexType(type)) {
    AT_DISPATCH_COMPLEX_TYPES(type, "logspace_cpu", [&] {
      const scalar_t lo = start.to<scalar_t>(), hi = end.to<scalar_t>();
      const scalar_t step = (hi - lo) / static_cast<scalar_t>(steps - 1);  // c10::complex's division
      args.start = lo.real(), args.start_imag = lo.imag();
      args.end = hi.real(), args.end_imag = hi.imag();
      args.step = step.real(), args.step_imag = step.imag();
    });
    return args;
  }
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, type, "logspace_cpu", [&] {
    const scalar_t lo = start.to<scalar_t>(), hi = end.to<scalar_t>();
    args.start = static_cast<double>(lo);
    args.end = static_cast<double>(hi);
    args.step = static_cast<double>(span(hi, lo)) / static_cast<double>(steps - 1);
  });
  return args;
}

}  // namespace

// CPU PyTorch's formula: the first half counts up from start, the second half down from end.
at::Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::assert_no_internal_overlap(out);
  // As on the CPU, an `out` of `steps` elements keeps its shape (and its strides): the values
  // fill it in its logical order.
  if (out.numel() != steps) at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  if (steps == 1) return out.fill_(start);
  if (out.is_complex()) {  // the same two halves in the complex dtype, as CPU computes them
    const c10::complex<double> lo = start.toComplexDouble(), hi = end.toComplexDouble();
    const c10::complex<double> step = (hi - lo) / static_cast<double>(steps - 1);
    const at::Tensor index = at::arange(steps, out.options().dtype(c10::toRealValueType(out.scalar_type())))
                                 .to(out.scalar_type());
    const at::Tensor rising = at::mul(index, step).add_(lo);
    const at::Tensor falling = at::mul(at::rsub(index, static_cast<double>(steps - 1)), -step).add_(hi);
    const at::Tensor first_half = at::lt(at::arange(steps, out.options().dtype(at::kLong)), steps / 2);
    out.copy_(at::where(first_half, rising, falling).view(out.sizes()));
    return out;
  }
  const bool wide = out.scalar_type() == at::kDouble || at::isIntegralType(out.scalar_type(), true);
  const auto compute = out.options().dtype(wide ? at::kDouble : at::kFloat);
  const double lo = start.toDouble(), hi = end.toDouble();
  const double step = (hi - lo) / static_cast<double>(steps - 1);
  const at::Tensor index = at::arange(steps, compute);
  const at::Tensor rising = at::mul(index, step).add_(lo);
  const at::Tensor falling = at::mul(at::rsub(index, static_cast<double>(steps - 1)), -step).add_(hi);
  out.copy_(at::where(at::lt(index, static_cast<double>(steps / 2)), rising, falling).view(out.sizes()));
  return out;
}

// As on the CPU: `out` resized (without a warning) unless it has `steps` elements, computed
// contiguous and copied into a strided one; one step is a fill with base ** start.
at::Tensor& logspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, double base, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::assert_no_internal_overlap(out);
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  if (steps == 1) {
    const c10::Scalar value = out.is_complex() ? c10::Scalar(std::pow(base, start.to<c10::complex<double>>()))
                                               : c10::Scalar(std::pow(base, start.to<double>()));
    // The value converted to the dtype on the host, where c10 raises CPU's overflow error.
    return out.fill_(at::empty({}, out.options().device(at::kCPU)).fill_(value).item());
  }
  const kernels::LogspaceArgs args = logspace_args(start, end, steps, base, out.scalar_type());
  at::Tensor r = out.is_contiguous() ? out : at::empty({steps}, out.options());
  const kernels::DType dtype = to_kernel_dtype(r.scalar_type());
  void* data = r.data_ptr();
  enqueue(r, "aten::logspace", {}, [=] { kernels::logspace(dtype, args, data); });
  if (!r.is_same(out)) out.copy_(r.view(out.sizes()));
  return out;
}

}  // namespace ranges

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linspace.out", TORCH_FN(ranges::linspace_out));
  m.impl("logspace.out", TORCH_FN(ranges::logspace_out));
}

}  // namespace torchneuron::aten
