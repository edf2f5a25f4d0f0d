#include "aten/compiled/compiled_program.h"

#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>

#include <algorithm>
#include <mutex>

#include "aten/compiled/compiled_launch.h"
#include "aten/ops/layout.h"

namespace torchneuron::aten {

namespace {

// An empty tensor in eager mode's layout: the traced strides when the sizes are the traced
// ones, else the traced dim order (outermost first), else row-major.
at::Tensor allocate(const std::vector<int64_t>& shape, const KernelOutput& out, const c10::Device& device) {
  const auto options = at::TensorOptions().dtype(out.dtype).device(device);
  if (!out.layout) return at::empty(shape, options);
  const auto& [sizes, strides] = *out.layout;
  if (shape == sizes) return at::empty_strided(sizes, strides, options);
  return empty_in_order(dim_order(strides), shape, options);
}

// Whether a planned buffer (a dying input's, or a slot's last tensor) can hold `out`: the
// planner matches sizes and dtypes only, and a slot may last have held a value that eager mode
// lays out otherwise (a later view of `out` relies on its strides).
bool suits(const at::Tensor& buffer, const std::vector<int64_t>& shape, const KernelOutput& out) {
  if (!buffer.defined() || !buffer.sizes().equals(shape) || buffer.scalar_type() != out.dtype) return false;
  if (out.layout) return out.layout->first == shape && buffer.strides().equals(out.layout->second);
  int64_t step = 1;  // exactly row-major, size-1 dims included, as at::empty makes it
  for (int64_t d = buffer.dim() - 1; d >= 0; --d) {
    if (buffer.stride(d) != step) return false;
    step *= std::max<int64_t>(shape[d], 1);
  }
  return true;
}

c10::IValue build_list(const ListArgument& list, const std::vector<c10::IValue>& env) {
  auto element = [&](const ListElement& e) -> const c10::IValue& { return e.value >= 0 ? env[e.value] : e.constant; };
  switch (list.kind) {
    case ListArgument::Kind::kTensors: {
      c10::List<at::Tensor> out;
      out.reserve(list.elements.size());
      for (const ListElement& e : list.elements) out.push_back(element(e).toTensor());
      return out;
    }
    case ListArgument::Kind::kOptionalTensors: {
      c10::List<std::optional<at::Tensor>> out;
      out.reserve(list.elements.size());
      for (const ListElement& e : list.elements) out.push_back(element(e).toOptional<at::Tensor>());
      return out;
    }
    case ListArgument::Kind::kInts: {
      c10::List<int64_t> out;
      out.reserve(list.elements.size());
      for (const ListElement& e : list.elements) out.push_back(element(e).toInt());
      return out;
    }
  }
  return {};
}

}  // namespace

NativeProgram::NativeProgram(int num_values, int num_buffer_slots, std::vector<int> input_values)
    : num_values_(num_values), num_buffer_slots_(num_buffer_slots), input_values_(std::move(input_values)) {}

const c10::FunctionSchema& NativeProgram::schema_of(const std::string& name, const std::string& overload) const {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str()).schema();
}

void NativeProgram::add_op(const std::string& name, const std::string& overload, std::vector<c10::IValue> arguments,
                           std::vector<ValueArgument> value_arguments, std::vector<ListArgument> list_arguments,
                           std::vector<int> results, bool fold, std::string description) {
  Step step;
  step.kind = Step::Kind::kOp;
  step.op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  step.arguments = std::move(arguments);
  step.value_arguments = std::move(value_arguments);
  step.list_arguments = std::move(list_arguments);
  step.results = std::move(results);
  step.fold = fold;
  step.description = std::move(description);
  steps_.push_back(std::move(step));
}

void NativeProgram::restride_results(std::vector<std::pair<int, std::vector<int64_t>>> restride) {
  TORCH_CHECK(!steps_.empty() && steps_.back().kind == Step::Kind::kOp, "compiled program: restride without an op");
  for (const auto& [position, strides] : restride) {
    TORCH_CHECK(position >= 0 && position < static_cast<int>(steps_.back().results.size()),
                "compiled program: restride of result ", position, " of ", steps_.back().description);
  }
  steps_.back().restride = std::move(restride);
}

