#include "kernels/strided.h"

namespace torchneuron::kernels {

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
    case DType::kComplex64:
      return 8;
    case DType::kComplex128:
      return 16;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "bool";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
  }
  return "unknown";
}

bool is_complex(DType dtype) { return dtype == DType::kComplex64 || dtype == DType::kComplex128; }

int64_t StridedView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= sizes[d];
  return n;
}

bool StridedView::is_contiguous() const {
  int64_t expected = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

}  // namespace torchneuron::kernels
