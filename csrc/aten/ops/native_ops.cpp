// Factories, metadata ops (views, resize_, set_) and data fills that run natively on neuron.
#include <ATen/Dispatch.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/geometric_ops.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/DeviceGuard.h>

#include <limits>

#include "aten/fallback/cpu_fallback.h"
#include "aten/device/generator.h"
#include "aten/ops/fewer_dims.h"
#include "aten/ops/native_ops.h"
#include "aten/device/neuron_tensor.h"
#include "kernels/copy.h"
#include "kernels/random.h"

namespace torchneuron::aten {
namespace {

constexpr c10::DispatchKeySet kNeuronKeys(c10::DispatchKey::PrivateUse1);

c10::Device target_device(std::optional<c10::Device> device) {
  c10::Device resolved = device.value_or(c10::Device(c10::DeviceType::PrivateUse1));
  TORCH_CHECK(resolved.type() == c10::DeviceType::PrivateUse1, "expected a neuron device, got ", resolved);
  if (!resolved.has_index()) {
    resolved.set_index(static_cast<c10::DeviceIndex>(runtime::current_device()));
  }
  runtime_call([&] { runtime::check_device_index(resolved.index()); });
  return resolved;
}

void check_factory_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(layout.value_or(c10::kStrided) == c10::kStrided,
              "neuron tensors must be strided, got layout ", *layout);
  TORCH_CHECK(!pin_memory.value_or(false),
              "pin_memory=True applies to CPU tensors only; neuron memory is device memory.");
}

}  // namespace

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_factory_options(layout, pin_memory);
  const c10::DeviceGuard guard(target_device(device));
  return at::detail::empty_generic(size, neuron_allocator(), kNeuronKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_factory_options(layout, pin_memory);
  const c10::DeviceGuard guard(target_device(device));
  return at::detail::empty_strided_generic(size, stride, neuron_allocator(), kNeuronKeys,
                                           c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  at::TensorImpl* impl = self.unsafeGetTensorImpl();
  // As on the CPU, resizing to the sizes a tensor has keeps its strides: an out= view that is
  // already the right shape (a transposed or narrowed slice) stays a view of the same elements.
  if (self.sizes() != size) {
    impl->set_sizes_contiguous(size);
    const size_t needed = static_cast<size_t>(
        at::detail::computeStorageNbytesContiguous(size, self.dtype().itemsize(), self.storage_offset()));
    if (needed > self.storage().nbytes()) {
      // Grows through the hooks' resizePrivateUse1Bytes, which keeps the old bytes.
      at::native::resize_bytes_nocuda(self.storage(), c10::SymInt(static_cast<int64_t>(needed)));
    }
  }
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "Unsupported memory format for resize_: ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage_(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                         c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  at::OptionalIntArrayRef stride_opt =
      stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt;
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, stride_opt, /*resize_storage=*/false);
  return self;
}

at::Tensor& set_source_storage_(at::Tensor& self, c10::Storage source) {
  const int64_t elements = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage_(self, std::move(source), 0, {elements}, {});
}

at::Tensor& set_empty_(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, neuron_allocator(), /*resizable=*/true);
  return set_storage_(self, std::move(empty), 0, {0}, {});
}

at::Tensor& fill_scalar_(at::Tensor& self, const c10::Scalar& value) {
  if (self.numel() == 0) return self;
  if (self.is_complex() || value.isComplex() || !has_kernel_dtype(self.scalar_type())) {
    // Complex values and dtypes the kernels only store take the host path: one element made on
    // the host, broadcast by the copy.
    self.copy_(at::full({}, value, self.options().device(c10::kCPU)));
    return self;
  }
  const kernels::FillValue fill = fill_value(value);
  if (self.is_contiguous()) {
    // zero_ and fill_ are the commonest tiny ops: capture three words, not a 272-byte view
    // that the launch copies twice.
    void* data = self.data_ptr();
    const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
    const int64_t numel = self.numel();
    enqueue(self, "aten::fill_", {&self}, [data, dtype, numel, fill] {
      kernels::StridedView flat;
      flat.data = data;
      flat.dtype = dtype;
      flat.ndim = 1;
      flat.sizes[0] = numel;
      flat.strides[0] = 1;
      kernels::fill(flat, fill);
    });
    return self;
  }
  const kernels::StridedView view = strided_view(fewer_dims(self));
  enqueue(self, "aten::fill_", {&self}, [view, fill] { kernels::fill(view, fill); });
  return self;
}