void NativeProgram::add_kernel(uintptr_t entry, std::vector<int> inputs, std::vector<KernelOutput> outputs,
                               std::optional<std::vector<int64_t>> static_shape, std::vector<int64_t> reduce_dims) {
  TORCH_CHECK(!inputs.empty() && !outputs.empty(), "compiled kernel: expected inputs and outputs");
  check_kernel_entry(entry, "compiled kernel");
  Step step;
  step.kind = Step::Kind::kKernel;
  step.entry = entry;
  step.inputs = std::move(inputs);
  step.outputs = std::move(outputs);
  step.static_shape = std::move(static_shape);
  step.reduce_dims = std::move(reduce_dims);
  steps_.push_back(std::move(step));
}

void NativeProgram::add_pack(std::vector<int> elements, int result) {
  Step step;
  step.kind = Step::Kind::kPack;
  step.inputs = std::move(elements);
  step.results = {result};
  steps_.push_back(std::move(step));
}

void NativeProgram::add_foreach_kernel(uintptr_t entry, std::vector<int> inputs,
                                       std::vector<std::tuple<int, c10::ScalarType, int>> outputs) {
  TORCH_CHECK(!inputs.empty() && !outputs.empty(), "compiled foreach kernel: expected inputs and outputs");
  check_kernel_entry(entry, "compiled foreach kernel");
  Step step;
  step.kind = Step::Kind::kForeachKernel;
  step.entry = entry;
  step.inputs = std::move(inputs);
  for (const auto& [value, dtype, target] : outputs) {
    step.results.push_back(value);
    step.output_dtypes.push_back(dtype);
    step.output_targets.push_back(target);
  }
  steps_.push_back(std::move(step));
}

void NativeProgram::add_list_item(int source, int64_t index, int result) {
  Step step;
  step.kind = Step::Kind::kListItem;
  step.source = source;
  step.index = index;
  step.results = {result};
  steps_.push_back(std::move(step));
}

void NativeProgram::add_int_arithmetic(char op, ListElement a, ListElement b, int result) {
  TORCH_CHECK(std::string("+-*/%n").find(op) != std::string::npos, "compiled program: unknown integer operation '", op,
              "'");
  Step step;
  step.kind = Step::Kind::kIntArithmetic;
  step.arithmetic = op;
  step.a = std::move(a);
  step.b = std::move(b);
  step.results = {result};
  steps_.push_back(std::move(step));
}

NativeProgram::Step& NativeProgram::product_step(int index) {
  Step& mm = steps_[index];
  TORCH_CHECK(mm.kind == Step::Kind::kOp && (mm.op->schema().name() == "aten::mm" || mm.op->schema().name() == "aten::bmm") &&
                  mm.value_arguments.size() == 2 && mm.results.size() == 1 && !mm.fold,
              "compiled program: step ", index, " is not an mm or bmm");
  return mm;
}

void NativeProgram::fuse_product_epilogue(int mm_step, int kernel_step, int product_input) {
  TORCH_CHECK(mm_step >= 0 && mm_step < kernel_step && kernel_step < static_cast<int>(steps_.size()),
              "compiled program: bad epilogue steps ", mm_step, " and ", kernel_step);
  Step& mm = product_step(mm_step);
  Step& kernel = steps_[kernel_step];
  TORCH_CHECK(kernel.kind == Step::Kind::kKernel && product_input >= 0 &&
                  product_input < static_cast<int>(kernel.inputs.size()),
              "compiled program: step ", kernel_step, " is not a kernel with input ", product_input);
  mm.defers_product = true;
  kernel.product_input = product_input;
  for (int s = mm_step + 1; s < kernel_step; ++s) steps_[s].keeps_product_deferred = true;
}

