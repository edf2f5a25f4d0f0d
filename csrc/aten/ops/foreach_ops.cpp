// The _foreach ops that torch.optim's default (foreach) optimizers and clip_grad_norm_ use, as one
// queue command per call over every tensor of the lists, instead of one launch per tensor and op.
// Lists the single command cannot take (other dtypes, non-contiguous or mixed-device tensors)
// run PyTorch's per-tensor implementation, whose ops are native too.
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_norm_native.h>
#include <ATen/ops/_foreach_pow_native.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "aten/device/neuron_tensor.h"
#include "kernels/activation.h"
#include "kernels/elementwise.h"
#include "kernels/parallel.h"
#include "kernels/reduce.h"

namespace torchneuron::aten {
namespace foreach {
namespace {

using kernels::ElementwiseArgs;

// Whether the lists (index-aligned) are float32 / float64, contiguous, on one neuron device,
// with the same sizes at each index (the per-tensor path broadcasts others).
bool single_command(std::initializer_list<at::TensorList> lists) {
  const at::TensorList& first = *lists.begin();
  if (first.empty()) return false;
  const c10::ScalarType dtype = first[0].scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble) return false;
  for (const at::TensorList& list : lists) {
    if (list.size() != first.size()) return false;
    for (size_t i = 0; i < list.size(); ++i) {
      const at::Tensor& t = list[i];
      if (t.scalar_type() != dtype || t.device() != first[0].device() || !t.is_contiguous() ||
          t.sizes() != first[i].sizes()) {
        return false;
      }
    }
  }
  return first[0].device().type() == c10::DeviceType::PrivateUse1;
}

// A 1-D dense operand layout over `numel` elements; a scalar operand travels by value.
struct Dense {
  kernels::DType dtype;
  int64_t numel;
  ElementwiseArgs args;

