// The native executor of a compiled program: the step list of a planned graph (fused kernels
// from the artifact and ATen ops called through the dispatcher), run without returning to
// Python between steps. Values live in a flat environment of IValues, indexed by the ids the
// Python side assigned; each is dropped after its last use, as the planner decided.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "aten/compiled/compiled_launch.h"

namespace torchneuron::aten {

// An element of a list argument built per call: a value id (>= 0) or a constant.
struct ListElement {
  int value = -1;
  c10::IValue constant;
};

// An argument read from a value. A size (dynamic shapes) passed where the schema takes a
// Tensor becomes a wrapped-number tensor, as Python's argument parser makes it.
struct ValueArgument {
  int position = 0;
  int value = -1;
  bool number_as_tensor = false;
};

// An argument that is a list holding values (Tensor[], Tensor?[] or SymInt[]).
struct ListArgument {
  enum class Kind { kTensors, kOptionalTensors, kInts };
  int position = 0;
  Kind kind = Kind::kTensors;
  std::vector<ListElement> elements;
};

// A fused-kernel output: where it lives and the eager layout it must have.
struct KernelOutput {
  int value = -1;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::optional<std::pair<std::vector<int64_t>, std::vector<int64_t>>> layout;  // (sizes, strides)
  int buffer_slot = -1;  // planned buffer shared with values of disjoint lifetimes, or -1
  int overwrites = -1;   // the dying input value whose buffer it takes, or -1
  // In a reduction kernel: the kernel's shape, or the reduced shape with the folded dims kept
  // as size 1 or dropped.
  enum class Form : uint8_t { kFull, kKeepDim, kSqueezed };
  Form form = Form::kFull;
};

class NativeProgram {
 public:
  NativeProgram(int num_values, int num_buffer_slots, std::vector<int> input_values);

  // An ATen op call: `arguments` is the full schema-ordered stack with placeholders where
  // `value_arguments` and `list_arguments` fill in per call. `results` gets one value id per
  // schema return (-1: not needed). A folded step runs once and keeps its results.
  void add_op(const std::string& name, const std::string& overload, std::vector<c10::IValue> arguments,
              std::vector<ValueArgument> value_arguments, std::vector<ListArgument> list_arguments,
              std::vector<int> results, bool fold, std::string description);
  // The last op's results at these stack positions get these strides (see Step::restride).
  void restride_results(std::vector<std::pair<int, std::vector<int64_t>>> restride);
  // A fused kernel at `entry`; `static_shape` is empty when sizes are symbolic (then the
  // inputs' broadcast shape is used). A reduction kernel folds `reduce_dims` (not empty).
  void add_kernel(uintptr_t entry, std::vector<int> inputs, std::vector<KernelOutput> outputs,
                  std::optional<std::vector<int64_t>> static_shape, std::vector<int64_t> reduce_dims);
  // Integer arithmetic on sizes (dynamic shapes): `op` is one of + - * / % (floor division and
  // modulo, as Python computes them) and n (negation of `a`).
  void add_int_arithmetic(char op, ListElement a, ListElement b, int result);
  // A list of the tensors held by `elements` (a foreach kernel's operand), as value `result`.
  void add_pack(std::vector<int> elements, int result);
  // The foreach kernel at `entry` (see launch_fused_foreach): each input value holds a list or
  // one tensor for every index; each output (value, dtype, target) gets a list, of the tensors
  // the list value `target` holds where it is not -1 and they can take the results.
  void add_foreach_kernel(uintptr_t entry, std::vector<int> inputs,
                          std::vector<std::tuple<int, c10::ScalarType, int>> outputs);
  // Element `index` of the list held by value `source` (ops returning Tensor[]).
  void add_list_item(int source, int64_t index, int result);
  // Fuses the kernel at step `kernel_step` into the mm or bmm at step `mm_step` as its epilogue
  // (see launch_fused_after_product): the mm only allocates its product, the steps between
  // (views of the product) run as usual, and the kernel, whose input `product_input` reads the
  // product, is launched with the mm as one device job. Where that cannot be done at run time,
  // the mm is launched alone first.
  void fuse_product_epilogue(int mm_step, int kernel_step, int product_input);
  // Fuses the kernel at step `kernel_step` into the mm or bmm at step `mm_step`, whose first
  // operand is (a view of) one of the kernel's outputs, as its prologue: the kernel only
  // allocates its outputs, the steps between (metadata only) run as usual, and the kernel writes
  // each block of the operand's rows right before the product reads it, in one device job with
  // the product (and its epilogue). Where that cannot be done at run time, the kernel is
  // launched alone first.
  void fuse_product_prologue(int kernel_step, int mm_step);
  // Values whose last use is the step added last.
  void release_after_last_step(std::vector<int> values);
  void set_constant(int value, c10::IValue constant);
  void set_outputs(std::vector<int> values);  // -1: None