void NativeProgram::fuse_product_prologue(int kernel_step, int mm_step) {
  TORCH_CHECK(kernel_step >= 0 && kernel_step < mm_step && mm_step < static_cast<int>(steps_.size()),
              "compiled program: bad prologue steps ", kernel_step, " and ", mm_step);
  Step& kernel = steps_[kernel_step];
  Step& mm = product_step(mm_step);
  TORCH_CHECK(kernel.kind == Step::Kind::kKernel && kernel.product_input < 0,
              "compiled program: step ", kernel_step, " is not a kernel outside an epilogue");
  kernel.defers_kernel = true;
  mm.takes_prologue = true;
  for (int s = kernel_step + 1; s < mm_step; ++s) steps_[s].keeps_kernel_deferred = true;
}

bool NativeProgram::defer_product(const Step& step, std::vector<c10::IValue>& env,
                                  std::optional<DeferredProduct>& deferred) {
  const c10::IValue& a = env[step.value_arguments[0].value];
  const c10::IValue& b = env[step.value_arguments[1].value];
  if (!a.isTensor() || !b.isTensor()) return false;
  const at::Tensor& left = a.toTensor();
  const at::Tensor& right = b.toTensor();
  const int64_t dims = left.dim();
  if ((dims != 2 && dims != 3) || right.dim() != dims || left.size(-1) != right.size(-2) ||
      (dims == 3 && left.size(0) != right.size(0)) || left.device() != right.device() ||
      left.scalar_type() != right.scalar_type() || left.device().type() != c10::DeviceType::PrivateUse1) {
    return false;
  }
  at::Tensor product = dims == 2 ? at::empty({left.size(0), right.size(1)}, left.options())
                                 : at::empty({left.size(0), left.size(1), right.size(2)}, left.options());
  env[step.results[0]] = product;
  deferred = DeferredProduct{left, right, std::move(product), std::nullopt};
  return true;
}

void NativeProgram::launch_deferred(std::optional<DeferredProduct>& deferred) {
  if (!deferred) return;
  const FusedKernel* prologue = deferred->prologue ? &*deferred->prologue : nullptr;
  launch_product_with_kernels(deferred->product, deferred->a, deferred->b, prologue, nullptr, -1);
  deferred.reset();
}

void NativeProgram::run_product_with_prologue(Step& step, std::vector<c10::IValue>& env,
                                              std::optional<DeferredProduct>& deferred,
                                              std::optional<FusedKernel>& pending) {
  if (!defer_product(step, env, deferred)) {
    launch_fused(*pending);
    pending.reset();
    run_op(step, env);
    return;
  }
  deferred->prologue = std::move(pending);
  pending.reset();
  if (!step.defers_product) launch_deferred(deferred);  // no epilogue to wait for
}

void NativeProgram::release_after_last_step(std::vector<int> values) {
  TORCH_CHECK(!steps_.empty(), "compiled program: no step to release values after");
  steps_.back().release = std::move(values);
}

void NativeProgram::set_constant(int value, c10::IValue constant) { constants_.emplace_back(value, std::move(constant)); }

void NativeProgram::set_outputs(std::vector<int> values) { outputs_ = std::move(values); }

