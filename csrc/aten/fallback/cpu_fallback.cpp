#include "aten/fallback/cpu_fallback.h"

#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

namespace torchneuron::aten {
namespace {

FallbackMode mode_from_env() {
  const char* value = std::getenv("TORCHNEURON_FALLBACK");
  if (value == nullptr || std::strcmp(value, "warn") == 0 || *value == '\0') return FallbackMode::kWarn;
  if (std::strcmp(value, "silent") == 0) return FallbackMode::kSilent;
  if (std::strcmp(value, "error") == 0) return FallbackMode::kError;
  return FallbackMode::kWarn;  // torchneuron/__init__.py rejects other values with a clear error
}

std::atomic<FallbackMode> g_mode{mode_from_env()};

struct FallbackCounts {
  std::mutex mutex;
  std::map<std::string, int64_t> calls;
};

FallbackCounts& counts() {
  static auto* instance = new FallbackCounts();  // leaked: ops may run during shutdown
  return *instance;
}

std::string full_name(const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// Index tensors may live on the CPU next to device data, as with CUDA.
bool accepts_cpu_tensors(const std::string& name) {
  return name == "aten::index.Tensor" || name == "aten::index.Tensor_out" || name == "aten::index_put_" ||
         name == "aten::index_put" || name == "aten::index_put.out" || name == "aten::_index_put_impl_" ||
         name == "aten::_index_put_impl" || name == "aten::_index_put_impl.out";
}

// The fallback would run anything on the CPU; refuse what a device kernel would refuse:
// tensors on two neuron devices, or a CPU tensor that is not a 0-dim scalar.
void check_same_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                       const std::string& name) {
  const size_t num_args = op.schema().arguments().size();
  std::optional<c10::Device> neuron_device;
  std::optional<c10::Device> cpu_device;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().type() == c10::DeviceType::PrivateUse1) {
      TORCH_CHECK(!neuron_device || *neuron_device == t.device(),
                  "Expected all tensors to be on the same device, but found at least two devices, ",
                  *neuron_device, " and ", t.device(), "! (when checking arguments for ", name, ")");
      neuron_device = t.device();
    } else if (t.dim() > 0 && !accepts_cpu_tensors(name)) {
      cpu_device = t.device();
    }
  };
  for (size_t i = stack.size() - num_args; i < stack.size(); ++i) {
    const c10::IValue& value = stack[i];
    if (value.isTensor()) {
      visit(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList().vec()) visit(t);
    } else if (value.isList()) {
      for (const c10::IValue& item : value.toListRef()) {
        if (item.isTensor()) visit(item.toTensor());
      }
    }
  }
  TORCH_CHECK(!(neuron_device && cpu_device),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              *neuron_device, " and ", *cpu_device, "! (when checking arguments for ", name,
              "). Move the CPU tensor with .to('neuron').");
}

}  // namespace

void note_cpu_fallback(const std::string& name) {
  const FallbackMode mode = g_mode.load(std::memory_order_relaxed);
  TORCH_CHECK_NOT_IMPLEMENTED(mode != FallbackMode::kError, "'", name,
                              "' has no native neuron kernel, and TORCHNEURON_FALLBACK=error "
                              "forbids running it on the CPU. Unset it to allow the fallback.");
  bool first_call;
  {
    FallbackCounts& c = counts();
    std::lock_guard<std::mutex> lock(c.mutex);
    first_call = ++c.calls[name] == 1;
  }
  if (first_call && mode == FallbackMode::kWarn) {
    TORCH_WARN("Operator '", name, "' has no native neuron kernel and fell back to the CPU "
               "(copied to the host, run there, copied back). This warning is shown once per "
               "operator; torchneuron.fallback_report() counts every call.");
  }
}

void neuron_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = full_name(op);
  check_same_device(op, *stack, name);
  note_cpu_fallback(name);
  at::native::cpu_fallback(op, stack);
}

FallbackMode fallback_mode() { return g_mode.load(); }
void set_fallback_mode(FallbackMode mode) { g_mode = mode; }

std::map<std::string, int64_t> fallback_counts() {
  FallbackCounts& c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.calls;
}

void reset_fallback_counts() {
  FallbackCounts& c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.calls.clear();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_cpu_fallback>());
}

}  // namespace torchneuron::aten