at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  if (value.device().is_cpu()) return fill_scalar_(self, value.item());
  self.copy_(value);  // broadcast on the device; no host round trip
  return self;
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar_(self, 0); }

namespace {

// Reserves `words` of the Philox stream of `generator`, or of the default generator of self's device.
runtime::PhiloxStream reserve_stream(const at::Tensor& self, std::optional<at::Generator> generator, uint64_t words) {
  auto* gen = at::get_generator_or_default<NeuronGeneratorImpl>(generator, default_generator(self.device().index()));
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return gen->reserve(words);
}

// The largest finite value of a floating dtype.
double floating_max(c10::ScalarType type) {
  switch (type) {
    case at::kHalf: return 65504.0;
    case at::kBFloat16: return 3.3895313892515355e38;
    case at::kFloat: return static_cast<double>(std::numeric_limits<float>::max());
    default: return std::numeric_limits<double>::max();
  }
}

template <typename Launch>
at::Tensor& random_fill(at::Tensor& self, const char* op, std::optional<at::Generator> generator,
                        uint64_t words, Launch launch, bool floating_only = true) {
  TORCH_CHECK(!floating_only || at::isFloatingType(self.scalar_type()), op, " expects a floating point tensor, got ",
              self.scalar_type());
  if (self.numel() == 0) return self;
  const runtime::PhiloxStream stream = reserve_stream(self, generator, words);
  const kernels::StridedView view = bits_view(fewer_dims(self));  // uint16/32/64: random_ writes their bits
  enqueue(self, op, {&self}, [view, stream, launch] { launch(view, stream); });
  return self;
}

}  // namespace

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> generator) {
  if (self.is_complex()) {  // as CPU: real and imaginary parts each uniform in [from, to)
    at::Tensor parts = at::view_as_real(self);
    uniform_(parts, from, to, generator);
    return self;
  }
  if (at::isFloatingType(self.scalar_type())) {  // CPU PyTorch's checks, in its order and words
    const double max = floating_max(self.scalar_type());
    TORCH_CHECK(from >= -max && from <= max, "from is out of bounds for ", self.dtype());
    TORCH_CHECK(to >= -max && to <= max, "to is out of bounds for ", self.dtype());
    TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
    TORCH_CHECK(to - from <= max, "uniform_ expects to-from <= std::numeric_limits<", self.scalar_type(),
                ">::max(), but found to=", to, " and from=", from, " which result in to-from to exceed the limit");
  }
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  TORCH_CHECK(std::isfinite(to - from), "uniform_: range [", from, ", ", to, ") is not finite");
  const kernels::StridedView view = strided_view(fewer_dims(self));
  return random_fill(self, "aten::uniform_", generator, kernels::uniform_words_needed(view),
                     [from, to](const kernels::StridedView& v, runtime::PhiloxStream s) {
                       kernels::uniform(v, s, from, to);
                     });
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.is_complex()) {  // as CPU: real and imaginary parts each carry half the variance
    at::Tensor parts = at::view_as_real(self);
    normal_(parts, mean, std / std::sqrt(2.0), generator);
    return self;
  }
  const kernels::StridedView view = strided_view(fewer_dims(self));
  return random_fill(self, "aten::normal_", generator, kernels::normal_words_needed(view),
                     [mean, std](const kernels::StridedView& v, runtime::PhiloxStream s) {
                       kernels::normal(v, s, mean, std);
                     });
}