void NativeProgram::run_op(Step& step, std::vector<c10::IValue>& env) {
  std::unique_lock<std::mutex> fold_guard(fold_mutex_, std::defer_lock);
  if (step.fold) fold_guard.lock();  // several threads may run the program; the first computes
  if (step.fold && !step.folded.empty()) {
    for (size_t i = 0; i < step.results.size(); ++i) {
      if (step.results[i] >= 0) env[step.results[i]] = step.folded[i];
    }
    return;
  }
  torch::jit::Stack stack = step.arguments;
  for (const ValueArgument& argument : step.value_arguments) {
    if (argument.number_as_tensor) {
      at::Tensor number = c10::scalar_to_tensor(env[argument.value].toScalar());
      number.unsafeGetTensorImpl()->set_wrapped_number(true);
      stack[argument.position] = std::move(number);
    } else {
      stack[argument.position] = env[argument.value];
    }
  }
  for (const ListArgument& list : step.list_arguments) stack[list.position] = build_list(list, env);
  try {
    step.op->callBoxed(stack);
  } catch (c10::Error& error) {
    error.add_context("raised by node " + step.description + " of a neuron-compiled graph");
    throw;
  }
  TORCH_CHECK(stack.size() == step.results.size(), "compiled program: ", step.description, " returned ", stack.size(),
              " values, expected ", step.results.size());
  for (const auto& [position, strides] : step.restride) {
    if (!stack[position].isTensor()) continue;
    const at::Tensor& t = stack[position].toTensor();
    if (t.strides() == c10::IntArrayRef(strides) || t.dim() != static_cast<int64_t>(strides.size())) continue;
    stack[position] = at::empty_strided(t.sizes(), strides, t.options()).copy_(t);
  }
  for (size_t i = 0; i < stack.size(); ++i) {
    if (step.results[i] >= 0) env[step.results[i]] = stack[i];
  }
  if (step.fold) step.folded = std::move(stack);
}

void NativeProgram::run_int_arithmetic(const Step& step, std::vector<c10::IValue>& env) {
  auto read = [&](const ListElement& e) { return (e.value >= 0 ? env[e.value] : e.constant).toInt(); };
  const int64_t a = read(step.a);
  int64_t result = 0;
  if (step.arithmetic == 'n') {
    result = -a;
  } else {
    const int64_t b = read(step.b);
    TORCH_CHECK(b != 0 || (step.arithmetic != '/' && step.arithmetic != '%'), "compiled program: integer division by zero");
    switch (step.arithmetic) {
      case '+': result = a + b; break;
      case '-': result = a - b; break;
      case '*': result = a * b; break;
      case '/': result = a / b - ((a % b != 0) && ((a < 0) != (b < 0))); break;
      case '%': result = a % b + ((a % b != 0) && ((a < 0) != (b < 0)) ? b : 0); break;
    }
  }
  env[step.results[0]] = result;
}

void NativeProgram::run_kernel(const Step& step, std::vector<c10::IValue>& env, std::vector<at::Tensor>& buffers,
                               std::optional<DeferredProduct>& deferred, std::optional<FusedKernel>& pending) {
  std::vector<at::Tensor> inputs;
  inputs.reserve(step.inputs.size());
  for (int v : step.inputs) inputs.push_back(env[v].toTensor());
  std::vector<int64_t> shape;
  if (step.static_shape) {
    shape = *step.static_shape;
  } else {
    for (const at::Tensor& input : inputs) shape = at::infer_size(shape, input.sizes());
  }
  const c10::Device device = inputs[0].device();
  std::vector<at::Tensor> outputs;
  outputs.reserve(step.outputs.size());
  for (const KernelOutput& out : step.outputs) {
    std::vector<int64_t> out_shape;
    if (out.form == KernelOutput::Form::kFull) {
      out_shape = shape;
    } else {
      for (size_t d = 0; d < shape.size(); ++d) {
        const bool folded = std::find(step.reduce_dims.begin(), step.reduce_dims.end(), d) != step.reduce_dims.end();
        if (!folded) out_shape.push_back(shape[d]);
        else if (out.form == KernelOutput::Form::kKeepDim) out_shape.push_back(1);
      }
    }
    at::Tensor buffer;
    if (out.overwrites >= 0) {
      buffer = env[out.overwrites].toTensor();
    } else if (out.buffer_slot >= 0 && !out.layout) {
      buffer = buffers[out.buffer_slot];
    }
    if (!suits(buffer, out_shape, out)) buffer = allocate(out_shape, out, device);
    if (out.buffer_slot >= 0) buffers[out.buffer_slot] = buffer;
    env[out.value] = buffer;
    outputs.push_back(std::move(buffer));
  }
  FusedKernel kernel{step.entry, std::move(outputs), std::move(inputs), std::move(shape), step.reduce_dims};
  if (step.defers_kernel) {
    pending = std::move(kernel);
  } else if (step.product_input >= 0 && deferred) {
    const FusedKernel* prologue = deferred->prologue ? &*deferred->prologue : nullptr;
    launch_product_with_kernels(deferred->product, deferred->a, deferred->b, prologue, &kernel, step.product_input);
    deferred.reset();
  } else {
    launch_fused(kernel);
  }
}

