// The kernel library's view of a tensor: a raw buffer, an element type, sizes and strides in
// elements. Kernels take these by value; the aten layer builds them from at::Tensor.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace torchneuron::kernels {

enum class DType : uint8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
  // Converted by copy and fill only; no kernel computes on them (the aten layer maps their
  // arithmetic onto the signed type of their width or converts them first).
  kUInt16,
  kUInt32,
  kUInt64,
};

size_t element_size(DType dtype);
const char* dtype_name(DType dtype);
bool is_complex(DType dtype);

constexpr int kMaxDims = 16;

struct StridedView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> sizes{};
  std::array<int64_t, kMaxDims> strides{};  // in elements

  int64_t numel() const;
  bool is_contiguous() const;
};

}  // namespace torchneuron::kernels