namespace {

// The largest value random_ draws without an explicit bound: 2^mantissa digits for floating
// dtypes (every integer up to it is exact), the maximum for integers, 1 for bool.
int64_t default_random_max(c10::ScalarType type) {
  switch (type) {
    case at::kFloat: return int64_t{1} << 24;
    case at::kDouble: return int64_t{1} << 53;
    case at::kHalf: return int64_t{1} << 11;
    case at::kBFloat16: return int64_t{1} << 8;
    case at::kBool: return 1;
    case at::kByte: return 255;
    case at::kChar: return 127;
    case at::kShort: return 32767;
    case at::kInt: return 2147483647;
    case at::kLong: return std::numeric_limits<int64_t>::max();
    case at::kUInt16: return 65535;
    case at::kUInt32: return 4294967295;
    case at::kUInt64: return -1;  // as CPU: the maximum cast to int64, which check_random_bounds rejects
    default: TORCH_CHECK(false, "random_ does not support dtype ", type);
  }
}

// CPU PyTorch's bounds on random_'s [from, to_inc] (check_from_to_in_range), with its messages.
void check_random_bounds(int64_t from, int64_t to_inc, const at::Tensor& self) {
  const c10::ScalarType type = self.scalar_type();
  if (at::isFloatingType(type)) {
    const double max = floating_max(type);
    TORCH_CHECK(from >= -max && from <= max, "from is out of bounds for ", self.dtype());
    TORCH_CHECK(to_inc >= -max && to_inc <= max, "to - 1 is out of bounds for ", self.dtype());
    const int digits = type == at::kHalf ? 11 : type == at::kBFloat16 ? 8 : type == at::kFloat ? 24 : 53;
    for (auto [value, name] : {std::pair{from, "from"}, std::pair{to_inc, "to - 1"}}) {
      if (value < -(int64_t{1} << digits) || value > (int64_t{1} << digits)) {
        TORCH_WARN(name, " is out of bounds [-(2^", digits, "), 2^", digits, "]. Due to precision limitations ",
                   self.dtype(), " can support discrete uniform distribution only within this range. ",
                   "This warning will become an error in version 1.7 release, please fix the code in advance");
      }
    }
    return;
  }
  int64_t min = 0, max = std::numeric_limits<int64_t>::max();
  switch (type) {
    case at::kBool: max = 1; break;
    case at::kByte: max = 255; break;
    case at::kChar: min = -128, max = 127; break;
    case at::kShort: min = -32768, max = 32767; break;
    case at::kInt: min = std::numeric_limits<int32_t>::min(), max = std::numeric_limits<int32_t>::max(); break;
    case at::kLong: min = std::numeric_limits<int64_t>::min(); break;
    case at::kUInt16: max = 65535; break;
    case at::kUInt32: max = 4294967295; break;
    default: break;  // kUInt64: [0, INT64_MAX]
  }
  TORCH_CHECK(from >= min && from <= max, "from is out of bounds for ", self.dtype());
  TORCH_CHECK(to_inc >= min && to_inc <= max, "to - 1 is out of bounds for ", self.dtype());
}

at::Tensor& random_range(at::Tensor& self, int64_t from, uint64_t range, std::optional<at::Generator> generator) {
  TORCH_CHECK(!self.is_complex(), "random_ does not support complex tensors");
  const kernels::StridedView view = bits_view(fewer_dims(self));  // uint16/32/64 as the signed type's bits
  return random_fill(
      self, "aten::random_", generator, kernels::integer_words_needed(view),
      [from, range](const kernels::StridedView& v, runtime::PhiloxStream s) { kernels::random_integers(v, s, from, range); },
      /*floating_only=*/false);
}

}  // namespace

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> generator) {
  if (to.has_value()) {
    TORCH_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", *to);
    check_random_bounds(from, *to - 1, self);
    return random_range(self, from, static_cast<uint64_t>(*to) - static_cast<uint64_t>(from), generator);
  }
  if (from == std::numeric_limits<int64_t>::min()) return random_range(self, from, 0, generator);  // all 2^64
  const int64_t max = default_random_max(self.scalar_type());
  if (at::isFloatingType(self.scalar_type())) {
    TORCH_CHECK(from < max, "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to ",
                "dtype, but got from=", from, " > to_inc=", max);
  }
  check_random_bounds(from, max, self);
  return random_range(self, from, static_cast<uint64_t>(max) - static_cast<uint64_t>(from) + 1, generator);
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  return random_from_(self, 0, to, generator);
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> generator) {
  const c10::ScalarType type = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(type != at::kUInt16 && type != at::kUInt32 && type != at::kUInt64,
                              "\"random_\" not implemented for '", type, "'");
  return random_from_(self, 0, std::nullopt, generator);
}