  const c10::FunctionSchema& schema_of(const std::string& name, const std::string& overload) const;

  std::vector<c10::IValue> run(std::vector<c10::IValue>&& inputs);

 private:
  struct Step {
    enum class Kind { kOp, kKernel, kListItem, kIntArithmetic, kPack, kForeachKernel };
    Kind kind = Kind::kOp;
    // kOp
    std::optional<c10::OperatorHandle> op;
    std::vector<c10::IValue> arguments;
    std::vector<ValueArgument> value_arguments;
    std::vector<ListArgument> list_arguments;
    std::vector<int> results;
    bool fold = false;
    std::vector<c10::IValue> folded;
    std::string description;
    // Results (stack positions) that later views need in the traced strides: restrided if the
    // eager op laid them out otherwise.
    std::vector<std::pair<int, std::vector<int64_t>>> restride;
    // kKernel
    uintptr_t entry = 0;
    std::vector<int> inputs;
    std::vector<KernelOutput> outputs;
    std::optional<std::vector<int64_t>> static_shape;
    std::vector<int64_t> reduce_dims;
    int product_input = -1;     // the input reading a deferred mm's product (an epilogue), or -1
    // An mm whose product an epilogue kernel computes with it; steps that leave it deferred.
    bool defers_product = false;
    bool keeps_product_deferred = false;
    // A prologue kernel left for the mm that reads its output; steps that leave it pending; that mm.
    bool defers_kernel = false;
    bool keeps_kernel_deferred = false;
    bool takes_prologue = false;
    // kForeachKernel (entry, inputs) and kPack (inputs: the elements, results)
    std::vector<c10::ScalarType> output_dtypes;
    std::vector<int> output_targets;
    // kListItem
    int source = -1;
    int64_t index = 0;
    // kIntArithmetic
    char arithmetic = '+';
    ListElement a, b;
    std::vector<int> release;
  };

  // An mm or bmm allocated but not yet launched: its operands, product and prologue kernel.
  struct DeferredProduct {
    at::Tensor a, b, product;
    std::optional<FusedKernel> prologue;
  };

  // Step `index`, checked to be an mm or bmm a kernel can fuse with.
  Step& product_step(int index);
  void run_op(Step& step, std::vector<c10::IValue>& env);
  static void run_int_arithmetic(const Step& step, std::vector<c10::IValue>& env);
  static void run_foreach_kernel(const Step& step, std::vector<c10::IValue>& env);
  void run_kernel(const Step& step, std::vector<c10::IValue>& env, std::vector<at::Tensor>& buffers,
                  std::optional<DeferredProduct>& deferred, std::optional<FusedKernel>& pending);
  // The mm or bmm at `step` with the pending prologue kernel.
  void run_product_with_prologue(Step& step, std::vector<c10::IValue>& env, std::optional<DeferredProduct>& deferred,
                                 std::optional<FusedKernel>& pending);
  // Allocates the product of the mm or bmm at `step` and leaves its launch to the epilogue kernel;
  // false when the operands need mm's general path.
  static bool defer_product(const Step& step, std::vector<c10::IValue>& env, std::optional<DeferredProduct>& deferred);
  static void launch_deferred(std::optional<DeferredProduct>& deferred);

  std::mutex fold_mutex_;
  int num_values_;
  int num_buffer_slots_;
  std::vector<int> input_values_;
  std::vector<std::pair<int, c10::IValue>> constants_;
  std::vector<int> outputs_;
  std::vector<Step> steps_;
};

}  // namespace torchneuron::aten
