// Dispatch from a runtime DType to the kernels' storage type: f(T{}) is called with bool,
// the signed integer types and uint8, Half, BFloat16, float, double (std::complex for
// dispatch_dtype, uint16/32/64 for dispatch_convertible_dtype).
#pragma once

#include <complex>
#include <cstdint>
#include <string>

#include "kernels/half.h"
#include "kernels/strided.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {

// Real and bool dtypes; a complex dtype raises KernelError naming `what`.
template <typename F>
void dispatch_real_dtype(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::kBool: return f(bool{});
    case DType::kUInt8: return f(uint8_t{});
    case DType::kInt8: return f(int8_t{});
    case DType::kInt16: return f(int16_t{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kFloat16: return f(Half{});
    case DType::kBFloat16: return f(BFloat16{});
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    default:
      throw runtime::KernelError(std::string(what) + " does not handle " + dtype_name(dtype));
  }
}

// Every dtype, complex included.
template <typename F>
void dispatch_dtype(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::kComplex64: return f(std::complex<float>{});
    case DType::kComplex128: return f(std::complex<double>{});
    default: return dispatch_real_dtype(dtype, what, f);
  }
}

// What copy and fill convert between: every dtype, the unsigned 16-64-bit ones included.
template <typename F>
void dispatch_convertible_dtype(DType dtype, const char* what, F&& f) {
  switch (dtype) {
    case DType::kUInt16: return f(uint16_t{});
    case DType::kUInt32: return f(uint32_t{});
    case DType::kUInt64: return f(uint64_t{});
    default: return dispatch_dtype(dtype, what, f);
  }
}

// Kernels that only move elements: f(E{}) with an unsigned type of the dtype's element size (a
// 16-byte struct for complex128).
struct Bytes16 {
  uint64_t low, high;
};

template <typename F>
void dispatch_element_size(DType dtype, const char* what, F&& f) {
  switch (element_size(dtype)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    case 16: return f(Bytes16{});
    default: throw runtime::KernelError(std::string(what) + " has no kernel for " + dtype_name(dtype));
  }
}

}  // namespace torchneuron::kernels
