// Native neuron implementations of ATen operators; register_ops.cpp maps schemas onto them.
// Each checks its arguments on the host, allocates outputs, and enqueues a csrc/kernels kernel.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/Storage.h>

#include <functional>
#include <optional>

namespace torchneuron::aten {

// mm (or bmm) into a fresh row-major [M, N] (or [B, M, N]) `result` in one device job with
// prologue(row_begin, row_end), which writes those rows of `a`, before the product reads them,
// and epilogue(row_begin, row_end) on the product's rows once they are final: rows counted
// across the batch, each block while it is still in cache (compiled programs fuse their kernels
// here; see kernels::gemm_with_row_hooks). Either hook may be empty. With a prologue, `a` must
// be row-major. False, with nothing enqueued, when the operands need the op's general path
// (dtype, device or shape checks, a CPU fallback).
bool product_with_row_hooks(const at::Tensor& result, const at::Tensor& a, const at::Tensor& b,
                            std::function<void(int64_t, int64_t)> prologue,
                            std::function<void(int64_t, int64_t)> epilogue);

// Factories.
at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format);
at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory);

// Metadata: views, resize and set.
at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset);
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format);
at::Tensor& set_storage_(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                         c10::IntArrayRef size, c10::IntArrayRef stride);
at::Tensor& set_source_storage_(at::Tensor& self, c10::Storage source);
at::Tensor& set_empty_(at::Tensor& self);

// Data.
at::Tensor& fill_scalar_(at::Tensor& self, const c10::Scalar& value);
at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value);
at::Tensor& zero_(at::Tensor& self);
at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> generator);
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator);
at::Tensor& exponential_(at::Tensor& self, double lambda, std::optional<at::Generator> generator);
at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> generator);
at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> generator);
at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator);
at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> generator);
at::Tensor normal_tensor_float(const at::Tensor& mean, double std, std::optional<at::Generator> generator);
at::Tensor normal_float_tensor(double mean, const at::Tensor& std, std::optional<at::Generator> generator);
at::Tensor multinomial(const at::Tensor& self, int64_t num_samples, bool replacement, std::optional<at::Generator> generator);
at::Tensor standard_gamma(const at::Tensor& alpha, std::optional<at::Generator> generator);
at::Tensor sample_dirichlet(const at::Tensor& alpha, std::optional<at::Generator> generator);
at::Tensor poisson(const at::Tensor& rate, std::optional<at::Generator> generator);
at::Tensor binomial(const at::Tensor& count, const at::Tensor& prob, std::optional<at::Generator> generator);
at::Tensor standard_gamma_grad(const at::Tensor& alpha, const at::Tensor& sample);
at::Tensor dirichlet_grad(const at::Tensor& sample, const at::Tensor& alpha, const at::Tensor& total);
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> generator, at::Tensor& out);
at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> generator);
at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> generator);
at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> generator);
at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> generator);
at::Tensor& bernoulli_scalar_(at::Tensor& self, double p, std::optional<at::Generator> generator);
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from);

// Copies between CPU and neuron and between neuron devices (copy_ reaches these).
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst);
c10::Scalar local_scalar_dense(const at::Tensor& self);

}  // namespace torchneuron::aten
