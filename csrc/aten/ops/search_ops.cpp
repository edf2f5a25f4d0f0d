// torch.searchsorted and torch.bucketize on neuron: CPU's argument checks on the host, the
// binary searches on the queue (csrc/kernels/select) over contiguous copies of the operands.
#include <ATen/ScalarOps.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/bucketize_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/searchsorted_ops.h>
#include <torch/library.h>

#include <optional>

#include "aten/device/neuron_tensor.h"
#include "aten/fallback/cpu_fallback.h"
#include "aten/ops/unsigned_dtypes.h"
#include "kernels/select.h"

namespace torchneuron::aten {
namespace search {
namespace {

bool sortable(const at::Tensor& t) {
  return has_kernel_dtype(t.scalar_type()) && !t.is_complex() && t.scalar_type() != at::kBool;
}

at::Tensor search(const at::Tensor& boundaries, const at::Tensor& values, bool out_int32, bool right,
                  std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter_arg) {
  TORCH_CHECK(!side.has_value() || *side == "left" || *side == "right",
              "torch.searchsorted(): side can only be 'left' or 'right' but got ", *side);
  TORCH_CHECK(!side.has_value() || !right || *side == "right", "torch.searchsorted(): side and right can't be set to "
              "opposites, got side of ", *side, " while right was True");
  right = right || (side.has_value() && *side == "right");
  TORCH_CHECK(boundaries.dim() > 0, "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension");
  const bool shared = boundaries.dim() == 1;
  TORCH_CHECK(shared || values.dim() > 0, "torch.searchsorted(): input value can be a scalar only when boundaries tensor "
              "dimension is 1, but we got boundaries tensor dim(", boundaries.dim(), ") and input value's dim(",
              values.dim(), ") numel(", values.numel(), ")");
  TORCH_CHECK(shared || (boundaries.dim() == values.dim() &&
                         boundaries.sizes().slice(0, boundaries.dim() - 1) == values.sizes().slice(0, values.dim() - 1)),
              "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
              "tensor and input value tensor must match, but we got boundaries tensor ", boundaries.sizes(),
              " and input value tensor ", values.sizes());
  at::Tensor sorter;
  if (sorter_arg.has_value() && sorter_arg->defined()) {
    TORCH_CHECK(sorter_arg->scalar_type() == at::kLong, "torch.searchsorted(): sorter must be a tensor of long dtype but got dtype ",
                sorter_arg->scalar_type());
    TORCH_CHECK(sorter_arg->sizes() == boundaries.sizes(), "torch.searchsorted(): boundary and sorter must have the same "
                "size, but got boundary tensor ", boundaries.sizes(), "and got sorter tensor ", sorter_arg->sizes());
    check_same_device("aten::searchsorted", boundaries.device(), {&*sorter_arg});
    sorter = sorter_arg->contiguous();
  }
  check_same_device("aten::searchsorted", boundaries.device(), {&values});
  // CPU's once-per-program notes about the copies a non-contiguous operand costs (one per kind).
#define TORCHNEURON_WARN_NONCONTIGUOUS(what)                                                                    \
  TORCH_WARN_ONCE("torch.searchsorted(): " what " is non-contiguous, this will lower the performance due to extra " \
                  "data copy when converting non-contiguous tensor to contiguous, please use contiguous " what    \
                  " if possible. This message will only appear once per program.")
  if (!values.is_contiguous()) {
    TORCHNEURON_WARN_NONCONTIGUOUS("input value tensor");
  }
  if (!boundaries.is_contiguous()) {
    TORCHNEURON_WARN_NONCONTIGUOUS("boundary tensor");
  }
  if (sorter_arg.has_value() && sorter_arg->defined() && !sorter_arg->is_contiguous()) {
    TORCHNEURON_WARN_NONCONTIGUOUS("sorter tensor");
  }
#undef TORCHNEURON_WARN_NONCONTIGUOUS
  const c10::ScalarType common = at::result_type(boundaries, values);
  const at::Tensor seq = boundaries.to(common).contiguous(), vals = values.to(common).contiguous();
  at::Tensor out = at::empty(values.sizes(), values.options().dtype(out_int32 ? at::kInt : at::kLong));
  kernels::SearchShape shape;
  shape.shared = shared;
  shape.length = boundaries.size(-1);
  shape.per_row = shared ? values.numel() : (values.dim() == 0 ? 1 : values.size(-1));
  shape.rows = shared || shape.per_row == 0 ? 1 : values.numel() / shape.per_row;
  if (out.numel() > 0) {
    const kernels::DType dtype = to_kernel_dtype(common);
    const void* ps = seq.data_ptr();
    const void* pv = vals.data_ptr();
    const int64_t* po = sorter.defined() ? sorter.const_data_ptr<int64_t>() : nullptr;
    void* pout = out.data_ptr();
    enqueue(out, "aten::searchsorted", {&seq, &vals, &sorter},
            [=] { kernels::searchsorted(dtype, shape, ps, po, pv, right, out_int32, pout); });
  }
  return out;
}

bool searchable(const at::Tensor& boundaries, const at::Tensor& values) {
  return sortable(boundaries) && sortable(values);
}

at::Tensor& write_out(const at::Tensor& value, at::Tensor& out) {
  // CPU's check: out is int32 or int64 as out_int32 asks (the value has that dtype).
  TORCH_CHECK(out.scalar_type() == value.scalar_type(), "torch.searchsorted(): output tensor's dtype is wrong, it can "
              "only be Int(int32) or Long(int64) depending on whether out_int32 flag is True, but we got output "
              "tensor's dtype ", out.scalar_type(), " and out_int32 flag is ", value.scalar_type() == at::kInt ? "True" : "False");
  at::native::resize_output(out, value.sizes());
  return out.copy_(value);
}

}  // namespace

at::Tensor searchsorted(const at::Tensor& boundaries, const at::Tensor& values, bool out_int32, bool right,
                        std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  if (is_wide_unsigned(boundaries.scalar_type()) && values.scalar_type() == boundaries.scalar_type()) {
    return search(unsigned_order_keys(boundaries), unsigned_order_keys(values), out_int32, right, side, sorter);
  }
  if (!searchable(boundaries, values)) {
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP2(searchsorted, Tensor)>::call(
        boundaries, values, out_int32, right, side, sorter);
  }
  return search(boundaries, values, out_int32, right, side, sorter);
}

at::Tensor& searchsorted_out(const at::Tensor& boundaries, const at::Tensor& values, bool out_int32, bool right,
                             std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter, at::Tensor& out) {
  return write_out(search::searchsorted(boundaries, values, out_int32, right, side, sorter), out);
}

at::Tensor searchsorted_scalar(const at::Tensor& boundaries, const at::Scalar& value, bool out_int32, bool right,
                               std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  return search::searchsorted(boundaries, at::scalar_to_tensor(value, boundaries.device()), out_int32, right, side, sorter);
}

at::Tensor& searchsorted_scalar_out(const at::Tensor& boundaries, const at::Scalar& value, bool out_int32, bool right,
                                    std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter,
                                    at::Tensor& out) {
  return write_out(search::searchsorted_scalar(boundaries, value, out_int32, right, side, sorter), out);
}

at::Tensor bucketize(const at::Tensor& values, const at::Tensor& boundaries, bool out_int32, bool right) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return search::searchsorted(boundaries, values, out_int32, right, std::nullopt, std::nullopt);
}

at::Tensor& bucketize_out(const at::Tensor& values, const at::Tensor& boundaries, bool out_int32, bool right, at::Tensor& out) {
  return write_out(search::bucketize(values, boundaries, out_int32, right), out);
}

at::Tensor bucketize_scalar(const at::Scalar& value, const at::Tensor& boundaries, bool out_int32, bool right) {
  return search::bucketize(at::scalar_to_tensor(value, boundaries.device()), boundaries, out_int32, right);
}

}  // namespace search

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("searchsorted.Tensor", TORCH_FN(search::searchsorted));
  m.impl("searchsorted.Tensor_out", TORCH_FN(search::searchsorted_out));
  m.impl("searchsorted.Scalar", TORCH_FN(search::searchsorted_scalar));
  m.impl("searchsorted.Scalar_out", TORCH_FN(search::searchsorted_scalar_out));
  m.impl("bucketize.Tensor", TORCH_FN(search::bucketize));
  m.impl("bucketize.Tensor_out", TORCH_FN(search::bucketize_out));
  m.impl("bucketize.Scalar", TORCH_FN(search::bucketize_scalar));
}

}  // namespace torchneuron::aten
