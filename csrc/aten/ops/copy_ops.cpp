// Copies between host and device and between devices, and reading a scalar back.
// Host-to-device copies of small or converted data are staged and stay asynchronous; large
// copies from user memory and every device-to-host copy wait, and so raise pending faults.
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/conj_physical.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <optional>

#include "aten/ops/fewer_dims.h"
#include "aten/ops/native_ops.h"
#include "aten/ops/unsigned_dtypes.h"
#include "aten/device/neuron_tensor.h"
#include "kernels/copy.h"
#include "kernels/float8_convert.h"

namespace torchneuron::aten {
namespace {

constexpr int64_t kStagingLimitBytes = 1 << 20;

bool is_neuron(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

runtime::HardwareQueue& queue_of(const at::Tensor& t) {
  return runtime_call([&]() -> runtime::HardwareQueue& { return runtime::device(t.device().index()).queue(); });
}

// The dtypes the copy kernel converts between: those the kernels compute on and uint16/32/64.
bool converts_on_device(c10::ScalarType type) { return has_kernel_dtype(type) || is_wide_unsigned(type); }

kernels::StridedView copy_view(const at::Tensor& tensor) {
  return converts_on_device(tensor.scalar_type()) ? strided_view(tensor) : bits_view(tensor);
}

// A device-side copy converts between those dtypes; a dtype the kernels only store (float8,
// complex32) moves as bits, to the same dtype.
void check_copy_dtypes(const at::Tensor& dst, const at::Tensor& src) {
  TORCH_CHECK(!src.is_conj() && !src.is_neg(),
              "neuron copy: the source is a lazily conjugated or negated view; call "
              ".resolve_conj() / .resolve_neg() on it first.");
  const bool converts = converts_on_device(dst.scalar_type()) && converts_on_device(src.scalar_type());
  const bool as_bits = dst.scalar_type() == src.scalar_type() && copies_as_bits(src.scalar_type());
  TORCH_CHECK(converts || as_bits, "neuron copy: dtype ", src.scalar_type(), " -> ", dst.scalar_type(),
              " is not supported on neuron.");
}

// Waits for command `seq` on `queue` and raises the device's pending fault, if any.
void wait_and_raise(runtime::HardwareQueue& queue, uint64_t seq) {
  runtime_call([&] {
    queue.wait_for(seq);
    queue.raise_pending_fault();
  });
}

void copy_host_to_device(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  // Convert and broadcast on the host, where ATen does it; the device gets dst's dtype.
  at::Tensor staged = src.resolve_conj().resolve_neg().to(dst.scalar_type()).expand(dst.sizes());
  if (!staged.is_contiguous()) staged = staged.contiguous();
  bool owned = !staged.is_alias_of(src);
  const bool pinned_async = non_blocking && !owned && src.is_pinned();
  if (!owned && !pinned_async && staged.nbytes() <= static_cast<size_t>(kStagingLimitBytes)) {
    staged = staged.clone();
    owned = true;
  }
  const auto [dst_view, staged_view] = fewer_dims(dst, staged);
  const kernels::StridedView to = bits_view(dst_view);
  const kernels::StridedView from = bits_view(staged_view);
  // The command holds `staged` when it is ours or pinned, so the memory outlives the copy.
  at::Tensor keep_alive = (owned || pinned_async) ? staged : at::Tensor();
  const uint64_t seq = enqueue_copy(dst, "aten::copy_ (host to device)", {&src},
                               [to, from, keep_alive] { kernels::copy(to, from); });
  if (!owned && !pinned_async) wait_and_raise(queue_of(dst), seq);
}

void copy_device_to_host(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  check_copy_dtypes(src, src);
  const bool direct = dst.scalar_type() == src.scalar_type() && dst.sizes() == src.sizes() &&
                      dst.is_contiguous() && !dst.is_conj() && !dst.is_neg() &&
                      at::has_internal_overlap(dst) != at::MemOverlap::Yes;
  at::Tensor landing = direct ? dst : at::empty(src.sizes(), src.options().device(c10::kCPU));
  const auto [landing_view, src_view] = fewer_dims(landing, src);
  const kernels::StridedView to = bits_view(landing_view);
  const kernels::StridedView from = bits_view(src_view);
  const bool pinned_async = non_blocking && direct && dst.is_pinned();
  at::Tensor keep_alive = pinned_async ? dst : at::Tensor();
  const uint64_t seq = enqueue_copy(src, "aten::copy_ (device to host)", {&src},
                               [to, from, keep_alive] { kernels::copy(to, from); });
  if (pinned_async) return;  // the caller synchronizes before reading, as with CUDA
  wait_and_raise(queue_of(src), seq);
  if (!direct) dst.copy_(landing);
}

std::optional<kernels::Float8Format> float8_format(c10::ScalarType type) {
  if (type == c10::kFloat8_e4m3fn) return kernels::Float8Format::kE4M3FN;
  if (type == c10::kFloat8_e5m2) return kernels::Float8Format::kE5M2;
  return std::nullopt;
}

// Conversions to and from float8 e4m3fn / e5m2 on one device, through float32 as CPU PyTorch
// converts (a double, integer or half value becomes a float first). Returns false for other pairs.
bool copy_float8_on_device(const at::Tensor& dst, const at::Tensor& src_in) {
  const auto to = float8_format(dst.scalar_type()), from = float8_format(src_in.scalar_type());
  if (dst.scalar_type() == src_in.scalar_type() || dst.device() != src_in.device() || !(to || from)) return false;
  if ((!to && !converts_on_device(dst.scalar_type())) || (!from && !converts_on_device(src_in.scalar_type()))) {
    return false;
  }
  at::assert_no_internal_overlap(dst);
  const at::Tensor src = src_in.expand(dst.sizes());
  at::Tensor values;  // float32, contiguous
  if (from) {
    const at::Tensor bytes = src.contiguous();
    values = at::empty(dst.sizes(), dst.options().dtype(c10::kFloat));
    const auto* in = static_cast<const uint8_t*>(bytes.data_ptr());
    float* out = values.data_ptr<float>();
    const int64_t n = values.numel();
    const kernels::Float8Format format = *from;
    enqueue(values, "aten::copy_ (from float8)", {&bytes},
            [in, out, n, format] { kernels::float8_to_float(in, out, n, format); });
  } else {
    values = src.to(c10::kFloat).contiguous();
  }
  if (!to) {
    dst.copy_(values);
    return true;
  }
  const at::Tensor result = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
  const float* in = values.data_ptr<float>();
  auto* out = static_cast<uint8_t*>(result.data_ptr());
  const int64_t n = result.numel();
  const kernels::Float8Format format = *to;
  enqueue(result, "aten::copy_ (to float8)", {&values},
          [in, out, n, format] { kernels::float_to_float8(in, out, n, format); });
  if (!result.is_same(dst)) dst.copy_(result);
  return true;
}

void copy_device_to_device(const at::Tensor& dst, const at::Tensor& src_in) {
  if (copy_float8_on_device(dst, src_in)) return;
  if (dst.scalar_type() != src_in.scalar_type() &&
      (!converts_on_device(dst.scalar_type()) || !converts_on_device(src_in.scalar_type())) &&
      copies_as_bits(dst.scalar_type()) && copies_as_bits(src_in.scalar_type())) {
    // A conversion the kernels cannot do (to or from a stored-only dtype): CPU PyTorch does it.
    at::Tensor host = at::empty(src_in.sizes(), src_in.options().device(c10::kCPU));
    copy_device_to_host(host, src_in, false);
    dst.copy_(host);
    return;
  }
  check_copy_dtypes(dst, src_in);
  at::assert_no_internal_overlap(dst);
  at::Tensor src = src_in.expand(dst.sizes());
  if (dst.device() == src.device() &&
      at::get_overlap_status(dst, src) == at::MemOverlapStatus::Partial) {
    src = src.clone();  // read everything before writing any of it
  }
  if (src.is_complex() && !dst.is_complex()) {
    TORCH_WARN_ONCE("Casting complex values to real discards the imaginary part");
  }
  const auto [dst_view, src_view] = fewer_dims(dst, src);
  const kernels::StridedView to = copy_view(dst_view);
  const kernels::StridedView from = copy_view(src_view);
  if (dst.device() == src.device()) {
    enqueue(dst, "aten::copy_", {&src, &dst}, [to, from] { kernels::copy(to, from); });
    return;
  }
  // Across devices: the source queue first waits for the destination's pending work, does the
  // copy, and later work on the destination waits for it. Both queues stay asynchronous.
  runtime::HardwareQueue& src_queue = queue_of(src);
  runtime::HardwareQueue& dst_queue = queue_of(dst);
  const int src_index = src.device().index();
  const int dst_index = dst.device().index();
  runtime_call([&] {
    src_queue.submit_wait(runtime::current_stream(src_index), dst_queue, dst_queue.last_submitted());
  });
  const uint64_t seq = enqueue_copy(src, "aten::copy_ (device to device)", {&src, &dst},
                               [to, from] { kernels::copy(to, from); });
  runtime_call([&] { dst_queue.submit_wait(runtime::current_stream(dst_index), src_queue, seq); });
}

}  // namespace

namespace {

// A copy between neuron tensors either of which is a lazily conjugated view (the math-bit
// fallbacks resolve a .conj() operand this way): the raw data is copied, then conjugated in place
// when the two sides' bits differ.
void copy_conjugating_on_device(const at::Tensor& dst, const at::Tensor& src) {
  const at::Tensor raw_src = src.is_conj() ? src.conj() : src;  // clears the bit, same memory
  at::Tensor raw_dst = dst.is_conj() ? dst.conj() : dst;
  copy_device_to_device(raw_dst, raw_src);
  if (src.is_conj() != dst.is_conj() && raw_dst.is_complex()) at::conj_physical_out(raw_dst, raw_dst);
}

// A lazily conjugated or negated neuron source: its raw bits go to the host, the lazy bit is
// put back on the host copy, and the ordinary copy from there resolves it (complex data is rare
// on neuron and takes this synchronous route).
void copy_lazy_view_via_host(const at::Tensor& dst, const at::Tensor& src) {
  at::Tensor raw = src.is_conj() ? src.conj() : src;  // clears the bit, same memory
  raw = raw.is_neg() ? raw._neg_view() : raw;
  at::Tensor host = at::empty(raw.sizes(), raw.options().device(c10::kCPU));
  copy_device_to_host(host, raw, false);
  if (src.is_conj()) host = host.conj();
  if (src.is_neg()) host = host._neg_view();
  dst.copy_(host);
}

}  // namespace

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: both tensors must be defined");
  TORCH_CHECK(self.layout() == c10::kStrided && dst.layout() == c10::kStrided,
              "neuron copy supports strided tensors only, got ", self.layout(), " -> ", dst.layout());
  if (dst.numel() == 0) return dst;
  TORCH_CHECK(is_neuron(self) || self.device().is_cpu(), "neuron copy: unsupported source device ",
              self.device());
  TORCH_CHECK(is_neuron(dst) || dst.device().is_cpu(), "neuron copy: unsupported destination device ",
              dst.device());
  if (dst.is_neg() || dst.is_conj()) {
    // As CPU PyTorch: dst's values become self's, so dst's memory takes them with its lazy
    // negation / conjugation undone (it was written raw, a silent sign error).
    at::Tensor raw_dst = dst.is_neg() ? dst._neg_view() : dst;  // clears the bit, same memory
    raw_dst = raw_dst.is_conj() ? raw_dst.conj() : raw_dst;
    at::Tensor value = dst.is_neg() ? self._neg_view() : self;
    value = dst.is_conj() ? value.conj() : value;
    raw_dst.copy_(value, non_blocking);
    return dst;
  }
  if (is_neuron(self) && is_neuron(dst) && (self.is_conj() || dst.is_conj()) && !self.is_neg() && !dst.is_neg()) {
    copy_conjugating_on_device(dst, self);
  } else if (is_neuron(self) && (self.is_conj() || self.is_neg())) {
    copy_lazy_view_via_host(dst, self);
  } else if (is_neuron(dst) && is_neuron(self)) {
    copy_device_to_device(dst, self);
  } else if (is_neuron(dst)) {
    check_copy_dtypes(dst, dst);
    copy_host_to_device(dst, self, non_blocking);
  } else {
    copy_device_to_host(dst, self, non_blocking);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    if (is_neuron(dst)) {
      resize_(dst, self.sizes(), std::nullopt);
    } else {
      dst.resize_(self.sizes());
    }
  }
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  at::Tensor host = at::empty({}, self.options().device(c10::kCPU));
  copy_device_to_host(host, self.reshape({}), false);
  return host.item();
}

}  // namespace torchneuron::aten
