#include "kernels/elementwise.h"

#include <vector>

#include "kernels/copy.h"

namespace torchneuron::kernels {

int64_t ElementwiseArgs::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= sizes[d];
  return n;
}

namespace {

StridedView view_of(const ElementwiseArgs& a, char* data, DType dtype,
                    const std::array<int64_t, kMaxDims>& byte_strides) {
  StridedView view;
  view.data = data;
  view.dtype = dtype;
  view.ndim = a.ndim;
  const auto size = static_cast<int64_t>(element_size(dtype));
  for (int d = 0; d < a.ndim; ++d) {
    view.sizes[d] = a.sizes[d];
    view.strides[d] = byte_strides[d] / size;
  }
  return view;
}

std::array<int64_t, kMaxDims> dense_byte_strides(const ElementwiseArgs& a, DType dtype) {
  std::array<int64_t, kMaxDims> strides{};
  int64_t stride = static_cast<int64_t>(element_size(dtype));
  for (int d = a.ndim - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= a.sizes[d];
  }
  return strides;
}

}  // namespace

void with_dtypes(const ElementwiseArgs& args, DType input_dtype, DType output_dtype, int first_input,
                 const std::function<void(const ElementwiseArgs&)>& body) {
  ElementwiseArgs a = args;
  const auto numel = static_cast<size_t>(a.numel());
  std::vector<std::vector<char>> buffers;
  for (int k = first_input; k < a.num_operands; ++k) {
    if (a.dtypes[k] == input_dtype || a.is_scalar[k]) continue;
    buffers.emplace_back(numel * element_size(input_dtype));
    const auto strides = dense_byte_strides(a, input_dtype);
    copy(view_of(a, buffers.back().data(), input_dtype, strides), view_of(a, a.data[k], a.dtypes[k], a.strides[k]));
    a.data[k] = buffers.back().data();
    a.strides[k] = strides;
    a.dtypes[k] = input_dtype;
  }
  if (a.dtypes[0] == output_dtype) {
    body(a);
    return;
  }
  const StridedView output = view_of(a, a.data[0], a.dtypes[0], a.strides[0]);
  std::vector<char> staging(numel * element_size(output_dtype));
  a.data[0] = staging.data();
  a.strides[0] = dense_byte_strides(a, output_dtype);
  a.dtypes[0] = output_dtype;
  body(a);
  copy(output, view_of(a, staging.data(), output_dtype, a.strides[0]));
}

}  // namespace torchneuron::kernels