  Dense(kernels::DType dtype_, int64_t numel_) : dtype(dtype_), numel(numel_) {
    args.ndim = 1;
    args.sizes[0] = numel;
  }
  Dense& tensor(void* data) {
    const int k = args.num_operands++;
    args.data[k] = static_cast<char*>(data);
    args.dtypes[k] = dtype;
    args.strides[k][0] = static_cast<int64_t>(kernels::element_size(dtype));
    return *this;
  }
  // A one-element tensor broadcast over the whole operand (stride 0).
  Dense& broadcast(void* data) {
    tensor(data);
    args.strides[args.num_operands - 1][0] = 0;
    return *this;
  }
  Dense& scalar(double value) {
    const int k = args.num_operands++;
    args.dtypes[k] = dtype;
    args.is_scalar[k] = true;
    args.strides[k][0] = 0;
    if (dtype == kernels::DType::kFloat32) {
      const float typed = static_cast<float>(value);
      std::memcpy(args.scalar_bytes[k].data(), &typed, sizeof(typed));
    } else {
      std::memcpy(args.scalar_bytes[k].data(), &value, sizeof(value));
    }
    return *this;
  }
};

// One list's operand at one index: a tensor of self's size, read piece by piece; a one-element
// device tensor broadcast over the whole (stride 0); or a value the command carries (a CPU scalar
// tensor's, or a scalar argument's).
struct Operand {
  enum Kind { kDense, kBroadcast, kValue } kind = kDense;
  void* data = nullptr;
  double value = 0.0;
};
using Operands = std::vector<Operand>;

Operands pointers_of(at::TensorList list) {
  Operands result;
  for (const at::Tensor& t : list) result.push_back({Operand::kDense, t.data_ptr(), 0.0});
  return result;
}

// The same value at every index.
Operands values(double value, size_t count) { return Operands(count, {Operand::kValue, nullptr, value}); }

// Enqueues one command running `per_tensor(i, layout)` over every tensor of the lists, cut into
// pieces of at most kPiece elements that one parallel loop shares out: a loop per tensor cost
// a compute-pool hand-off per tensor, more than the arithmetic of a 256x256 parameter.
constexpr int64_t kPiece = 32768;  // the elementwise kernels run a range this long inline

void launch(const char* op, at::TensorList self, std::vector<Operands> operands,
            std::function<void(size_t, Dense&)> per_tensor) {
  struct Piece {
    size_t tensor;
    int64_t begin, length;
  };
  std::vector<Piece> pieces;
  for (size_t i = 0; i < self.size(); ++i) {
    const int64_t numel = self[i].numel();
    for (int64_t begin = 0; begin < numel; begin += kPiece) pieces.push_back({i, begin, std::min(kPiece, numel - begin)});
  }
  const kernels::DType dtype = to_kernel_dtype(self[0].scalar_type());
  const int64_t item = static_cast<int64_t>(kernels::element_size(dtype));
  enqueue(self[0], op, {&self[0]}, [=] {
    kernels::parallel_for(static_cast<int64_t>(pieces.size()), 1, [&](int64_t first, int64_t last) {
      for (int64_t p = first; p < last; ++p) {
        const Piece& piece = pieces[p];
        Dense layout(dtype, piece.length);
        for (const Operands& list : operands) {
          const Operand& operand = list[piece.tensor];
          if (operand.kind == Operand::kDense) {
            layout.tensor(static_cast<char*>(operand.data) + piece.begin * item);
          } else if (operand.kind == Operand::kBroadcast) {
            layout.broadcast(operand.data);
          } else {
            layout.scalar(operand.value);
          }
        }
        per_tensor(piece.tensor, layout);
      }
    });
  });
}

// A list op's second list as operands (self passed single_command), or nullopt if it needs the
// per-tensor path. Beside tensors of self's dtype, size and device, it takes what a compiled
// optimizer step divides by: 0-dim tensors of self's dtype on its device (broadcast), and
// floating 0-dim CPU tensors (their values, as a CPU scalar tensor combines with a device tensor;
// one of another dtype only beside a self[i] with dims, whose dtype the result then keeps).
std::optional<Operands> other_operands(at::TensorList self, at::TensorList other) {
  if (other.size() != self.size()) return std::nullopt;
  Operands result;
  for (size_t i = 0; i < self.size(); ++i) {
    const at::Tensor& t = other[i];
    if (t.dim() == 0 && t.device().is_cpu() && at::isFloatingType(t.scalar_type()) &&
        (self[i].dim() > 0 || t.scalar_type() == self[i].scalar_type())) {
      result.push_back({Operand::kValue, nullptr, t.item().toDouble()});
    } else if (t.scalar_type() != self[i].scalar_type() || t.device() != self[i].device() || !t.is_contiguous()) {
      return std::nullopt;
    } else if (t.sizes() == self[i].sizes()) {
      result.push_back({Operand::kDense, t.data_ptr(), 0.0});
    } else if (t.dim() == 0) {
      result.push_back({Operand::kBroadcast, t.data_ptr(), 0.0});
    } else {
      return std::nullopt;
    }
  }
  return result;
}

std::vector<double> values_of(at::ArrayRef<at::Scalar> scalars) {
  std::vector<double> result;
  for (const at::Scalar& s : scalars) result.push_back(s.toDouble());
  return result;
}

// New tensors for an out-of-place form's results, shaped and typed as `self`'s.
std::vector<at::Tensor> results_like(at::TensorList self) {
  std::vector<at::Tensor> result;
  result.reserve(self.size());
  for (const at::Tensor& t : self) result.push_back(at::empty_like(t));
  return result;
}

// out[i] = self[i] op value (a scalar operand), one command; out may be self.
void binary_scalar_into(const char* op, at::TensorList out, at::TensorList self, kernels::BinaryOp kind, double value) {
  launch(op, self, {pointers_of(out), pointers_of(self)}, [kind, value](size_t, Dense& d) {
    d.scalar(value);
    kernels::binary(kind, d.args, {1.0, 1});
  });
}

std::vector<at::Tensor> binary_scalar(const char* op, at::TensorList self, kernels::BinaryOp kind, double value) {
  std::vector<at::Tensor> result = results_like(self);
  binary_scalar_into(op, result, self, kind, value);
  return result;
}

// out[i] = self[i] op other[i] (other scaled by alpha for add and sub), one command; out may be self.
void binary_list_into(const char* op, at::TensorList out, at::TensorList self, Operands other, kernels::BinaryOp kind,
                      double alpha) {
  launch(op, self, {pointers_of(out), pointers_of(self), std::move(other)},
         [kind, alpha](size_t, Dense& d) { kernels::binary(kind, d.args, {alpha, 0}); });
}

std::vector<at::Tensor> binary_list(const char* op, at::TensorList self, Operands other, kernels::BinaryOp kind,
                                    double alpha) {
  std::vector<at::Tensor> result = results_like(self);
  binary_list_into(op, result, self, std::move(other), kind, alpha);
  return result;
}

// out[i] = kind(self[i], t1[i], t2[i]) with the scalar value (addcmul, addcdiv), one command; out may be self.
void ternary_scalar_into(const char* op, at::TensorList out, at::TensorList self, at::TensorList t1, at::TensorList t2,
                         kernels::TernaryOp kind, double value) {
  launch(op, self, {pointers_of(out), pointers_of(self), pointers_of(t1), pointers_of(t2)},
         [kind, value](size_t, Dense& d) { kernels::ternary(kind, d.args, {value, 0}); });
}

// out[i] = kind(self[i]), one command; out may be self.
void unary_into(const char* op, at::TensorList out, at::TensorList self, kernels::UnaryOp kind) {
  launch(op, self, {pointers_of(out), pointers_of(self)}, [kind](size_t, Dense& d) { kernels::unary(kind, d.args); });
}

// out[i] = lerp(self[i], ends[i], weight), one command; out may be self.
void lerp_into(const char* op, at::TensorList out, at::TensorList self, at::TensorList ends, double weight) {
  launch(op, self, {pointers_of(out), pointers_of(self), pointers_of(ends), values(weight, self.size())},
         [weight](size_t, Dense& d) { kernels::ternary(kernels::TernaryOp::kLerp, d.args, {weight, 0}); });
}

void activation_each(const char* op, at::TensorList self, kernels::ActivationOp kind, std::vector<double> params) {
  launch(op, self, {pointers_of(self), pointers_of(self)}, [kind, params](size_t i, Dense& d) {
    kernels::activation(kind, d.args, kernels::ActivationParams{params.size() == 1 ? params[0] : params[i]});
  });
}

}  // namespace

void mul_scalar_(at::TensorList self, const at::Scalar& scalar) {
  if (!single_command({self})) return at::native::foreach_tensor_mul_scalar_kernel_slow_(self, scalar);
  activation_each("aten::_foreach_mul_", self, kernels::ActivationOp::kScale, {scalar.toDouble()});
}

void mul_scalarlist_(at::TensorList self, at::ArrayRef<at::Scalar> scalars) {
  if (!single_command({self}) || scalars.size() != self.size()) {
    return at::native::foreach_tensor_mul_scalarlist_kernel_slow_(self, scalars);
  }
  activation_each("aten::_foreach_mul_", self, kernels::ActivationOp::kScale, values_of(scalars));
}

void mul_tensor_(at::TensorList self, const at::Tensor& other) {
  TORCH_CHECK(other.dim() == 0, "scalar tensor expected to be 0 dim but it has ", other.dim(),
              " dimensions and ", other.numel(), " elements.");
  if (other.device().is_cpu()) return mul_scalar_(self, other.item());
  if (!single_command({self}) || other.scalar_type() != self[0].scalar_type() || other.device() != self[0].device()) {
    return at::native::foreach_tensor_mul_tensor_kernel_slow_(self, other);
  }
  void* factor = other.data_ptr();
  launch("aten::_foreach_mul_", self, {pointers_of(self), pointers_of(self)}, [factor](size_t, Dense& d) {
    d.broadcast(factor);
    kernels::binary(kernels::BinaryOp::kMul, d.args, {1.0, 1});
  });
}

// Each tensor's vector norm as a 0-dim tensor (clip_grad_norm_), all in one command.
std::vector<at::Tensor> norm(at::TensorList self, const at::Scalar& ord, std::optional<c10::ScalarType> dtype) {
  const double p = ord.toDouble();
  const bool native_ord = p == 0.0 || p == 1.0 || p == 2.0 || std::isinf(p);
  bool nonempty = true;
  for (const at::Tensor& t : self) nonempty = nonempty && t.numel() > 0;
  if (!single_command({self}) || !native_ord || (std::isinf(p) && !nonempty) ||
      (dtype.has_value() && *dtype != self[0].scalar_type())) {
    return at::native::foreach_tensor_norm_slow(self, ord, dtype);
  }
  const kernels::ReduceOp op = p == 0.0 ? kernels::ReduceOp::kNorm0 : p == 1.0 ? kernels::ReduceOp::kNorm1
                               : p == 2.0 ? kernels::ReduceOp::kNorm2
                               : p > 0 ? kernels::ReduceOp::kNormInf : kernels::ReduceOp::kNormNegInf;
  std::vector<at::Tensor> result;
  for (const at::Tensor& t : self) result.push_back(at::empty({}, t.options()));
  const kernels::DType kind = to_kernel_dtype(self[0].scalar_type());
  std::vector<void*> inputs, outputs;
  for (size_t i = 0; i < self.size(); ++i) {
    inputs.push_back(self[i].data_ptr());
    outputs.push_back(result[i].data_ptr());
  }
  std::vector<int64_t> sizes;
  for (const at::Tensor& t : self) sizes.push_back(t.numel());
  enqueue(self[0], "aten::_foreach_norm", {&self[0]}, [=] {
    for (size_t i = 0; i < sizes.size(); ++i) {
      kernels::StridedView in, out;
      in.data = inputs[i];
      in.dtype = kind;
      in.ndim = 1;
      in.sizes[0] = sizes[i];
      in.strides[0] = 1;
      out.data = outputs[i];
      out.dtype = kind;
      kernels::reduce(op, out, in, 1);
    }
  });
  return result;
}

void div_scalar_(at::TensorList self, const at::Scalar& scalar) {
  if (!single_command({self})) return at::native::foreach_tensor_div_scalar_kernel_slow_(self, scalar);
  activation_each("aten::_foreach_div_", self, kernels::ActivationOp::kDivideBy, {scalar.toDouble()});
}

void div_scalarlist_(at::TensorList self, at::ArrayRef<at::Scalar> scalars) {
  if (!single_command({self}) || scalars.size() != self.size()) {
    return at::native::foreach_tensor_div_scalarlist_kernel_slow_(self, scalars);
  }
  activation_each("aten::_foreach_div_", self, kernels::ActivationOp::kDivideBy, values_of(scalars));
}

void add_scalar_(at::TensorList self, const at::Scalar& scalar) {
  if (!single_command({self})) return at::native::foreach_tensor_add_scalar_kernel_slow_(self, scalar);
  binary_scalar_into("aten::_foreach_add_", self, self, kernels::BinaryOp::kAdd, scalar.toDouble());
}

void add_list_(at::TensorList self, at::TensorList other, const at::Scalar& alpha) {
  std::optional<Operands> operands = single_command({self}) ? other_operands(self, other) : std::nullopt;
  if (!operands) return at::native::foreach_tensor_add_list_kernel_slow_(self, other, alpha);
  binary_list_into("aten::_foreach_add_", self, self, std::move(*operands), kernels::BinaryOp::kAdd, alpha.toDouble());
}

// A bool scalar takes the per-tensor path, which refuses it as CPU does.
void sub_scalar_(at::TensorList self, const at::Scalar& scalar) {
  if (!single_command({self}) || scalar.isBoolean()) {
    return at::native::foreach_tensor_sub_scalar_kernel_slow_(self, scalar);
  }
  binary_scalar_into("aten::_foreach_sub_", self, self, kernels::BinaryOp::kSub, scalar.toDouble());
}

void sub_list_(at::TensorList self, at::TensorList other, const at::Scalar& alpha) {
  std::optional<Operands> operands = single_command({self}) ? other_operands(self, other) : std::nullopt;
  if (!operands) return at::native::foreach_tensor_sub_list_kernel_slow_(self, other, alpha);
  binary_list_into("aten::_foreach_sub_", self, self, std::move(*operands), kernels::BinaryOp::kSub, alpha.toDouble());
}

void mul_list_(at::TensorList self, at::TensorList other) {
  std::optional<Operands> operands = single_command({self}) ? other_operands(self, other) : std::nullopt;
  if (!operands) return at::native::foreach_tensor_mul_list_kernel_slow_(self, other);
  binary_list_into("aten::_foreach_mul_", self, self, std::move(*operands), kernels::BinaryOp::kMul, 1.0);
}

void div_list_(at::TensorList self, at::TensorList other) {
  std::optional<Operands> operands = single_command({self}) ? other_operands(self, other) : std::nullopt;
  if (!operands) return at::native::foreach_tensor_div_list_kernel_slow_(self, other);
  binary_list_into("aten::_foreach_div_", self, self, std::move(*operands), kernels::BinaryOp::kDiv, 1.0);
}

void neg_(at::TensorList self) {
  if (!single_command({self})) return at::native::foreach_tensor_neg_slow_(self);
  unary_into("aten::_foreach_neg_", self, self, kernels::UnaryOp::kNeg);
}

void reciprocal_(at::TensorList self) {
  if (!single_command({self})) return at::native::foreach_tensor_reciprocal_slow_(self);
  unary_into("aten::_foreach_reciprocal_", self, self, kernels::UnaryOp::kReciprocal);
}

void lerp_scalar_(at::TensorList self, at::TensorList ends, const at::Scalar& weight) {
  if (!single_command({self, ends})) return at::native::foreach_tensor_lerp_list_kernel_slow_(self, ends, weight);
  lerp_into("aten::_foreach_lerp_", self, self, ends, weight.toDouble());
}

void addcmul_scalar_(at::TensorList self, at::TensorList t1, at::TensorList t2, const at::Scalar& value) {
  if (!single_command({self, t1, t2})) return at::native::foreach_tensor_addcmul_scalar_slow_(self, t1, t2, value);
  ternary_scalar_into("aten::_foreach_addcmul_", self, self, t1, t2, kernels::TernaryOp::kAddcmul, value.toDouble());
}

void addcdiv_scalar_(at::TensorList self, at::TensorList t1, at::TensorList t2, const at::Scalar& value) {
  if (!single_command({self, t1, t2})) return at::native::foreach_tensor_addcdiv_scalar_slow_(self, t1, t2, value);
  ternary_scalar_into("aten::_foreach_addcdiv_", self, self, t1, t2, kernels::TernaryOp::kAddcdiv, value.toDouble());
}

void addcdiv_scalarlist_(at::TensorList self, at::TensorList t1, at::TensorList t2, at::ArrayRef<at::Scalar> scalars) {
  if (!single_command({self, t1, t2}) || scalars.size() != self.size()) {
    return at::native::foreach_tensor_addcdiv_scalarlist_slow_(self, t1, t2, scalars);
  }
  const std::vector<double> values = values_of(scalars);
  launch("aten::_foreach_addcdiv_", self, {pointers_of(self), pointers_of(self), pointers_of(t1), pointers_of(t2)},
         [values](size_t i, Dense& d) { kernels::ternary(kernels::TernaryOp::kAddcdiv, d.args, {values[i], 0}); });
}

// Out-of-place forms: what a functionalized graph calls (a compiled optimizer step), one command
// each as the in-place forms; without them each ran per tensor.
std::vector<at::Tensor> add_scalar(at::TensorList self, const at::Scalar& scalar) {
  if (!single_command({self})) return at::native::foreach_tensor_add_scalar_kernel_slow(self, scalar);
  return binary_scalar("aten::_foreach_add", self, kernels::BinaryOp::kAdd, scalar.toDouble());
}

std::vector<at::Tensor> sub_scalar(at::TensorList self, const at::Scalar& scalar) {
  if (!single_command({self}) || scalar.isBoolean()) {
    return at::native::foreach_tensor_sub_scalar_kernel_slow(self, scalar);
  }
  return binary_scalar("aten::_foreach_sub", self, kernels::BinaryOp::kSub, scalar.toDouble());
}

std::vector<at::Tensor> mul_scalar(at::TensorList self, const at::Scalar& scalar) {
  if (!single_command({self})) return at::native::foreach_tensor_mul_scalar_kernel_slow(self, scalar);
  return binary_scalar("aten::_foreach_mul", self, kernels::BinaryOp::kMul, scalar.toDouble());
}

std::vector<at::Tensor> div_scalar(at::TensorList self, const at::Scalar& scalar) {
  if (!single_command({self})) return at::native::foreach_tensor_div_scalar_kernel_slow(self, scalar);
  return binary_scalar("aten::_foreach_div", self, kernels::BinaryOp::kDiv, scalar.toDouble());
}

std::vector<at::Tensor> add_list(at::TensorList self, at::TensorList other, const at::Scalar& alpha) {
  std::optional<Operands> operands = single_command({self}) ? other_operands(self, other) : std::nullopt;
  if (!operands) return at::native::foreach_tensor_add_list_kernel_slow(self, other, alpha);
  return binary_list("aten::_foreach_add", self, std::move(*operands), kernels::BinaryOp::kAdd, alpha.toDouble());
}

std::vector<at::Tensor> sub_list(at::TensorList self, at::TensorList other, const at::Scalar& alpha) {
  std::optional<Operands> operands = single_command({self}) ? other_operands(self, other) : std::nullopt;
  if (!operands) return at::native::foreach_tensor_sub_list_kernel_slow(self, other, alpha);
  return binary_list("aten::_foreach_sub", self, std::move(*operands), kernels::BinaryOp::kSub, alpha.toDouble());
}

std::vector<at::Tensor> mul_list(at::TensorList self, at::TensorList other) {
  std::optional<Operands> operands = single_command({self}) ? other_operands(self, other) : std::nullopt;
  if (!operands) return at::native::foreach_tensor_mul_list_kernel_slow(self, other);
  return binary_list("aten::_foreach_mul", self, std::move(*operands), kernels::BinaryOp::kMul, 1.0);
}

std::vector<at::Tensor> div_list(at::TensorList self, at::TensorList other) {
  std::optional<Operands> operands = single_command({self}) ? other_operands(self, other) : std::nullopt;
  if (!operands) return at::native::foreach_tensor_div_list_kernel_slow(self, other);
  return binary_list("aten::_foreach_div", self, std::move(*operands), kernels::BinaryOp::kDiv, 1.0);
}

std::vector<at::Tensor> lerp_scalar(at::TensorList self, at::TensorList ends, const at::Scalar& weight) {
  if (!single_command({self, ends})) return at::native::foreach_tensor_lerp_list_kernel_slow(self, ends, weight);
  std::vector<at::Tensor> result = results_like(self);
  lerp_into("aten::_foreach_lerp", result, self, ends, weight.toDouble());
  return result;
}

std::vector<at::Tensor> addcmul_scalar(at::TensorList self, at::TensorList t1, at::TensorList t2,
                                       const at::Scalar& value) {
  if (!single_command({self, t1, t2})) return at::native::foreach_tensor_addcmul_scalar_slow(self, t1, t2, value);
  std::vector<at::Tensor> result = results_like(self);
  ternary_scalar_into("aten::_foreach_addcmul", result, self, t1, t2, kernels::TernaryOp::kAddcmul, value.toDouble());
  return result;
}

std::vector<at::Tensor> addcdiv_scalar(at::TensorList self, at::TensorList t1, at::TensorList t2,
                                       const at::Scalar& value) {
  if (!single_command({self, t1, t2})) return at::native::foreach_tensor_addcdiv_scalar_slow(self, t1, t2, value);
  std::vector<at::Tensor> result = results_like(self);
  ternary_scalar_into("aten::_foreach_addcdiv", result, self, t1, t2, kernels::TernaryOp::kAddcdiv, value.toDouble());
  return result;
}

// scalar ** exponent[i] (a compiled optimizer step's bias corrections), one command.
std::vector<at::Tensor> pow_scalar_and_tensor(const at::Scalar& scalar, at::TensorList exponent) {
  if (!single_command({exponent}) || !(scalar.isFloatingPoint() || scalar.isIntegral(false))) {
    return at::native::foreach_scalar_pow_list_kernel_slow(scalar, exponent);
  }
  std::vector<at::Tensor> result = results_like(exponent);
  launch("aten::_foreach_pow", exponent, {pointers_of(result), values(scalar.toDouble(), exponent.size()),
                                          pointers_of(exponent)},
         [](size_t, Dense& d) { kernels::binary(kernels::BinaryOp::kPow, d.args, {1.0, 0}); });
  return result;
}

// Whether copying every src[i] into self[i] at once could differ from copying them in turn: some
// written tensor's memory meets another entry's (a self[i] that is src[i] copies nothing).
bool copies_overlap(at::TensorList self, at::TensorList src) {
  struct Range {
    uintptr_t begin, end;
    bool written;
  };
  std::vector<Range> ranges;
  for (size_t i = 0; i < self.size(); ++i) {
    const auto to = reinterpret_cast<uintptr_t>(self[i].data_ptr()), from = reinterpret_cast<uintptr_t>(src[i].data_ptr());
    const auto bytes = static_cast<uintptr_t>(self[i].nbytes());
    if (to == from || bytes == 0) continue;
    ranges.push_back({to, to + bytes, true});
    ranges.push_back({from, from + bytes, false});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  uintptr_t any_end = 0, written_end = 0;  // the furthest end of the ranges so far, and of the written ones
  for (const Range& r : ranges) {
    if (r.begin < (r.written ? any_end : written_end)) return true;
    any_end = std::max(any_end, r.end);
    if (r.written) written_end = std::max(written_end, r.end);
  }
  return false;
}

// self[i] = src[i] (a compiled step writing its updated state back), one command.
void copy_(at::TensorList self, at::TensorList src, bool non_blocking) {
  if (!single_command({self, src}) || copies_overlap(self, src)) {
    return at::native::foreach_tensor_copy_list_kernel_slow_(self, src, non_blocking);
  }
  const int64_t item = static_cast<int64_t>(self[0].element_size());
  launch("aten::_foreach_copy_", self, {pointers_of(self), pointers_of(src)}, [item](size_t, Dense& d) {
    if (d.args.data[0] != d.args.data[1]) std::memcpy(d.args.data[0], d.args.data[1], static_cast<size_t>(d.numel * item));
  });
}

std::vector<at::Tensor> unary_each(const char* op, at::TensorList self, kernels::UnaryOp kind) {
  std::vector<at::Tensor> result = results_like(self);
  unary_into(op, result, self, kind);
  return result;
}

std::vector<at::Tensor> neg(at::TensorList self) {
  if (!single_command({self})) return at::native::foreach_tensor_neg_slow(self);
  return unary_each("aten::_foreach_neg", self, kernels::UnaryOp::kNeg);
}

std::vector<at::Tensor> reciprocal(at::TensorList self) {
  if (!single_command({self})) return at::native::foreach_tensor_reciprocal_slow(self);
  return unary_each("aten::_foreach_reciprocal", self, kernels::UnaryOp::kReciprocal);
}

std::vector<at::Tensor> sqrt(at::TensorList self) {
  if (!single_command({self})) return at::native::foreach_tensor_sqrt_slow(self);
  return unary_each("aten::_foreach_sqrt", self, kernels::UnaryOp::kSqrt);
}

void sqrt_(at::TensorList self) {
  if (!single_command({self})) return at::native::foreach_tensor_sqrt_slow_(self);
  unary_into("aten::_foreach_sqrt_", self, self, kernels::UnaryOp::kSqrt);
}

}  // namespace foreach

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_foreach_mul_.Scalar", TORCH_FN(foreach::mul_scalar_));
  m.impl("_foreach_mul_.ScalarList", TORCH_FN(foreach::mul_scalarlist_));
  m.impl("_foreach_mul_.Tensor", TORCH_FN(foreach::mul_tensor_));
  m.impl("_foreach_norm.Scalar", TORCH_FN(foreach::norm));
  m.impl("_foreach_div_.Scalar", TORCH_FN(foreach::div_scalar_));
  m.impl("_foreach_div_.ScalarList", TORCH_FN(foreach::div_scalarlist_));
  m.impl("_foreach_add_.Scalar", TORCH_FN(foreach::add_scalar_));
  m.impl("_foreach_add_.List", TORCH_FN(foreach::add_list_));
  m.impl("_foreach_lerp_.Scalar", TORCH_FN(foreach::lerp_scalar_));
  m.impl("_foreach_sub_.Scalar", TORCH_FN(foreach::sub_scalar_));
  m.impl("_foreach_sub_.List", TORCH_FN(foreach::sub_list_));
  m.impl("_foreach_mul_.List", TORCH_FN(foreach::mul_list_));
  m.impl("_foreach_div_.List", TORCH_FN(foreach::div_list_));
  m.impl("_foreach_neg_", TORCH_FN(foreach::neg_));
  m.impl("_foreach_reciprocal_", TORCH_FN(foreach::reciprocal_));
  m.impl("_foreach_addcmul_.Scalar", TORCH_FN(foreach::addcmul_scalar_));
  m.impl("_foreach_addcdiv_.Scalar", TORCH_FN(foreach::addcdiv_scalar_));
  m.impl("_foreach_addcdiv_.ScalarList", TORCH_FN(foreach::addcdiv_scalarlist_));
  m.impl("_foreach_sqrt", TORCH_FN(foreach::sqrt));
  m.impl("_foreach_add.Scalar", TORCH_FN(foreach::add_scalar));
  m.impl("_foreach_sub.Scalar", TORCH_FN(foreach::sub_scalar));
  m.impl("_foreach_mul.Scalar", TORCH_FN(foreach::mul_scalar));
  m.impl("_foreach_div.Scalar", TORCH_FN(foreach::div_scalar));
  m.impl("_foreach_add.List", TORCH_FN(foreach::add_list));
  m.impl("_foreach_sub.List", TORCH_FN(foreach::sub_list));
  m.impl("_foreach_mul.List", TORCH_FN(foreach::mul_list));
  m.impl("_foreach_div.List", TORCH_FN(foreach::div_list));
  m.impl("_foreach_addcmul.Scalar", TORCH_FN(foreach::addcmul_scalar));
  m.impl("_foreach_addcdiv.Scalar", TORCH_FN(foreach::addcdiv_scalar));
  m.impl("_foreach_neg", TORCH_FN(foreach::neg));
  m.impl("_foreach_lerp.Scalar", TORCH_FN(foreach::lerp_scalar));
  m.impl("_foreach_copy_", TORCH_FN(foreach::copy_));
  m.impl("_foreach_pow.ScalarAndTensor", TORCH_FN(foreach::pow_scalar_and_tensor));
  m.impl("_foreach_reciprocal", TORCH_FN(foreach::reciprocal));
  m.impl("_foreach_sqrt_", TORCH_FN(foreach::sqrt_));
}

}  // namespace torchneuron::aten
