// Launching csrc/kernels/elementwise from a built TensorIterator: the operand layout the
// kernels take, host scalars carried by value, and the enqueue with output write-back.
#pragma once

#include <ATen/TensorIterator.h>

#include "aten/adaptive/adaptive_eager.h"
#include "aten/device/neuron_tensor.h"
#include "kernels/elementwise.h"

namespace torchneuron::aten {

// Lays out a built TensorIterator for the kernels. Returns false when a kernel cannot take it
// (too many dims or operands, a host operand that is not a scalar, an unknown dtype, a complex
// one unless `allow_complex`). `scalar_dtype` is what host scalar operands are converted to (the
// inputs' common dtype).
bool to_args(const at::TensorIteratorBase& iter, kernels::ElementwiseArgs& args,
             c10::ScalarType scalar_dtype = c10::ScalarType::Undefined, bool allow_complex = false);

// to_args for kernels that take every input through with_dtypes: uint16/32/64 operands are
// taken too, for with_dtypes to convert (complex ones are not).
bool to_args_converting(const at::TensorIteratorBase& iter, kernels::ElementwiseArgs& args, c10::ScalarType scalar_dtype);

kernels::OpScalar to_op_scalar(const c10::Scalar& value);

// Enqueues the kernel (or records it, under adaptive eager) and writes back outputs that
// TensorIterator computed in a temporary.
template <typename Kernel>
void launch(at::TensorIteratorBase& iter, const char* op, const kernels::ElementwiseArgs& args,
            Kernel kernel) {
  if (iter.numel() > 0 && adaptive::enabled() && adaptive::may_record(iter) && adaptive::record(iter, op, args, kernel)) {
    iter.cast_outputs();
    return;
  }
  if (iter.numel() > 0) {
    const at::Tensor output(iter.output_base());
    const at::Tensor input(iter.input_base(0));
    if (kernels::PackedElementwiseArgs::fits(args)) {
      const kernels::PackedElementwiseArgs packed(args);
      enqueue(output, op, {&input}, [packed, kernel] { kernel(packed.unpack()); });
    } else {
      enqueue(output, op, {&input}, [args, kernel] { kernel(args); });
    }
  }
  iter.cast_outputs();
}

// Predicates read their input as is and write bool; other unary ops compute in the output's
// dtype (unary_float_op gives integer inputs a float output), except abs and angle of complex
// inputs, which write the real dtype. Unary and binary ops take complex operands where the
// kernels have the op.
bool launch_unary(at::TensorIteratorBase& iter, kernels::UnaryOp op, const char* name, bool bool_output);
bool launch_binary(at::TensorIteratorBase& iter, kernels::BinaryOp op, const char* name, bool bool_output,
                   kernels::OpScalar alpha = {1.0, 1});
bool launch_ternary(at::TensorIteratorBase& iter, kernels::TernaryOp op, const char* name, kernels::OpScalar alpha);

// A Python scalar as ATen passes one: a 0-dim CPU wrapped number, which type promotion treats
// as weaker than tensors.
at::Tensor wrapped(const c10::Scalar& value);

}  // namespace torchneuron::aten