// bernoulli draws uniforms on the device and compares them with p.
at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> generator) {
  check_same_device("aten::bernoulli_", self.device(), {&p});
  at::Tensor draws = at::empty(self.sizes(), self.options().dtype(p.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  uniform_(draws, 0.0, 1.0, generator);
  self.copy_(at::lt(draws, p));
  return self;
}

at::Tensor& bernoulli_scalar_(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  at::Tensor draws = at::empty(self.sizes(), self.options().dtype(at::kFloat));
  uniform_(draws, 0.0, 1.0, generator);
  self.copy_(at::lt(draws, p));
  return self;
}

namespace {

at::Tensor& transformed_fill(at::Tensor& self, const char* op, std::optional<at::Generator> generator,
                             kernels::UniformTransform kind, double a, double b) {
  const kernels::StridedView view = strided_view(fewer_dims(self));
  return random_fill(self, op, generator, kernels::uniform_words_needed(view),
                     [kind, a, b](const kernels::StridedView& v, runtime::PhiloxStream s) {
                       kernels::transformed_uniform(v, s, kind, a, b);
                     });
}

}  // namespace

at::Tensor& exponential_(at::Tensor& self, double lambda, std::optional<at::Generator> generator) {
  TORCH_CHECK(lambda > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambda);
  return transformed_fill(self, "aten::exponential_", generator, kernels::UniformTransform::kExponential, lambda, 0.0);
}

at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  if (!at::isFloatingType(self.scalar_type())) {  // integer tensors: the counted CPU route
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(geometric_)>::call(self, p, generator);
  }
  return transformed_fill(self, "aten::geometric_", generator, kernels::UniformTransform::kGeometric, p, 0.0);
}

at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> generator) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  return transformed_fill(self, "aten::cauchy_", generator, kernels::UniformTransform::kCauchy, median, sigma);
}

at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  normal_(self, mean, std, generator);
  return self.exp_();
}

namespace {

// normal with tensor means and / or standard deviations: standard normals, scaled and shifted.
at::Tensor normal_of(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> generator) {
  if (std.numel() > 0) {
    TORCH_CHECK(std.min().ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
  }
  at::Tensor out = at::empty(at::infer_size(mean.sizes(), std.sizes()), mean.options().dtype(at::result_type(mean, std)));
  normal_(out, 0.0, 1.0, generator);
  return out.mul_(std).add_(mean);
}

}  // namespace

at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> generator) {
  check_same_device("aten::normal", mean.device(), {&std});
  return normal_of(mean, std, generator);
}

at::Tensor normal_tensor_float(const at::Tensor& mean, double std, std::optional<at::Generator> generator) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  at::Tensor out = at::empty(mean.sizes(), mean.options());
  normal_(out, 0.0, std, generator);
  return out.add_(mean);
}

at::Tensor normal_float_tensor(double mean, const at::Tensor& std, std::optional<at::Generator> generator) {
  return normal_of(at::full({}, mean, std.options()), std, generator);
}

at::Tensor multinomial(const at::Tensor& self, int64_t num_samples, bool replacement, std::optional<at::Generator> generator) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(num_samples > 0, "cannot sample n_sample <= 0 samples");
  const int64_t categories = self.size(-1);
  TORCH_CHECK(replacement || num_samples <= categories, "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(categories > 0, "multinomial: number of categories cannot be 0");
  const int64_t rows = self.dim() == 1 ? 1 : self.size(0);
  at::Tensor out = at::empty(self.dim() == 1 ? std::vector<int64_t>{num_samples} : std::vector<int64_t>{rows, num_samples},
                             self.options().dtype(at::kLong));
  if (rows == 0) return out;
  const at::Tensor probs = self.contiguous();
  const runtime::PhiloxStream stream =
      reserve_stream(self, generator, kernels::multinomial_words_needed(rows, categories, num_samples, replacement));
  const kernels::DType dtype = to_kernel_dtype(self.scalar_type());
  const void* pp = probs.data_ptr();
  auto* po = out.mutable_data_ptr<int64_t>();
  enqueue(out, "aten::multinomial", {&probs}, [=] {
    kernels::multinomial(dtype, rows, categories, pp, num_samples, replacement, stream, po);
  });
  return out;
}