void NativeProgram::run_foreach_kernel(const Step& step, std::vector<c10::IValue>& env) {
  std::vector<std::vector<at::Tensor>> inputs;
  inputs.reserve(step.inputs.size());
  for (int v : step.inputs) {
    const c10::IValue& value = env[v];
    inputs.push_back(value.isTensorList() ? value.toTensorVector() : std::vector<at::Tensor>{value.toTensor()});
  }
  std::vector<std::vector<at::Tensor>> targets;
  if (std::any_of(step.output_targets.begin(), step.output_targets.end(), [](int v) { return v >= 0; })) {
    for (int v : step.output_targets) targets.push_back(v >= 0 ? env[v].toTensorVector() : std::vector<at::Tensor>{});
  }
  std::vector<std::vector<at::Tensor>> outputs = launch_fused_foreach(step.entry, inputs, step.output_dtypes, targets);
  for (size_t k = 0; k < outputs.size(); ++k) env[step.results[k]] = c10::List<at::Tensor>(outputs[k]);
}

std::vector<c10::IValue> NativeProgram::run(std::vector<c10::IValue>&& inputs) {
  TORCH_CHECK(inputs.size() == input_values_.size(), "compiled program: expected ", input_values_.size(),
              " inputs, got ", inputs.size());
  std::vector<c10::IValue> env(num_values_);
  for (size_t i = 0; i < inputs.size(); ++i) env[input_values_[i]] = std::move(inputs[i]);
  inputs.clear();
  for (const auto& [value, constant] : constants_) env[value] = constant;
  std::vector<at::Tensor> buffers(num_buffer_slots_);
  std::optional<DeferredProduct> deferred;
  std::optional<FusedKernel> pending;  // a prologue kernel waiting for its mm
  for (Step& step : steps_) {
    // Only the prologue's mm (or the metadata steps before it) may see its kernel unlaunched, and
    // only the epilogue kernel (or the views before it) a deferred product.
    if (pending && !step.keeps_kernel_deferred && !step.takes_prologue) {
      launch_fused(*pending);
      pending.reset();
    }
    if (deferred && !step.keeps_product_deferred && step.product_input < 0) launch_deferred(deferred);
    switch (step.kind) {
      case Step::Kind::kOp:
        if (step.takes_prologue && pending) {
          run_product_with_prologue(step, env, deferred, pending);
        } else if (!step.defers_product || !defer_product(step, env, deferred)) {
          run_op(step, env);
        }
        break;
      case Step::Kind::kKernel: run_kernel(step, env, buffers, deferred, pending); break;
      case Step::Kind::kListItem: env[step.results[0]] = env[step.source].toListRef().at(step.index); break;
      case Step::Kind::kIntArithmetic: run_int_arithmetic(step, env); break;
      case Step::Kind::kPack: {
        c10::List<at::Tensor> list;
        list.reserve(step.inputs.size());
        for (int v : step.inputs) list.push_back(env[v].toTensor());
        env[step.results[0]] = std::move(list);
        break;
      }
      case Step::Kind::kForeachKernel: run_foreach_kernel(step, env); break;
    }
    for (int v : step.release) env[v] = c10::IValue();
  }
  if (pending) launch_fused(*pending);
  launch_deferred(deferred);
  std::vector<c10::IValue> outputs;
  outputs.reserve(outputs_.size());
  for (int v : outputs_) outputs.push_back(v >= 0 ? env[v] : c10::IValue());
  return outputs;
}

}  // namespace torchneuron::aten
