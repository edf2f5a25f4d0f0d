// int4 weight-only quantization on neuron with CPU PyTorch's layout and checks:
// _convert_weight_to_int4pack_for_cpu and _weight_int4pack_mm_for_cpu (csrc/kernels/int4_weight).
// The packed bytes follow ATen's instruction-set level, as CPU's do, so a weight packed on either
// side can be moved to the other and used there.
#include <ATen/Version.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <string>

#include "aten/device/neuron_tensor.h"
#include "kernels/int4_weight.h"

namespace torchneuron::aten {
namespace lowp_pack {
namespace {

// ATen's level is fixed at start-up (ATEN_CPU_CAPABILITY, else the CPU's best).
kernels::Int4PackLayout cpu_layout() {
  static const kernels::Int4PackLayout layout = [] {
    const std::string level = at::get_cpu_capability();
    if (level == "AVX512") return kernels::Int4PackLayout::kHalves64;
    if (level == "AVX2") return kernels::Int4PackLayout::kHalves32;
    return kernels::Int4PackLayout::kPairs32;
  }();
  return layout;
}

}  // namespace

at::Tensor convert_weight_to_int4pack_for_cpu(const at::Tensor& weight, int64_t /*inner_k_tiles: unused, as on CPU*/) {
  TORCH_CHECK(weight.dim() == 2, "_convert_weight_to_int4pack_cpu : expect weight to be 2D tensor.");
  TORCH_CHECK(weight.scalar_type() == c10::kInt, "_convert_weight_to_int4pack_cpu : expect weight to be kInt.");
  const int64_t n = weight.size(0), k = weight.size(1);
  TORCH_CHECK(n % 16 == 0, "_convert_weight_to_int4pack_cpu : expect N to be dividable by 16");
  TORCH_CHECK(k % 2 == 0, "_convert_weight_to_int4pack: expect K to be dividable by 2");
  const at::Tensor w = weight.contiguous();
  at::Tensor packed = at::empty({n, k / 2}, w.options().dtype(c10::kByte));
  if (packed.numel() == 0) return packed;
  const int32_t* src = w.data_ptr<int32_t>();
  uint8_t* dst = packed.data_ptr<uint8_t>();
  const kernels::Int4PackLayout layout = cpu_layout();
  enqueue(packed, "aten::_convert_weight_to_int4pack_for_cpu", {&w},
          [=] { kernels::int4_pack(src, n, k, layout, dst); });
  return packed;
}

at::Tensor weight_int4pack_mm_for_cpu(const at::Tensor& a, const at::Tensor& b, int64_t group_size,
                                      const at::Tensor& scales_zeros) {
  const c10::ScalarType dtype = a.scalar_type();
  TORCH_CHECK(dtype == c10::kFloat || dtype == c10::kBFloat16 || dtype == c10::kHalf,
              "_weight_int4pack_mm_cpu : expect A to be either 32-bit or 16-bit float tensor.");
  TORCH_CHECK(a.dim() == 2, "_weight_int4pack_mm_cpu : expect A to be 2D tensor.");
  TORCH_CHECK(a.is_contiguous(), "_weight_int4pack_mm_cpu : expect A to be contiguous.");
  TORCH_CHECK(b.scalar_type() == c10::kByte, "_weight_int4pack_mm_cpu : expect B to be uint8 tensor.");
  TORCH_CHECK(b.is_contiguous(), "_weight_int4pack_mm_cpu : expect B to be contiguous.");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  TORCH_CHECK(b.size(1) == k / 2, "_weight_int4pack_mm_cpu : expect B.size(1) to be K/2, got ", b.size(1));
  TORCH_CHECK(group_size == 32 || group_size == 64 || group_size == 128 || group_size == 256,
              "_weight_int4pack_mm_cpu: expect qGroupSize to be 32, 64, 128 or 256, got ", group_size);
  TORCH_CHECK(k % group_size == 0, "_weight_int4pack_mm_cpu: expect K to be divisible by qGroupSize, got K:", k,
              ", qGroupSize:", group_size);
  TORCH_CHECK(scales_zeros.dim() == 3 && scales_zeros.size(1) == n && scales_zeros.size(2) == 2,
              "_weight_int4pack_mm_cpu: expect qScaleAndZeros to be 3d tensor with sizes [:, ", n, ", 2]");
  TORCH_CHECK(scales_zeros.scalar_type() == dtype, "expected scalar type ", dtype, " but found ",
              scales_zeros.scalar_type());
  // CPU reads past a short qScaleAndZeros; neuron refuses it.
  TORCH_CHECK(scales_zeros.size(0) >= k / group_size, "_weight_int4pack_mm: qScaleAndZeros has ",
              scales_zeros.size(0), " groups, K / qGroupSize = ", k / group_size, " are needed");
  const kernels::Int4PackLayout layout = cpu_layout();
  const int64_t block = kernels::int4_pack_block_rows(layout);
  const int64_t last_block = n % block == 0 ? std::min(n, block) : n % block;
  TORCH_CHECK(n % 16 == 0, "Unsupported n block size: ", last_block);
  check_same_device("_weight_int4pack_mm_for_cpu", a.device(), {&b, &scales_zeros});
  const at::Tensor sz = scales_zeros.contiguous();
  at::Tensor out = at::empty({m, n}, a.options());
  if (out.numel() == 0) return out;
  kernels::Int4MatmulArgs args;
  args.dtype = to_kernel_dtype(dtype);
  args.m = m, args.n = n, args.k = k, args.group_size = group_size;
  args.x = a.data_ptr();
  args.packed = b.data_ptr<uint8_t>();
  args.scales_zeros = sz.data_ptr();
  args.out = out.data_ptr();
  args.layout = layout;
  enqueue(out, "aten::_weight_int4pack_mm_for_cpu", {&a, &b, &sz}, [args] { kernels::int4_weight_mm(args); });
  return out;
}

}  // namespace lowp_pack

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_convert_weight_to_int4pack_for_cpu", TORCH_FN(lowp_pack::convert_weight_to_int4pack_for_cpu));
  m.impl("_weight_int4pack_mm_for_cpu", TORCH_FN(lowp_pack::weight_int4pack_mm_for_cpu));
}

}  // namespace torchneuron::aten