namespace {

// The samplers below run per element over a contiguous copy of their parameters (see
// kernels::per_element_words_needed); the result is contiguous, of the parameters' dtype.
template <typename Launch>
at::Tensor sample_per_element(const at::Tensor& params, const char* op, std::optional<at::Generator> generator,
                              std::initializer_list<const at::Tensor*> inputs, Launch launch) {
  at::Tensor out = at::empty(params.sizes(), params.options());
  if (out.numel() == 0) return out;
  const runtime::PhiloxStream stream = reserve_stream(params, generator, kernels::per_element_words_needed(out.numel()));
  const kernels::DType dtype = to_kernel_dtype(params.scalar_type());
  void* po = out.data_ptr();
  const int64_t n = out.numel();
  enqueue(out, op, inputs, [=] { launch(dtype, n, po, stream); });
  return out;
}

void check_floating(const at::Tensor& t, const char* op) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), "\"", op, "\" not implemented for '", t.scalar_type(), "'");
}

// The operands broadcast to one shape, each contiguous, for kernels that read them per element.
std::vector<at::Tensor> broadcast_contiguous(std::initializer_list<at::Tensor> operands) {
  std::vector<int64_t> shape;
  for (const at::Tensor& t : operands) shape = at::infer_size(shape, t.sizes());
  std::vector<at::Tensor> result;
  for (const at::Tensor& t : operands) result.push_back(t.expand(shape).contiguous());
  return result;
}

}  // namespace

at::Tensor standard_gamma(const at::Tensor& alpha, std::optional<at::Generator> generator) {
  check_floating(alpha, "_standard_gamma");
  const at::Tensor a = alpha.contiguous();
  const void* pa = a.data_ptr();
  return sample_per_element(a, "aten::_standard_gamma", generator, {&a},
                            [pa](kernels::DType dtype, int64_t n, void* out, runtime::PhiloxStream stream) {
                              kernels::standard_gamma(dtype, n, pa, out, stream);
                            });
}

at::Tensor sample_dirichlet(const at::Tensor& alpha, std::optional<at::Generator> generator) {
  check_floating(alpha, "_sample_dirichlet");
  const at::Tensor a = alpha.contiguous();
  const void* pa = a.data_ptr();
  const int64_t k = a.dim() == 0 ? 1 : a.size(-1);
  return sample_per_element(a, "aten::_sample_dirichlet", generator, {&a},
                            [pa, k](kernels::DType dtype, int64_t n, void* out, runtime::PhiloxStream stream) {
                              if (k > 0) kernels::sample_dirichlet(dtype, n / k, k, pa, out, stream);
                            });
}

at::Tensor poisson(const at::Tensor& rate, std::optional<at::Generator> generator) {
  check_floating(rate, "poisson");
  const at::Tensor r = rate.contiguous();
  const void* pr = r.data_ptr();
  return sample_per_element(r, "aten::poisson", generator, {&r},
                            [pr](kernels::DType dtype, int64_t n, void* out, runtime::PhiloxStream stream) {
                              kernels::poisson(dtype, n, pr, out, stream);
                            });
}

at::Tensor binomial(const at::Tensor& count, const at::Tensor& prob, std::optional<at::Generator> generator) {
  check_same_device("binomial", count.device(), {&prob});
  TORCH_CHECK(at::isFloatingType(count.scalar_type()), "binomial only supports floating-point dtypes for count, got: ",
              count.scalar_type());
  TORCH_CHECK(prob.scalar_type() == count.scalar_type(), "Found dtype ", prob.scalar_type(), " but expected ",
              count.scalar_type());
  const std::vector<at::Tensor> operands = broadcast_contiguous({count, prob});
  const at::Tensor &c = operands[0], &p = operands[1];
  const void* pc = c.data_ptr();
  const void* pp = p.data_ptr();
  return sample_per_element(c, "aten::binomial", generator, {&c, &p},
                            [pc, pp](kernels::DType dtype, int64_t n, void* out, runtime::PhiloxStream stream) {
                              kernels::binomial(dtype, n, pc, pp, out, stream);
                            });
}

at::Tensor standard_gamma_grad(const at::Tensor& alpha, const at::Tensor& sample) {
  check_same_device("_standard_gamma_grad", alpha.device(), {&sample});
  check_floating(alpha, "_standard_gamma_grad");
  TORCH_CHECK(sample.scalar_type() == alpha.scalar_type(), "Found dtype ", sample.scalar_type(), " but expected ",
              alpha.scalar_type());
  const std::vector<at::Tensor> operands = broadcast_contiguous({alpha, sample});
  const at::Tensor &a = operands[0], &x = operands[1];
  at::Tensor out = at::empty(a.sizes(), a.options());
  if (out.numel() == 0) return out;
  const kernels::DType dtype = to_kernel_dtype(a.scalar_type());
  const void* pa = a.data_ptr();
  const void* px = x.data_ptr();
  void* po = out.data_ptr();
  const int64_t n = out.numel();
  enqueue(out, "aten::_standard_gamma_grad", {&a, &x}, [=] { kernels::standard_gamma_grad(dtype, n, pa, px, po); });
  return out;
}

at::Tensor dirichlet_grad(const at::Tensor& sample, const at::Tensor& alpha, const at::Tensor& total) {
  check_same_device("_dirichlet_grad", sample.device(), {&alpha, &total});
  check_floating(sample, "_dirichlet_grad");
  TORCH_CHECK(alpha.scalar_type() == sample.scalar_type() && total.scalar_type() == sample.scalar_type(),
              "_dirichlet_grad: expected x, alpha and total of one dtype, got ", sample.scalar_type(), ", ",
              alpha.scalar_type(), " and ", total.scalar_type());
  const std::vector<at::Tensor> operands = broadcast_contiguous({sample, alpha, total});
  const at::Tensor &x = operands[0], &a = operands[1], &t = operands[2];
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) return out;
  const kernels::DType dtype = to_kernel_dtype(x.scalar_type());
  const void* px = x.data_ptr();
  const void* pa = a.data_ptr();
  const void* pt = t.data_ptr();
  void* po = out.data_ptr();
  const int64_t n = out.numel();
  enqueue(out, "aten::_dirichlet_grad", {&x, &a, &t}, [=] { kernels::dirichlet_grad(dtype, n, px, pa, pt, po); });
  return out;
}

// Drawn as int64 on the device, then converted for other dtypes; the checks are CPU PyTorch's.
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> generator, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  const c10::ScalarType dtype = out.scalar_type();
  TORCH_CHECK(dtype != at::kBool && !at::isComplexType(dtype) && has_kernel_dtype(dtype), "\"randperm\" not implemented for '",
              c10::toString(dtype), "'");
  if (dtype == at::kFloat) TORCH_CHECK(n <= (int64_t{1} << 24) + 1, "n cannot be greater than 2^24+1 for Float type.");
  if (dtype == at::kHalf) TORCH_CHECK(n <= 2049, "n cannot be greater than 2049 for Half type.");
  if (dtype == at::kDouble) TORCH_CHECK(n <= (int64_t{1} << 53) + 1, "n cannot be greater than 2^53+1 for Double type.");
  if (at::isIntegralType(dtype, false) && n > 0) {
    AT_DISPATCH_INTEGRAL_TYPES(dtype, "randperm", [&] {
      TORCH_CHECK(n - 1 <= static_cast<int64_t>(std::numeric_limits<scalar_t>::max()), "value cannot be converted to type ",
                  c10::CppTypeToScalarType<scalar_t>::value, " without overflow");
    });
  }
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  at::Tensor perm = dtype == at::kLong && out.is_contiguous() ? out : at::empty({n}, out.options().dtype(at::kLong));
  const runtime::PhiloxStream stream = reserve_stream(out, generator, kernels::randperm_words_needed(n));
  auto* pp = perm.mutable_data_ptr<int64_t>();
  enqueue(perm, "aten::randperm", {}, [=] { kernels::randperm(n, stream, pp); });
  if (!perm.is_same(out)) out.copy_(perm);
  return out;
}

namespace {

bool is_dense_cpu_or_neuron(const at::Tensor& t) {
  const bool device_ok = t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1;
  return device_ok && t.layout() == c10::kStrided && !t.is_quantized() && !t.is_nested();
}

}  // namespace

// c10 counts only its built-in backends as dense; without this, module.to('neuron') would give
// every parameter a new Parameter object and untie shared weights.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  return is_dense_cpu_or_neuron(self) && is_dense_cpu_or_neuron(from);
}

}  // namespace torchneuron::aten
